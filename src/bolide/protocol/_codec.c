/* Compiled twins of the hot parts of the remoting codec (bolide.protocol._codec).
 *
 * Each function takes the common case and returns None for anything else, so that the
 * pure-Python code (which gives the errors and handles every odd input) runs instead:
 *   split_frames      complete, valid frames at the start of a buffer;
 *   decode_json_header a header of standard JSON with int32 numbers and string extFields;
 *   encode_json_header the header as orjson writes it with sorted keys (str fields only);
 *   header_from_ext   a custom header class from extFields of plain strings.
 * The tests compare every function with its Python twin on generated inputs.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static PyObject *command_cls;     /* RemotingCommand */
static PyObject *languages;       /* name -> LanguageCode member */
static PyObject *language_names;  /* LanguageCode member -> name */
static PyObject *lang_java, *lang_other, *json_type, *empty_tuple;
static PyObject *s_code, *s_ext_fields, *s_flag, *s_language, *s_opaque, *s_remark, *s_version;

#define FALLBACK 0
#define OK 1
#define ERROR (-1)

/* ---- frames ------------------------------------------------------------------------------ */

static inline int32_t rd_i32(const unsigned char *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}

/* split_frames(buffer, max_frame_size, frame_cls) -> (frames, pos): the complete frames at the
 * start of buffer; pos is where the first incomplete or invalid one starts. */
static PyObject *split_frames(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t limit;
    PyObject *frame_cls;
    if (!PyArg_ParseTuple(args, "y*nO", &view, &limit, &frame_cls))
        return NULL;
    PyTypeObject *ftype = (PyTypeObject *)frame_cls;
    const unsigned char *b = view.buf;
    Py_ssize_t n = view.len, pos = 0;
    PyObject *frames = PyList_New(0);
    if (frames == NULL)
        goto fail;
    while (n - pos >= 8) {
        int32_t length = rd_i32(b + pos);
        if (length < 4 || (Py_ssize_t)length > limit - 4)
            break;
        uint32_t word = (uint32_t)rd_i32(b + pos + 4);
        Py_ssize_t header_length = word & 0xFFFFFF;
        if (header_length > length - 4)
            break;
        Py_ssize_t end = pos + 4 + length;
        if (end > n)
            break;
        Py_ssize_t start = pos + 8;
        PyObject *frame = ftype->tp_alloc(ftype, 3);
        if (frame == NULL)
            goto fail;
        PyObject *st = PyLong_FromLong((word >> 24) & 0xFF);
        PyObject *head = PyBytes_FromStringAndSize((const char *)b + start, header_length);
        PyObject *body = PyBytes_FromStringAndSize((const char *)b + start + header_length,
                                                   end - start - header_length);
        PyTuple_SET_ITEM(frame, 0, st);
        PyTuple_SET_ITEM(frame, 1, head);
        PyTuple_SET_ITEM(frame, 2, body);
        if (st == NULL || head == NULL || body == NULL || PyList_Append(frames, frame) < 0) {
            Py_DECREF(frame);
            goto fail;
        }
        Py_DECREF(frame);
        pos = end;
    }
    PyBuffer_Release(&view);
    PyObject *result = Py_BuildValue("(Nn)", frames, pos);
    return result;
fail:
    Py_XDECREF(frames);
    PyBuffer_Release(&view);
    return NULL;
}

/* ---- JSON header decode ------------------------------------------------------------------- */

typedef struct {
    const unsigned char *p, *end;
    char *scratch;
    Py_ssize_t cap;
} Parser;

static inline void skip_ws(Parser *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static int hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int grow(Parser *ps, Py_ssize_t need) {
    if (need <= ps->cap)
        return OK;
    Py_ssize_t cap = ps->cap ? ps->cap : 256;
    while (cap < need)
        cap *= 2;
    char *s = PyMem_Realloc(ps->scratch, cap);
    if (s == NULL) {
        PyErr_NoMemory();
        return ERROR;
    }
    ps->scratch = s;
    ps->cap = cap;
    return OK;
}

/* The UTF-8 bytes s[:n] as a str in *out, the parser moved on to ``next``; invalid UTF-8
 * falls back (the Python code names the error). */
static int utf8_string(Parser *ps, const char *s, Py_ssize_t n, const unsigned char *next,
                       PyObject **out) {
    *out = PyUnicode_DecodeUTF8(s, n, NULL);
    if (*out == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
            return ERROR;
        PyErr_Clear();
        return FALLBACK;
    }
    ps->p = next;
    return OK;
}

/* A string at ps->p (on its opening quote) as a str in *out. */
static int parse_string(Parser *ps, PyObject **out) {
    const unsigned char *p = ps->p + 1, *end = ps->end;
    const unsigned char *start = p;
    while (p < end && *p != '"' && *p != '\\' && *p >= 0x20)
        p++;
    if (p >= end || *p < 0x20)
        return FALLBACK;
    if (*p == '"')
        return utf8_string(ps, (const char *)start, p - start, p + 1, out);
    /* escapes: copy into the scratch buffer (never longer than the source) */
    if (grow(ps, end - start) < 0)
        return ERROR;
    char *w = ps->scratch;
    memcpy(w, start, p - start);
    w += p - start;
    while (p < end) {
        unsigned char c = *p;
        if (c == '"')
            break;
        if (c < 0x20)
            return FALLBACK;
        if (c != '\\') {
            *w++ = (char)c;
            p++;
            continue;
        }
        if (end - p < 2)
            return FALLBACK;
        switch (p[1]) {
        case '"': *w++ = '"'; p += 2; break;
        case '\\': *w++ = '\\'; p += 2; break;
        case '/': *w++ = '/'; p += 2; break;
        case 'b': *w++ = '\b'; p += 2; break;
        case 'f': *w++ = '\f'; p += 2; break;
        case 'n': *w++ = '\n'; p += 2; break;
        case 'r': *w++ = '\r'; p += 2; break;
        case 't': *w++ = '\t'; p += 2; break;
        case 'u': {
            if (end - p < 6)
                return FALLBACK;
            int h0 = hexval(p[2]), h1 = hexval(p[3]), h2 = hexval(p[4]), h3 = hexval(p[5]);
            if ((h0 | h1 | h2 | h3) < 0)
                return FALLBACK;
            unsigned cp = (unsigned)((h0 << 12) | (h1 << 8) | (h2 << 4) | h3);
            if (cp >= 0xD800 && cp <= 0xDFFF)
                return FALLBACK; /* surrogates: the Python parsers check the pairs */
            if (cp < 0x80) {
                *w++ = (char)cp;
            } else if (cp < 0x800) {
                *w++ = (char)(0xC0 | (cp >> 6));
                *w++ = (char)(0x80 | (cp & 0x3F));
            } else {
                *w++ = (char)(0xE0 | (cp >> 12));
                *w++ = (char)(0x80 | ((cp >> 6) & 0x3F));
                *w++ = (char)(0x80 | (cp & 0x3F));
            }
            p += 6;
            break;
        }
        default:
            return FALLBACK;
        }
    }
    if (p >= end)
        return FALLBACK;
    return utf8_string(ps, ps->scratch, w - ps->scratch, p + 1, out);
}

/* An integer without fraction or exponent, at most 18 digits. */
static int parse_int(Parser *ps, long long *out) {
    const unsigned char *p = ps->p, *end = ps->end;
    int neg = 0;
    if (p < end && *p == '-') {
        neg = 1;
        p++;
    }
    const unsigned char *digits = p;
    long long v = 0;
    while (p < end && *p >= '0' && *p <= '9') {
        v = v * 10 + (*p - '0');
        p++;
        if (p - digits > 18)
            return FALLBACK;
    }
    Py_ssize_t nd = p - digits;
    if (nd == 0 || (nd > 1 && digits[0] == '0'))
        return FALLBACK;
    if (p < end && (*p == '.' || *p == 'e' || *p == 'E'))
        return FALLBACK;
    *out = neg ? -v : v;
    ps->p = p;
    return OK;
}

static int parse_int32(Parser *ps, long long *out) {
    int r = parse_int(ps, out);
    if (r == OK && (*out < INT32_MIN || *out > INT32_MAX))
        return FALLBACK;
    return r;
}

/* Skip a scalar value (string, integer, true, false, null). */
static int skip_scalar(Parser *ps) {
    const unsigned char *p = ps->p;
    if (p >= ps->end)
        return FALLBACK;
    if (*p == '"') {
        PyObject *s;
        int r = parse_string(ps, &s);
        if (r == OK)
            Py_DECREF(s);
        return r;
    }
    if (*p == '-' || (*p >= '0' && *p <= '9')) {
        long long v;
        return parse_int(ps, &v);
    }
    static const char *words[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        size_t len = strlen(words[i]);
        if ((size_t)(ps->end - p) >= len && memcmp(p, words[i], len) == 0) {
            ps->p = p + len;
            return OK;
        }
    }
    return FALLBACK;
}

/* extFields: an object of string values, into a new dict. */
static int parse_ext(Parser *ps, PyObject **out) {
    PyObject *d = PyDict_New();
    if (d == NULL)
        return ERROR;
    int r = FALLBACK;
    ps->p++; /* '{' */
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == '}') {
        ps->p++;
        *out = d;
        return OK;
    }
    for (;;) {
        PyObject *key = NULL, *value = NULL;
        r = FALLBACK; /* the last pair's OK must not leave a malformed one as success */
        skip_ws(ps);
        if (ps->p >= ps->end || *ps->p != '"')
            goto done;
        if ((r = parse_string(ps, &key)) != OK)
            goto done;
        skip_ws(ps);
        if (ps->p >= ps->end || *ps->p != ':') {
            Py_DECREF(key);
            r = FALLBACK;
            goto done;
        }
        ps->p++;
        skip_ws(ps);
        if (ps->p >= ps->end || *ps->p != '"') { /* a number, boolean or null: Python maps it */
            Py_DECREF(key);
            r = FALLBACK;
            goto done;
        }
        if ((r = parse_string(ps, &value)) != OK) {
            Py_DECREF(key);
            goto done;
        }
        int set = PyDict_SetItem(d, key, value);
        Py_DECREF(key);
        Py_DECREF(value);
        if (set < 0) {
            r = ERROR;
            goto done;
        }
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == '}') {
            ps->p++;
            *out = d;
            return OK;
        }
        r = FALLBACK;
        goto done;
    }
done:
    Py_DECREF(d);
    return r;
}

static int key_is(const unsigned char *k, Py_ssize_t n, const char *name) {
    return (size_t)n == strlen(name) && memcmp(k, name, n) == 0;
}

/* decode_json_header(data) -> RemotingCommand | None */
static PyObject *decode_json_header(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (command_cls == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "bolide.protocol._codec is not configured");
        return NULL;
    }
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    Parser ps = {view.buf, (const unsigned char *)view.buf + view.len, NULL, 0};
    long long code = 0, version = 0, opaque = 0, flag = 0;
    int has_code = 0, r = FALLBACK;
    PyObject *lang = NULL, *remark = NULL, *ext = NULL, *result = NULL;
    skip_ws(&ps);
    if (ps.p >= ps.end || *ps.p != '{')
        goto done;
    ps.p++;
    for (;;) {
        skip_ws(&ps);
        if (ps.p >= ps.end || *ps.p != '"')
            goto done;
        /* top-level keys are plain ASCII names: one with an escape goes to Python */
        const unsigned char *k = ps.p + 1, *q = k;
        while (q < ps.end && *q != '"' && *q != '\\' && *q >= 0x20 && *q < 0x80)
            q++;
        if (q >= ps.end || *q != '"')
            goto done;
        Py_ssize_t kn = q - k;
        ps.p = q + 1;
        skip_ws(&ps);
        if (ps.p >= ps.end || *ps.p != ':')
            goto done;
        ps.p++;
        skip_ws(&ps);
        if (ps.p >= ps.end)
            goto done;
        if (key_is(k, kn, "code")) {
            if ((r = parse_int32(&ps, &code)) != OK)
                goto done;
            has_code = 1;
        } else if (key_is(k, kn, "opaque")) {
            if ((r = parse_int32(&ps, &opaque)) != OK)
                goto done;
        } else if (key_is(k, kn, "flag")) {
            if ((r = parse_int32(&ps, &flag)) != OK)
                goto done;
        } else if (key_is(k, kn, "version")) {
            if ((r = parse_int32(&ps, &version)) != OK)
                goto done;
        } else if (key_is(k, kn, "language")) {
            PyObject *name;
            if (*ps.p != '"' || (r = parse_string(&ps, &name)) != OK) {
                r = r == ERROR ? ERROR : FALLBACK;
                goto done;
            }
            PyObject *member = PyDict_GetItemWithError(languages, name);
            Py_DECREF(name);
            if (member == NULL && PyErr_Occurred()) {
                r = ERROR;
                goto done;
            }
            Py_XSETREF(lang, Py_NewRef(member != NULL ? member : lang_other));
        } else if (key_is(k, kn, "remark")) {
            PyObject *text;
            if (*ps.p != '"' || (r = parse_string(&ps, &text)) != OK) {
                r = r == ERROR ? ERROR : FALLBACK;
                goto done;
            }
            Py_XSETREF(remark, text);
        } else if (key_is(k, kn, "extFields")) {
            PyObject *d = NULL;
            if (*ps.p != '{' || (r = parse_ext(&ps, &d)) != OK) {
                r = r == ERROR ? ERROR : FALLBACK;
                goto done;
            }
            Py_XSETREF(ext, d);
        } else if ((r = skip_scalar(&ps)) != OK) {
            goto done;
        }
        r = FALLBACK;
        skip_ws(&ps);
        if (ps.p < ps.end && *ps.p == ',') {
            ps.p++;
            continue;
        }
        if (ps.p < ps.end && *ps.p == '}') {
            ps.p++;
            break;
        }
        goto done;
    }
    skip_ws(&ps);
    if (ps.p != ps.end || !has_code)
        goto done;
    if (ext == NULL && (ext = PyDict_New()) == NULL) {
        r = ERROR;
        goto done;
    }
    {
        PyObject *c = PyLong_FromLongLong(code), *v = PyLong_FromLongLong(version);
        PyObject *o = PyLong_FromLongLong(opaque), *f = PyLong_FromLongLong(flag);
        PyObject *body = PyBytes_FromStringAndSize(NULL, 0);
        if (c && v && o && f && body) {
            PyObject *argv[9] = {c, lang ? lang : lang_java, v, o, f, remark ? remark : Py_None,
                                 ext, body, json_type};
            result = PyObject_Vectorcall(command_cls, argv, 9, NULL);
        }
        Py_XDECREF(c);
        Py_XDECREF(v);
        Py_XDECREF(o);
        Py_XDECREF(f);
        Py_XDECREF(body);
        r = result != NULL ? OK : ERROR;
    }
done:
    Py_XDECREF(lang);
    Py_XDECREF(remark);
    Py_XDECREF(ext);
    PyMem_Free(ps.scratch);
    PyBuffer_Release(&view);
    if (r == ERROR)
        return NULL;
    if (r == FALLBACK)
        Py_RETURN_NONE;
    return result;
}

/* ---- JSON header encode ------------------------------------------------------------------ */

typedef struct {
    char *buf;
    Py_ssize_t len, cap;
    char local[2048];
} Out;

static int out_reserve(Out *o, Py_ssize_t extra) {
    if (o->len + extra <= o->cap)
        return 0;
    Py_ssize_t cap = o->cap * 2;
    while (cap < o->len + extra)
        cap *= 2;
    char *b;
    if (o->buf == o->local) {
        b = PyMem_Malloc(cap);
        if (b != NULL)
            memcpy(b, o->buf, o->len);
    } else {
        b = PyMem_Realloc(o->buf, cap);
    }
    if (b == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    o->buf = b;
    o->cap = cap;
    return 0;
}

static int out_raw(Out *o, const char *s, Py_ssize_t n) {
    if (out_reserve(o, n) < 0)
        return -1;
    memcpy(o->buf + o->len, s, n);
    o->len += n;
    return 0;
}

static int out_int(Out *o, long long v) {
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%lld", v);
    return out_raw(o, tmp, n);
}

/* A JSON string as orjson writes it: quotes, backslashes and control characters escaped. */
static int out_str(Out *o, const char *s, Py_ssize_t n) {
    static const char hex[] = "0123456789abcdef";
    if (out_reserve(o, 6 * n + 2) < 0)
        return -1;
    char *w = o->buf + o->len;
    *w++ = '"';
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *w++ = (char)c;
            continue;
        }
        *w++ = '\\';
        switch (c) {
        case '"': *w++ = '"'; break;
        case '\\': *w++ = '\\'; break;
        case '\b': *w++ = 'b'; break;
        case '\f': *w++ = 'f'; break;
        case '\n': *w++ = 'n'; break;
        case '\r': *w++ = 'r'; break;
        case '\t': *w++ = 't'; break;
        default:
            *w++ = 'u';
            *w++ = '0';
            *w++ = '0';
            *w++ = hex[c >> 4];
            *w++ = hex[c & 15];
        }
    }
    *w++ = '"';
    o->len = w - o->buf;
    return 0;
}

typedef struct {
    const char *k, *v;
    Py_ssize_t kn, vn;
} Pair;

static int pair_cmp(const void *a, const void *b) {
    const Pair *x = a, *y = b;
    Py_ssize_t n = x->kn < y->kn ? x->kn : y->kn;
    int c = memcmp(x->k, y->k, n);
    if (c)
        return c;
    return x->kn < y->kn ? -1 : x->kn > y->kn;
}

static int exact_i64(PyObject *v, long long *out) {
    if (!PyLong_CheckExact(v))
        return FALLBACK;
    int overflow;
    *out = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow)
        return FALLBACK;
    if (*out == -1 && PyErr_Occurred())
        return ERROR;
    return OK;
}

static int write_header(PyObject *cmd, Out *o) {
    PyObject *code = NULL, *ext = NULL, *flag = NULL, *lang = NULL, *opaque = NULL;
    PyObject *remark = NULL, *version = NULL;
    Pair *pairs = NULL;
    int r = ERROR;
    if (!(code = PyObject_GetAttr(cmd, s_code)) || !(ext = PyObject_GetAttr(cmd, s_ext_fields))
        || !(flag = PyObject_GetAttr(cmd, s_flag)) || !(lang = PyObject_GetAttr(cmd, s_language))
        || !(opaque = PyObject_GetAttr(cmd, s_opaque)) || !(remark = PyObject_GetAttr(cmd, s_remark))
        || !(version = PyObject_GetAttr(cmd, s_version)))
        goto done;
    long long c, f, op, v;
    r = FALLBACK;
    if (!PyLong_Check(code) || PyBool_Check(code))
        goto done;
    int overflow;
    c = PyLong_AsLongLongAndOverflow(code, &overflow);
    if (overflow)
        goto done;
    if (c == -1 && PyErr_Occurred()) {
        r = ERROR;
        goto done;
    }
    if ((r = exact_i64(flag, &f)) != OK || (r = exact_i64(opaque, &op)) != OK
        || (r = exact_i64(version, &v)) != OK) {
        goto done;
    }
    r = FALLBACK;
    if (Py_TYPE(lang) != Py_TYPE(lang_java))
        goto done;
    PyObject *name = PyDict_GetItemWithError(language_names, lang);
    if (name == NULL) {
        r = PyErr_Occurred() ? ERROR : FALLBACK;
        goto done;
    }
    if (remark != Py_None && !PyUnicode_CheckExact(remark))
        goto done;
    if (!PyDict_CheckExact(ext))
        goto done;
    Py_ssize_t n = PyDict_GET_SIZE(ext), i = 0, at = 0;
    if (n) {
        pairs = PyMem_Malloc(sizeof(Pair) * n);
        if (pairs == NULL) {
            PyErr_NoMemory();
            r = ERROR;
            goto done;
        }
        PyObject *key, *value;
        while (PyDict_Next(ext, &at, &key, &value)) {
            if (!PyUnicode_CheckExact(key) || !PyUnicode_CheckExact(value))
                goto done;
            pairs[i].k = PyUnicode_AsUTF8AndSize(key, &pairs[i].kn);
            pairs[i].v = PyUnicode_AsUTF8AndSize(value, &pairs[i].vn);
            if (pairs[i].k == NULL || pairs[i].v == NULL) { /* lone surrogates */
                PyErr_Clear();
                goto done;
            }
            i++;
        }
        qsort(pairs, n, sizeof(Pair), pair_cmp);
    }
    Py_ssize_t name_len, remark_len = 0;
    const char *name_s = PyUnicode_AsUTF8AndSize(name, &name_len), *remark_s = NULL;
    if (name_s == NULL) {
        r = ERROR;
        goto done;
    }
    if (remark != Py_None && (remark_s = PyUnicode_AsUTF8AndSize(remark, &remark_len)) == NULL) {
        PyErr_Clear();
        goto done;
    }
    r = ERROR;
    if (out_raw(o, "{\"code\":", 8) < 0 || out_int(o, c) < 0)
        goto done;
    if (n) {
        if (out_raw(o, ",\"extFields\":{", 14) < 0)
            goto done;
        for (i = 0; i < n; i++) {
            if ((i && out_raw(o, ",", 1) < 0) || out_str(o, pairs[i].k, pairs[i].kn) < 0
                || out_raw(o, ":", 1) < 0 || out_str(o, pairs[i].v, pairs[i].vn) < 0)
                goto done;
        }
        if (out_raw(o, "}", 1) < 0)
            goto done;
    }
    if (out_raw(o, ",\"flag\":", 8) < 0 || out_int(o, f) < 0
        || out_raw(o, ",\"language\":", 12) < 0 || out_str(o, name_s, name_len) < 0
        || out_raw(o, ",\"opaque\":", 10) < 0 || out_int(o, op) < 0)
        goto done;
    if (remark_s != NULL
        && (out_raw(o, ",\"remark\":", 10) < 0 || out_str(o, remark_s, remark_len) < 0))
        goto done;
    if (out_raw(o, ",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":", 44) < 0
        || out_int(o, v) < 0 || out_raw(o, "}", 1) < 0)
        goto done;
    r = OK;
done:
    PyMem_Free(pairs);
    Py_XDECREF(code);
    Py_XDECREF(ext);
    Py_XDECREF(flag);
    Py_XDECREF(lang);
    Py_XDECREF(opaque);
    Py_XDECREF(remark);
    Py_XDECREF(version);
    return r;
}

/* encode_json_header(cmd) -> bytes | None */
static PyObject *encode_json_header(PyObject *self, PyObject *cmd) {
    if (language_names == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "bolide.protocol._codec is not configured");
        return NULL;
    }
    Out o;
    o.buf = o.local;
    o.len = 0;
    o.cap = sizeof o.local;
    int r = write_header(cmd, &o);
    PyObject *result = NULL;
    if (r == OK)
        result = PyBytes_FromStringAndSize(o.buf, o.len);
    else if (r == FALLBACK)
        result = Py_NewRef(Py_None);
    if (o.buf != o.local)
        PyMem_Free(o.buf);
    return result;
}

/* ---- custom headers ---------------------------------------------------------------------- */

enum { KIND_STR, KIND_INT, KIND_BOOL, KIND_FLOAT };

/* An int as Python's int() reads the common form: an optional sign and 1 to 18 ASCII digits. */
static PyObject *int_of(PyObject *s) {
    Py_ssize_t n;
    if (!PyUnicode_IS_ASCII(s))
        return NULL;
    const char *p = (const char *)PyUnicode_DATA(s);
    n = PyUnicode_GET_LENGTH(s);
    Py_ssize_t i = 0;
    int neg = 0;
    if (n && (p[0] == '-' || p[0] == '+')) {
        neg = p[0] == '-';
        i = 1;
    }
    if (n - i < 1 || n - i > 18)
        return NULL;
    long long v = 0;
    for (; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return NULL;
        v = v * 10 + (p[i] - '0');
    }
    return PyLong_FromLongLong(neg ? -v : v);
}

/* header_from_ext(cls, ext, specs) -> header | None
 * specs: ((attr, wire, kind, required, default), ...) */
static PyObject *header_from_ext(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "header_from_ext(cls, ext, specs)");
        return NULL;
    }
    PyObject *cls = args[0], *ext = args[1], *specs = args[2];
    if (!PyDict_CheckExact(ext) || !PyTuple_CheckExact(specs) || !PyType_Check(cls))
        Py_RETURN_NONE;
    Py_ssize_t n = PyTuple_GET_SIZE(specs);
    PyObject *values[64];
    if (n > 64)
        Py_RETURN_NONE;
    Py_ssize_t i;
    for (i = 0; i < n; i++) {
        PyObject *spec = PyTuple_GET_ITEM(specs, i);
        PyObject *wire = PyTuple_GET_ITEM(spec, 1);
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(spec, 2));
        int required = PyTuple_GET_ITEM(spec, 3) == Py_True;
        PyObject *raw = PyDict_GetItemWithError(ext, wire);
        if (raw == NULL && PyErr_Occurred())
            goto error;
        if (raw == NULL || raw == Py_None) {
            if (required)
                goto fallback;
            values[i] = Py_NewRef(PyTuple_GET_ITEM(spec, 4));
            continue;
        }
        if (!PyUnicode_CheckExact(raw))
            goto fallback;
        if (kind == KIND_STR) {
            values[i] = Py_NewRef(raw);
        } else if (kind == KIND_INT) {
            values[i] = int_of(raw);
            if (values[i] == NULL) {
                if (PyErr_Occurred())
                    goto error;
                goto fallback;
            }
        } else if (kind == KIND_BOOL) {
            if (!PyUnicode_IS_ASCII(raw))
                goto fallback;
            const char *p = (const char *)PyUnicode_DATA(raw);
            int t = PyUnicode_GET_LENGTH(raw) == 4 && (p[0] | 32) == 't' && (p[1] | 32) == 'r'
                    && (p[2] | 32) == 'u' && (p[3] | 32) == 'e';
            values[i] = Py_NewRef(t ? Py_True : Py_False);
        } else {
            goto fallback;
        }
    }
    PyObject *obj = PyBaseObject_Type.tp_new((PyTypeObject *)cls, empty_tuple, NULL);
    if (obj == NULL)
        goto error;
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *attr = PyTuple_GET_ITEM(PyTuple_GET_ITEM(specs, j), 0);
        if (PyObject_SetAttr(obj, attr, values[j]) < 0) {
            Py_DECREF(obj);
            goto error;
        }
    }
    for (Py_ssize_t j = 0; j < n; j++)
        Py_DECREF(values[j]);
    return obj;
fallback:
    for (Py_ssize_t j = 0; j < i; j++)
        Py_DECREF(values[j]);
    Py_RETURN_NONE;
error:
    for (Py_ssize_t j = 0; j < i; j++)
        Py_DECREF(values[j]);
    return NULL;
}

/* ---- module ------------------------------------------------------------------------------- */

/* configure(command_cls, languages, language_names, java, other, json_type) */
static PyObject *configure(PyObject *self, PyObject *args) {
    PyObject *cmd, *langs, *names, *java, *other, *json;
    if (!PyArg_ParseTuple(args, "OO!O!OOO", &cmd, &PyDict_Type, &langs, &PyDict_Type, &names,
                          &java, &other, &json))
        return NULL;
    Py_XSETREF(command_cls, Py_NewRef(cmd));
    Py_XSETREF(languages, Py_NewRef(langs));
    Py_XSETREF(language_names, Py_NewRef(names));
    Py_XSETREF(lang_java, Py_NewRef(java));
    Py_XSETREF(lang_other, Py_NewRef(other));
    Py_XSETREF(json_type, Py_NewRef(json));
    Py_RETURN_NONE;
}

/* properties_without(text, keys, tail) -> bytes | None: a property string (k\x01v\x02 pairs)
   as UTF-8 without the pairs whose key starts them with one of keys (each "NAME\x01"), its
   last pair terminated, then tail. None when text, a key or tail is not ASCII (the Python
   code decides). */
static PyObject *properties_without(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyUnicode_Check(args[0]) || !PyTuple_Check(args[1])
        || !PyUnicode_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "properties_without(text: str, keys: tuple, tail: str)");
        return NULL;
    }
    PyObject *text = args[0], *keys = args[1], *tail = args[2];
    Py_ssize_t nkeys = PyTuple_GET_SIZE(keys);
    if (!PyUnicode_IS_ASCII(text) || !PyUnicode_IS_ASCII(tail) || nkeys > 8)
        Py_RETURN_NONE;
    const char *key[8];
    Py_ssize_t key_len[8];
    for (Py_ssize_t k = 0; k < nkeys; k++) {
        PyObject *item = PyTuple_GET_ITEM(keys, k);
        if (!PyUnicode_Check(item) || !PyUnicode_IS_ASCII(item) || PyUnicode_GET_LENGTH(item) == 0)
            Py_RETURN_NONE;
        key[k] = (const char *)PyUnicode_DATA(item);
        key_len[k] = PyUnicode_GET_LENGTH(item);
    }
    const char *src = (const char *)PyUnicode_DATA(text);
    Py_ssize_t len = PyUnicode_GET_LENGTH(text), tail_len = PyUnicode_GET_LENGTH(tail);
    PyObject *out = PyBytes_FromStringAndSize(NULL, len + 1 + tail_len);
    if (out == NULL)
        return NULL;
    char *dst = PyBytes_AS_STRING(out), *at = dst;
    Py_ssize_t pos = 0;
    while (pos < len) {
        const char *end = memchr(src + pos, 2, (size_t)(len - pos));
        Py_ssize_t stop = end ? end - src : len;
        int dropped = 0;
        for (Py_ssize_t k = 0; k < nkeys && !dropped; k++)
            dropped = key_len[k] <= stop - pos && memcmp(src + pos, key[k], (size_t)key_len[k]) == 0;
        if (!dropped) {
            memcpy(at, src + pos, (size_t)(stop - pos));
            at += stop - pos;
            *at++ = 2;
        }
        pos = stop + 1;
    }
    memcpy(at, PyUnicode_DATA(tail), (size_t)tail_len);
    at += tail_len;
    if (_PyBytes_Resize(&out, at - dst) < 0)
        return NULL;
    return out;
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS, "Set the classes and tables the decoder builds with."},
    {"split_frames", split_frames, METH_VARARGS,
     "split_frames(buffer, max_frame_size, frame_cls) -> (frames, pos)"},
    {"decode_json_header", decode_json_header, METH_O,
     "decode_json_header(data) -> RemotingCommand | None"},
    {"encode_json_header", encode_json_header, METH_O, "encode_json_header(cmd) -> bytes | None"},
    {"header_from_ext", (PyCFunction)(void (*)(void))header_from_ext, METH_FASTCALL,
     "header_from_ext(cls, ext, specs) -> header | None"},
    {"properties_without", (PyCFunction)(void (*)(void))properties_without, METH_FASTCALL,
     "properties_without(text, keys, tail) -> bytes | None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_codec", NULL, -1, methods};

PyMODINIT_FUNC PyInit__codec(void) {
    empty_tuple = PyTuple_New(0);
    s_code = PyUnicode_InternFromString("code");
    s_ext_fields = PyUnicode_InternFromString("ext_fields");
    s_flag = PyUnicode_InternFromString("flag");
    s_language = PyUnicode_InternFromString("language");
    s_opaque = PyUnicode_InternFromString("opaque");
    s_remark = PyUnicode_InternFromString("remark");
    s_version = PyUnicode_InternFromString("version");
    if (!empty_tuple || !s_code || !s_ext_fields || !s_flag || !s_language || !s_opaque
        || !s_remark || !s_version)
        return NULL;
    return PyModule_Create(&module);
}
