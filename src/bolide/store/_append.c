/* Compiled fast path of MessageStore.put_message / put_encoded / put_messages (see
 * bolide/store/fast_append.py for the contract). An Appender writes the common case — a
 * validated topic, IPv4 hosts, room in the current segment and in the queue's ConsumeQueue
 * files, no delay level — straight into the mapped segment and returns the PutMessageResult;
 * for anything else it returns None and the caller takes the general Python path, which
 * makes the same decisions and gives the errors. The caller holds the CommitLog's put lock. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <structmember.h>
#include <errno.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "_native.h"

#define HEADER_V4 88       /* record fields before the body, IPv4 hosts */
#define MIN_FREE_AFTER 8   /* a record is placed only if this much stays free after it */
#define MAX_PROPS 32767
#define SYSFLAG_REFUSED 0x34 /* PREPARED/ROLLBACK (no queue entry), IPv6 hosts: general path */
#define MAX_BATCH 65536
#define RESULT_FIELDS 11

/* PutMessageResult's fields, in its declaration order */
static const char *result_fields[RESULT_FIELDS] = {
    "status", "wrote_offset", "wrote_bytes", "queue_offset", "msg_id", "store_timestamp",
    "msg_num", "batch_ids", "remark", "store_host", "record_sizes"};

typedef struct {
    PyObject_HEAD
    PyObject *commit_log;    /* last_store_timestamp is set on it */
    PyObject *files;         /* the CommitLog's MappedFileQueue (.files: newest last) */
    PyObject *queue_offsets; /* (topic, queue id) -> next queue offset */
    PyObject *queue_room;    /* (topic, queue id) -> entries whose ConsumeQueue file exists */
    PyObject *topic_fields;  /* topic -> TOPICLENGTH byte + UTF-8 topic, for validated topics */
    PyObject *store_host;    /* 8 bytes */
    PyObject *uniq;          /* the store's UniqKeyGenerator */
    PyObject *counter;       /* its shared counter (itertools.count) */
    PyObject *result_type;   /* PutMessageResult */
    PyObject *ok;            /* PutStatus.PUT_OK */
    PyObject *empty;         /* "" */
    Py_ssize_t slots[RESULT_FIELDS]; /* offsets of PutMessageResult's slots (0: call it) */
    char prefix[64];         /* the UNIQ_KEY prefix, hex */
    Py_ssize_t prefix_len;
    double month_start, next_month;
    Py_ssize_t max_body;
    Py_ssize_t room_ahead;
    unsigned char *scratch;  /* encoded properties of the message(s) being put */
    Py_ssize_t scratch_cap;
} Appender;

static PyObject *s_wrote_position, *s_file_size, *s_file_from_offset, *s_view,
    *s_last_store_timestamp, *s_month_start, *s_next_month, *s_roll_month, *s_topic, *s_body,
    *s_properties, *s_flag, *s_files;

static int scratch_reserve(Appender *a, Py_ssize_t need) {
    if (need <= a->scratch_cap)
        return 0;
    Py_ssize_t cap = a->scratch_cap ? a->scratch_cap : 4096;
    while (cap < need)
        cap *= 2;
    unsigned char *p = PyMem_Realloc(a->scratch, cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    a->scratch = p;
    a->scratch_cap = cap;
    return 0;
}

static int scratch_put(Appender *a, Py_ssize_t *len, const void *src, Py_ssize_t n) {
    if (scratch_reserve(a, *len + n) < 0)
        return -1;
    memcpy(a->scratch + *len, src, n);
    *len += n;
    return 0;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

static int read_month(Appender *a) {
    PyObject *s = PyObject_GetAttr(a->uniq, s_month_start);
    PyObject *n = s ? PyObject_GetAttr(a->uniq, s_next_month) : NULL;
    if (n == NULL) {
        Py_XDECREF(s);
        return -1;
    }
    a->month_start = PyFloat_AsDouble(s);
    a->next_month = PyFloat_AsDouble(n);
    Py_DECREF(s);
    Py_DECREF(n);
    return PyErr_Occurred() ? -1 : 0;
}

/* A new UNIQ_KEY as UniqKeyGenerator.next_id makes it (same counter), written to out;
 * returns its length or -1. */
static Py_ssize_t next_uniq(Appender *a, double now, char *out) {
    if (now >= a->next_month) {
        PyObject *arg = PyFloat_FromDouble(now);
        PyObject *r = arg ? PyObject_CallMethodOneArg(a->uniq, s_roll_month, arg) : NULL;
        Py_XDECREF(arg);
        if (r == NULL)
            return -1;
        Py_DECREF(r);
        if (read_month(a) < 0)
            return -1;
    }
    PyObject *c = PyIter_Next(a->counter);
    if (c == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "the UNIQ_KEY counter ended");
        return -1;
    }
    unsigned long count = PyLong_AsUnsignedLongMask(c) & 0xFFFF;
    Py_DECREF(c);
    static const char hex[] = "0123456789ABCDEF";
    uint32_t diff = (uint32_t)(int64_t)(now - a->month_start);
    memcpy(out, a->prefix, a->prefix_len);
    char *w = out + a->prefix_len;
    for (int i = 0; i < 8; i++)
        w[i] = hex[(diff >> (28 - 4 * i)) & 0xF];
    for (int i = 0; i < 4; i++)
        w[8 + i] = hex[(count >> (12 - 4 * i)) & 0xF];
    return a->prefix_len + 12;
}

/* Outcome of encoding one message's properties. */
typedef struct {
    Py_ssize_t start, len;   /* in the scratch buffer */
    PyObject *msg_id;        /* new reference */
} Encoded;

enum { ENC_OK = 0, ENC_SLOW = 1, ENC_ERROR = -1 };

/* Append a new UNIQ_KEY pair (after a 0x02 if the properties lack their last one). */
static int add_uniq(Appender *a, Py_ssize_t *len, double now, Encoded *e) {
    char id[80];
    Py_ssize_t idn = next_uniq(a, now, id);
    if (idn < 0)
        return ENC_ERROR;
    if (*len > e->start && a->scratch[*len - 1] != 2 && scratch_put(a, len, "\x02", 1) < 0)
        return ENC_ERROR;
    if (scratch_put(a, len, "UNIQ_KEY\x01", 9) < 0 || scratch_put(a, len, id, idn) < 0 ||
        scratch_put(a, len, "\x02", 1) < 0)
        return ENC_ERROR;
    e->msg_id = PyUnicode_New(idn, 127); /* hex: ASCII */
    if (e->msg_id == NULL)
        return ENC_ERROR;
    memcpy(PyUnicode_DATA(e->msg_id), id, idn);
    return ENC_OK;
}

/* Encode a dict of str properties into the scratch buffer at *len. */
static int encode_dict(Appender *a, PyObject *props, Py_ssize_t *len, Encoded *e) {
    PyObject *k, *v;
    Py_ssize_t it = 0;
    while (PyDict_Next(props, &it, &k, &v)) {
        if (!PyUnicode_CheckExact(k))
            return ENC_SLOW;
        if (v == Py_None)
            continue;
        if (!PyUnicode_CheckExact(v))
            return ENC_SLOW;
        Py_ssize_t kn, vn;
        const char *ks = PyUnicode_AsUTF8AndSize(k, &kn);
        const char *vs = ks ? PyUnicode_AsUTF8AndSize(v, &vn) : NULL;
        if (vs == NULL) { /* surrogates: the general path raises the encode error */
            PyErr_Clear();
            return ENC_SLOW;
        }
        if (kn == 5 && memcmp(ks, "DELAY", 5) == 0)
            return ENC_SLOW;
        if (kn == 8 && memcmp(ks, "UNIQ_KEY", 8) == 0) {
            Py_INCREF(v);
            Py_XSETREF(e->msg_id, v);
        }
        if (scratch_reserve(a, *len + kn + vn + 2) < 0)
            return ENC_ERROR;
        unsigned char *w = a->scratch + *len;
        memcpy(w, ks, kn);
        w[kn] = 1;
        memcpy(w + kn + 1, vs, vn);
        w[kn + 1 + vn] = 2;
        *len += kn + vn + 2;
    }
    return ENC_OK;
}

/* Copy encoded properties (and the batch's ``extra`` after them, 0x02-separated) into the
 * scratch buffer at *len, ending them with 0x02 when ``terminate`` (put_encoded does). */
static int encode_raw(Appender *a, const unsigned char *p, Py_ssize_t n,
                      const unsigned char *extra, Py_ssize_t extra_n, int terminate,
                      Py_ssize_t *len, Encoded *e) {
    if (scratch_put(a, len, p, n) < 0)
        return ENC_ERROR;
    if ((extra_n || terminate) && n && p[n - 1] != 2 && scratch_put(a, len, "\x02", 1) < 0)
        return ENC_ERROR;
    if (extra_n && scratch_put(a, len, extra, extra_n) < 0)
        return ENC_ERROR;
    const unsigned char *r = a->scratch + e->start;
    Py_ssize_t rn = *len - e->start, vs, ve;
    for (Py_ssize_t i = 0; i + 6 <= rn; i++) /* any DELAY pair: the general path */
        if (r[i] == 'D' && memcmp(r + i, "DELAY\x01", 6) == 0)
            return ENC_SLOW;
    if (find_prop(r, rn, "UNIQ_KEY", 8, &vs, &ve) && ve > vs) {
        e->msg_id = PyUnicode_DecodeUTF8((const char *)r + vs, ve - vs, "replace");
        if (e->msg_id == NULL)
            return ENC_ERROR;
    }
    return ENC_OK;
}

/* Finish an encoding: a UNIQ_KEY when there is none, then the size check. On anything but
 * ENC_OK the id is dropped. */
static int encode_done(Appender *a, int rc, Py_ssize_t *len, double now, Encoded *e) {
    if (rc == ENC_OK && e->msg_id == NULL)
        rc = add_uniq(a, len, now, e);
    e->len = *len - e->start;
    if (rc == ENC_OK && e->len > MAX_PROPS)
        rc = ENC_SLOW;
    if (rc != ENC_OK)
        Py_CLEAR(e->msg_id);
    return rc;
}

/* Encode properties (a dict of str, or bytes already encoded) into the scratch buffer at
 * *len, adding a UNIQ_KEY when there is none, as the general path does. */
static int encode_props(Appender *a, PyObject *props, Py_ssize_t *len, double now, int terminate,
                        Encoded *e) {
    e->start = *len;
    e->msg_id = NULL;
    int rc;
    if (PyDict_CheckExact(props))
        rc = encode_dict(a, props, len, e);
    else if (PyBytes_CheckExact(props))
        rc = encode_raw(a, (const unsigned char *)PyBytes_AS_STRING(props),
                        PyBytes_GET_SIZE(props), NULL, 0, terminate, len, e);
    else
        rc = ENC_SLOW;
    return encode_done(a, rc, len, now, e);
}

/* The current segment: its view (writable buffer), position, size and start offset. */
typedef struct {
    PyObject *mf;
    Py_buffer buf;
    int64_t pos, size, from;
} Segment;

static int segment_get(Appender *a, Segment *s) {
    s->mf = NULL;
    PyObject *list = PyObject_GetAttr(a->files, s_files);
    if (list == NULL)
        return ENC_ERROR;
    Py_ssize_t n = PyList_CheckExact(list) ? PyList_GET_SIZE(list) : 0;
    if (n == 0) {
        Py_DECREF(list);
        return ENC_SLOW;
    }
    s->mf = PyList_GET_ITEM(list, n - 1);
    Py_INCREF(s->mf);
    Py_DECREF(list);
    PyObject *pos = PyObject_GetAttr(s->mf, s_wrote_position);
    PyObject *size = pos ? PyObject_GetAttr(s->mf, s_file_size) : NULL;
    PyObject *from = size ? PyObject_GetAttr(s->mf, s_file_from_offset) : NULL;
    PyObject *view = from ? PyObject_GetAttr(s->mf, s_view) : NULL;
    int rc = ENC_ERROR;
    if (view != NULL) {
        s->pos = PyLong_AsLongLong(pos);
        s->size = PyLong_AsLongLong(size);
        s->from = PyLong_AsLongLong(from);
        if (!PyErr_Occurred() && PyObject_GetBuffer(view, &s->buf, PyBUF_WRITABLE) == 0) {
            rc = ENC_OK;
            if (s->buf.len < s->size) { /* never expected: a mapping shorter than the file */
                PyBuffer_Release(&s->buf);
                rc = ENC_SLOW;
            }
        }
    }
    Py_XDECREF(pos);
    Py_XDECREF(size);
    Py_XDECREF(from);
    Py_XDECREF(view);
    if (rc != ENC_OK)
        Py_CLEAR(s->mf);
    return rc;
}

static void segment_release(Segment *s) {
    PyBuffer_Release(&s->buf);
    Py_CLEAR(s->mf);
}

/* next queue offset of key, and whether the ConsumeQueue files have room for count more */
static int queue_next(Appender *a, PyObject *key, Py_ssize_t count, int64_t *next) {
    PyObject *v = PyDict_GetItemWithError(a->queue_offsets, key);
    if (v == NULL && PyErr_Occurred())
        return ENC_ERROR;
    *next = v ? PyLong_AsLongLong(v) : 0;
    PyObject *r = PyDict_GetItemWithError(a->queue_room, key);
    if (r == NULL)
        return PyErr_Occurred() ? ENC_ERROR : ENC_SLOW;
    int64_t room = PyLong_AsLongLong(r);
    if (PyErr_Occurred())
        return ENC_ERROR;
    return *next + count + a->room_ahead <= room ? ENC_OK : ENC_SLOW;
}

/* Record writing: everything but the body CRC, queue offset and offsets is per put. */
typedef struct {
    int32_t queue_id, sys_flag;
    int64_t born_ts, store_ts;
    const unsigned char *born_host, *store_host;
    const char *topic_field;
    Py_ssize_t topic_field_len;
} RecordCommon;

static void write_record(unsigned char *w, int32_t total, const RecordCommon *c, int32_t flag,
                         int64_t qoff, int64_t phys, int32_t reconsume, int64_t prepared,
                         const unsigned char *body, Py_ssize_t body_len,
                         const unsigned char *props, Py_ssize_t props_len) {
    wr32(w, (uint32_t)total);
    wr32(w + 4, (uint32_t)MAGIC_V1);
    wr32(w + 8, crc32_of(body, body_len) & 0x7FFFFFFFu);
    wr32(w + 12, (uint32_t)c->queue_id);
    wr32(w + 16, (uint32_t)flag);
    wr64(w + 20, (uint64_t)qoff);
    wr64(w + 28, (uint64_t)phys);
    wr32(w + 36, (uint32_t)c->sys_flag);
    wr64(w + 40, (uint64_t)(c->born_ts ? c->born_ts : c->store_ts));
    memcpy(w + 48, c->born_host, 8);
    wr64(w + 56, (uint64_t)c->store_ts);
    memcpy(w + 64, c->store_host, 8);
    wr32(w + 72, (uint32_t)reconsume);
    wr64(w + 76, (uint64_t)prepared);
    wr32(w + 84, (uint32_t)body_len);
    unsigned char *p = w + HEADER_V4;
    memcpy(p, body, body_len);
    p += body_len;
    memcpy(p, c->topic_field, c->topic_field_len);
    p += c->topic_field_len;
    p[0] = (unsigned char)(props_len >> 8);
    p[1] = (unsigned char)props_len;
    memcpy(p + 2, props, props_len);
}

/* An exact int as int64 in *out; 0 when it is not one or does not fit (the general path). */
static int as_i64(PyObject *o, int64_t *out) {
    if (!PyLong_CheckExact(o))
        return 0;
    long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    *out = v;
    return 1;
}

static int as_i32(PyObject *o, int32_t *out) {
    int64_t v;
    if (!as_i64(o, &v) || v < INT32_MIN || v > INT32_MAX)
        return 0;
    *out = (int32_t)v;
    return 1;
}

/* Common checks of a put: the topic's field, the queue id, the born host. */
static int prepare_common(Appender *a, PyObject *topic, PyObject *queue_id, PyObject *born_host,
                          RecordCommon *c) {
    if (!PyUnicode_CheckExact(topic))
        return ENC_SLOW;
    PyObject *field = PyDict_GetItemWithError(a->topic_fields, topic);
    if (field == NULL)
        return PyErr_Occurred() ? ENC_ERROR : ENC_SLOW;
    if (!PyBytes_CheckExact(field))
        return ENC_SLOW;
    if (!as_i32(queue_id, &c->queue_id) || c->queue_id < 0)
        return ENC_SLOW;
    c->topic_field = PyBytes_AS_STRING(field);
    c->topic_field_len = PyBytes_GET_SIZE(field);
    c->store_host = (const unsigned char *)PyBytes_AS_STRING(a->store_host);
    if (born_host == Py_None) {
        c->born_host = c->store_host;
    } else {
        if (!PyBytes_CheckExact(born_host) || PyBytes_GET_SIZE(born_host) != 8)
            return ENC_SLOW;
        c->born_host = (const unsigned char *)PyBytes_AS_STRING(born_host);
    }
    return ENC_OK;
}

/* A PutMessageResult of these field values (new references are taken), built by filling its
 * slots when they were found at init, else by calling the class. */
static PyObject *new_result(Appender *a, PyObject **values) {
    if (a->slots[0] == 0) /* the fields, in their declaration order */
        return PyObject_Vectorcall(a->result_type, values, RESULT_FIELDS, NULL);
    PyTypeObject *type = (PyTypeObject *)a->result_type;
    PyObject *r = type->tp_alloc(type, 0);
    if (r == NULL)
        return NULL;
    for (int i = 0; i < RESULT_FIELDS; i++) {
        Py_INCREF(values[i]);
        *(PyObject **)((char *)r + a->slots[i]) = values[i];
    }
    return r;
}

static PyObject *finish_slow(int rc) {
    if (rc == ENC_ERROR)
        return NULL;
    Py_RETURN_NONE;
}

static int set_after_write(Appender *a, Segment *s, PyObject *key, int64_t next_qoff,
                           int64_t end_pos, int64_t store_ts) {
    PyObject *pos = PyLong_FromLongLong(end_pos);
    if (pos == NULL || PyObject_SetAttr(s->mf, s_wrote_position, pos) < 0) {
        Py_XDECREF(pos);
        return -1;
    }
    Py_DECREF(pos);
    PyObject *q = PyLong_FromLongLong(next_qoff);
    if (q == NULL || PyDict_SetItem(a->queue_offsets, key, q) < 0) {
        Py_XDECREF(q);
        return -1;
    }
    Py_DECREF(q);
    PyObject *ts = PyLong_FromLongLong(store_ts);
    if (ts == NULL || PyObject_SetAttr(a->commit_log, s_last_store_timestamp, ts) < 0) {
        Py_XDECREF(ts);
        return -1;
    }
    Py_DECREF(ts);
    return 0;
}

/* append(topic, queue_id, body, properties, flag, sys_flag, born_timestamp, born_host,
 *        reconsume_times, prepared_offset) -> PutMessageResult | None */
static PyObject *Appender_append(Appender *a, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "append takes 10 arguments");
        return NULL;
    }
    PyObject *topic = args[0], *queue_id = args[1], *body = args[2], *props = args[3];
    RecordCommon c;
    int32_t flag, reconsume;
    int64_t prepared;
    int rc = prepare_common(a, topic, queue_id, args[7], &c);
    if (rc != ENC_OK)
        return finish_slow(rc);
    if (!PyBytes_CheckExact(body) || PyBytes_GET_SIZE(body) > a->max_body ||
        !as_i32(args[4], &flag) || !as_i32(args[5], &c.sys_flag) ||
        (c.sys_flag & SYSFLAG_REFUSED) || !as_i64(args[6], &c.born_ts) ||
        !as_i32(args[8], &reconsume) || !as_i64(args[9], &prepared))
        Py_RETURN_NONE;
    double now = now_ms();
    c.store_ts = (int64_t)now;
    Py_ssize_t plen = 0;
    Encoded e;
    rc = encode_props(a, props, &plen, now, 1, &e);
    if (rc != ENC_OK)
        return finish_slow(rc);
    Py_ssize_t body_len = PyBytes_GET_SIZE(body);
    int64_t total = HEADER_V4 + body_len + c.topic_field_len + 2 + e.len;
    PyObject *key = PyTuple_Pack(2, topic, queue_id);
    PyObject *result = NULL;
    int64_t qoff;
    Segment s;
    if (key == NULL)
        goto out;
    rc = queue_next(a, key, 1, &qoff);
    if (rc == ENC_OK)
        rc = segment_get(a, &s);
    if (rc != ENC_OK) {
        result = finish_slow(rc);
        goto out;
    }
    if (s.pos < 0 || s.pos + total + MIN_FREE_AFTER > s.size) {
        segment_release(&s);
        result = finish_slow(ENC_SLOW);
        goto out;
    }
    int64_t phys = s.from + s.pos;
    write_record((unsigned char *)s.buf.buf + s.pos, (int32_t)total, &c, flag, qoff, phys,
                 reconsume, prepared, (const unsigned char *)PyBytes_AS_STRING(body), body_len,
                 a->scratch + e.start, e.len);
    rc = set_after_write(a, &s, key, qoff + 1, s.pos + total, c.store_ts);
    segment_release(&s);
    if (rc < 0)
        goto out;
    PyObject *one = PyLong_FromLong(1); /* a cached small int */
    PyObject *vals[RESULT_FIELDS] = {a->ok, NULL, NULL, NULL, e.msg_id, NULL, one, Py_None,
                                     a->empty, a->store_host, Py_None};
    vals[1] = PyLong_FromLongLong(phys);
    vals[2] = PyLong_FromLongLong(total);
    vals[3] = PyLong_FromLongLong(qoff);
    vals[5] = PyLong_FromLongLong(c.store_ts);
    if (vals[1] && vals[2] && vals[3] && vals[5])
        result = new_result(a, vals);
    Py_XDECREF(one);
    Py_XDECREF(vals[1]);
    Py_XDECREF(vals[2]);
    Py_XDECREF(vals[3]);
    Py_XDECREF(vals[5]);
out:
    Py_XDECREF(key);
    Py_XDECREF(e.msg_id);
    return result;
}

/* One member of a batch being put. */
typedef struct {
    const unsigned char *body;
    Py_ssize_t body_len;
    int32_t flag;
    Encoded enc;
} Member;

static int64_t member_size(const RecordCommon *c, const Member *m) {
    return HEADER_V4 + m->body_len + c->topic_field_len + 2 + m->enc.len;
}

/* Write the encoded members contiguously in the current segment; the result, None (the
 * general path must take the batch) or NULL (an error). Takes the members' ids. */
static PyObject *write_batch(Appender *a, PyObject *topic, PyObject *queue_id, RecordCommon *c,
                             Member *ms, Py_ssize_t n) {
    int64_t total = 0, qoff;
    for (Py_ssize_t i = 0; i < n; i++)
        total += member_size(c, &ms[i]);
    PyObject *key = PyTuple_Pack(2, topic, queue_id), *ids = NULL, *sizes = NULL;
    PyObject *result = NULL;
    Segment s;
    if (key == NULL)
        return NULL;
    int rc = queue_next(a, key, n, &qoff);
    if (rc == ENC_OK)
        rc = segment_get(a, &s);
    if (rc != ENC_OK) {
        Py_DECREF(key);
        return finish_slow(rc);
    }
    if (s.pos < 0 || s.pos + total + MIN_FREE_AFTER > s.size) {
        segment_release(&s);
        Py_DECREF(key);
        return finish_slow(ENC_SLOW);
    }
    ids = PyList_New(n);
    sizes = PyList_New(n);
    if (ids == NULL || sizes == NULL)
        goto out;
    for (Py_ssize_t i = 0; i < n; i++) { /* every allocation before the first byte is written */
        PyObject *sz = PyLong_FromLongLong(member_size(c, &ms[i]));
        if (sz == NULL)
            goto out;
        PyList_SET_ITEM(sizes, i, sz);
        PyList_SET_ITEM(ids, i, ms[i].enc.msg_id);
        ms[i].enc.msg_id = NULL;
    }
    int64_t start = s.from + s.pos, at = s.pos;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t size = member_size(c, &ms[i]);
        write_record((unsigned char *)s.buf.buf + at, (int32_t)size, c, ms[i].flag, qoff + i,
                     s.from + at, 0, 0, ms[i].body, ms[i].body_len, a->scratch + ms[i].enc.start,
                     ms[i].enc.len);
        at += size;
    }
    if (set_after_write(a, &s, key, qoff + n, at, c->store_ts) < 0)
        goto out;
    PyObject *vals[RESULT_FIELDS] = {a->ok, NULL, NULL, NULL, PyList_GET_ITEM(ids, 0), NULL,
                                     NULL, ids, a->empty, a->store_host, sizes};
    vals[1] = PyLong_FromLongLong(start);
    vals[2] = PyLong_FromLongLong(total);
    vals[3] = PyLong_FromLongLong(qoff);
    vals[5] = PyLong_FromLongLong(c->store_ts);
    vals[6] = PyLong_FromSsize_t(n);
    if (vals[1] && vals[2] && vals[3] && vals[5] && vals[6])
        result = new_result(a, vals);
    for (int i = 1; i < 7; i++)
        if (i != 4)
            Py_XDECREF(vals[i]);
out:
    segment_release(&s);
    Py_DECREF(key);
    Py_XDECREF(ids);
    Py_XDECREF(sizes);
    return result;
}

static void members_free(Member *ms, Py_ssize_t n) {
    if (ms != NULL)
        for (Py_ssize_t i = 0; i < n; i++)
            Py_XDECREF(ms[i].enc.msg_id);
    PyMem_Free(ms);
}

/* One list item as a member: a Message of ``topic`` or a (body, encoded, flag) tuple; its
 * body object goes to *body_obj (a new reference). */
static int member_from(Appender *a, PyObject *item, PyObject *topic, Py_ssize_t *plen,
                       double now, Member *m, PyObject **body_obj) {
    PyObject *body, *props, *flag;
    int rc = ENC_OK;
    if (PyTuple_CheckExact(item) && PyTuple_GET_SIZE(item) == 3) {
        body = PyTuple_GET_ITEM(item, 0);
        props = PyTuple_GET_ITEM(item, 1);
        flag = PyTuple_GET_ITEM(item, 2);
        Py_INCREF(body);
        Py_INCREF(props);
        Py_INCREF(flag);
    } else {
        PyObject *t = PyObject_GetAttr(item, s_topic);
        if (t == NULL)
            return ENC_ERROR;
        int same = t == topic || (PyUnicode_CheckExact(t) && PyUnicode_Compare(t, topic) == 0);
        Py_DECREF(t);
        body = same ? PyObject_GetAttr(item, s_body) : NULL;
        props = body ? PyObject_GetAttr(item, s_properties) : NULL;
        flag = props ? PyObject_GetAttr(item, s_flag) : NULL;
        if (flag == NULL) {
            Py_XDECREF(body);
            Py_XDECREF(props);
            return PyErr_Occurred() ? ENC_ERROR : ENC_SLOW;
        }
    }
    *body_obj = body;
    if (!PyBytes_CheckExact(body) || PyBytes_GET_SIZE(body) > a->max_body ||
        !as_i32(flag, &m->flag)) {
        rc = ENC_SLOW;
    } else {
        m->body = (const unsigned char *)PyBytes_AS_STRING(body);
        m->body_len = PyBytes_GET_SIZE(body);
        rc = encode_props(a, props, plen, now, 0, &m->enc);
    }
    Py_DECREF(props);
    Py_DECREF(flag);
    return rc;
}

/* Checks of a batch put; sets c and the time. */
static int batch_common(Appender *a, PyObject *const *args, RecordCommon *c, double *now) {
    int rc = prepare_common(a, args[0], args[1], args[5], c);
    if (rc != ENC_OK)
        return rc;
    c->sys_flag = 0;
    if (!as_i64(args[4], &c->born_ts))
        return ENC_SLOW;
    *now = now_ms();
    c->store_ts = (int64_t)*now;
    return ENC_OK;
}

/* append_batch(topic, queue_id, members, extra, born_timestamp, born_host)
 *   -> PutMessageResult | None
 * The members of a batch contiguously in one segment. A member is a Message of ``topic`` or
 * a (body, encoded properties, flag) tuple; ``extra`` is unused (b""). */
static PyObject *Appender_append_batch(Appender *a, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "append_batch takes 6 arguments");
        return NULL;
    }
    PyObject *msgs = args[2];
    RecordCommon c;
    double now;
    int rc = batch_common(a, args, &c, &now);
    if (rc != ENC_OK)
        return finish_slow(rc);
    if (!PyList_CheckExact(msgs))
        Py_RETURN_NONE;
    Py_ssize_t n = PyList_GET_SIZE(msgs), done = 0, plen = 0;
    if (n == 0 || n > MAX_BATCH)
        Py_RETURN_NONE;
    Member *ms = PyMem_Calloc(n, sizeof(Member));
    PyObject **bodies = PyMem_Calloc(n, sizeof(PyObject *));
    PyObject *result = NULL;
    if (ms == NULL || bodies == NULL) {
        PyErr_NoMemory();
        goto out;
    }
    for (rc = ENC_OK; done < n && rc == ENC_OK; done++)
        rc = member_from(a, PyList_GET_ITEM(msgs, done), args[0], &plen, now, &ms[done],
                         &bodies[done]);
    result = rc == ENC_OK ? write_batch(a, args[0], args[1], &c, ms, n) : finish_slow(rc);
out:
    members_free(ms, n);
    if (bodies != NULL)
        for (Py_ssize_t i = 0; i < n; i++)
            Py_XDECREF(bodies[i]);
    PyMem_Free(bodies);
    return result;
}

/* append_batch_body(topic, queue_id, body, extra, born_timestamp, born_host)
 *   -> PutMessageResult | None
 * A SEND_BATCH_MESSAGE body (blocks of TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODYLEN, body,
 * PROPSLEN, properties) put as a batch, the encoded ``extra`` properties appended to each
 * member's as bolide.protocol.bodies.batch.batch_members does. None also for a body that does
 * not parse: the general path decodes it and says what is wrong. */
static PyObject *Appender_append_batch_body(Appender *a, PyObject *const *args,
                                            Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "append_batch_body takes 6 arguments");
        return NULL;
    }
    RecordCommon c;
    double now;
    int rc = batch_common(a, args, &c, &now);
    if (rc != ENC_OK)
        return finish_slow(rc);
    if (!PyBytes_CheckExact(args[3]))
        Py_RETURN_NONE;
    Py_buffer body;
    if (PyObject_GetBuffer(args[2], &body, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *b = body.buf, *extra = (const unsigned char *)PyBytes_AS_STRING(args[3]);
    Py_ssize_t len = body.len, extra_n = PyBytes_GET_SIZE(args[3]);
    Py_ssize_t n = 0, cap = 64, pos = 0, plen = 0;
    Member *ms = PyMem_Calloc(cap, sizeof(Member));
    PyObject *result = NULL;
    if (ms == NULL) {
        PyErr_NoMemory();
        goto out;
    }
    rc = len ? ENC_OK : ENC_SLOW;
    while (rc == ENC_OK && pos < len) {
        if (len - pos < 22 || n == MAX_BATCH) {
            rc = ENC_SLOW;
            break;
        }
        int32_t flag = rd32(b + pos + 12), body_len = rd32(b + pos + 16);
        pos += 20;
        if (body_len < 0 || body_len > len - pos - 2 || body_len > a->max_body) {
            rc = ENC_SLOW;
            break;
        }
        const unsigned char *payload = b + pos;
        pos += body_len;
        Py_ssize_t props_len = (int16_t)((b[pos] << 8) | b[pos + 1]);
        pos += 2;
        if (props_len < 0 || props_len > len - pos) {
            rc = ENC_SLOW;
            break;
        }
        if (n == cap) {
            Member *grown = PyMem_Realloc(ms, 2 * cap * sizeof(Member));
            if (grown == NULL) {
                PyErr_NoMemory();
                rc = ENC_ERROR;
                break;
            }
            memset(grown + cap, 0, cap * sizeof(Member));
            ms = grown;
            cap *= 2;
        }
        Member *m = &ms[n++];
        m->body = payload;
        m->body_len = body_len;
        m->flag = flag;
        m->enc.start = plen;
        m->enc.msg_id = NULL;
        rc = encode_raw(a, b + pos, props_len, extra, extra_n, 0, &plen, &m->enc);
        rc = encode_done(a, rc, &plen, now, &m->enc);
        pos += props_len;
    }
    result = rc == ENC_OK ? write_batch(a, args[0], args[1], &c, ms, n) : finish_slow(rc);
out:
    members_free(ms, n);
    PyBuffer_Release(&body);
    return result;
}

/* The slot offsets of the result class: a slots dataclass whose fields are object members
 * in result_fields; otherwise (0) results are made by calling the class. */
static int find_slots(Appender *a) {
    a->slots[0] = 0;
    if (!PyType_Check(a->result_type))
        return 0;
    Py_ssize_t found[RESULT_FIELDS];
    for (int i = 0; i < RESULT_FIELDS; i++) {
        PyObject *d = PyObject_GetAttrString(a->result_type, result_fields[i]);
        if (d == NULL) {
            PyErr_Clear();
            return 0;
        }
        int ok = Py_IS_TYPE(d, &PyMemberDescr_Type) &&
                 ((PyMemberDescrObject *)d)->d_member->type == T_OBJECT_EX;
        found[i] = ok ? ((PyMemberDescrObject *)d)->d_member->offset : 0;
        Py_DECREF(d);
        if (!ok || found[i] <= 0)
            return 0;
    }
    PyObject *fields = PyObject_GetAttrString(a->result_type, "__slots__");
    Py_ssize_t n = fields ? PyObject_Length(fields) : -1;
    Py_XDECREF(fields);
    if (n != RESULT_FIELDS) { /* a field this code does not fill */
        PyErr_Clear();
        return 0;
    }
    memcpy(a->slots, found, sizeof(found));
    return 0;
}

static int Appender_init(Appender *a, PyObject *args, PyObject *kwds) {
    static char *names[] = {"commit_log", "files", "queue_offsets", "queue_room", "topic_fields",
                            "store_host", "uniq", "result_type", "ok", "max_body",
                            "room_ahead", NULL};
    PyObject *cl, *files, *qo, *qr, *tf, *host, *uniq, *rt, *ok;
    Py_ssize_t max_body, ahead;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO!O!O!SOOOnn", names, &cl,
                                     &files, &PyDict_Type, &qo, &PyDict_Type, &qr, &PyDict_Type,
                                     &tf, &host, &uniq, &rt, &ok, &max_body, &ahead))
        return -1;
    if (PyBytes_GET_SIZE(host) != 8) {
        PyErr_SetString(PyExc_ValueError, "the fast path takes an IPv4 store host");
        return -1;
    }
    PyObject *prefix = PyObject_GetAttrString(uniq, "_prefix");
    if (prefix == NULL)
        return -1;
    Py_ssize_t plen;
    const char *p = PyUnicode_AsUTF8AndSize(prefix, &plen);
    if (p == NULL || plen > (Py_ssize_t)sizeof(a->prefix)) {
        Py_DECREF(prefix);
        if (p != NULL)
            PyErr_SetString(PyExc_ValueError, "the UNIQ_KEY prefix is too long");
        return -1;
    }
    memcpy(a->prefix, p, plen);
    a->prefix_len = plen;
    Py_DECREF(prefix);
    PyObject *counter = PyObject_GetAttrString(uniq, "_counter");
    if (counter == NULL)
        return -1;
    Py_XSETREF(a->counter, counter);
    PyObject *objs[] = {cl, files, qo, qr, tf, host, uniq, rt, ok};
    PyObject **slots[] = {&a->commit_log, &a->files, &a->queue_offsets, &a->queue_room,
                          &a->topic_fields, &a->store_host, &a->uniq, &a->result_type, &a->ok};
    for (int i = 0; i < 9; i++) {
        Py_INCREF(objs[i]);
        Py_XSETREF(*slots[i], objs[i]);
    }
    Py_XSETREF(a->empty, PyUnicode_FromString(""));
    if (a->empty == NULL)
        return -1;
    if (find_slots(a) < 0)
        return -1;
    a->max_body = max_body;
    a->room_ahead = ahead;
    return read_month(a);
}

/* every object an Appender holds, for the garbage collector */
static const size_t held_objects[] = {
    offsetof(Appender, commit_log), offsetof(Appender, files), offsetof(Appender, queue_offsets),
    offsetof(Appender, queue_room), offsetof(Appender, topic_fields),
    offsetof(Appender, store_host), offsetof(Appender, uniq), offsetof(Appender, counter),
    offsetof(Appender, result_type), offsetof(Appender, ok), offsetof(Appender, empty)};
#define HELD(a, i) (*(PyObject **)((char *)(a) + held_objects[i]))

static int Appender_traverse(Appender *a, visitproc visit, void *arg) {
    for (size_t i = 0; i < sizeof(held_objects) / sizeof(held_objects[0]); i++)
        Py_VISIT(HELD(a, i));
    return 0;
}

static int Appender_clear(Appender *a) {
    for (size_t i = 0; i < sizeof(held_objects) / sizeof(held_objects[0]); i++)
        Py_CLEAR(HELD(a, i));
    return 0;
}

static void Appender_dealloc(Appender *a) {
    PyObject_GC_UnTrack(a);
    Appender_clear(a);
    PyMem_Free(a->scratch);
    Py_TYPE(a)->tp_free((PyObject *)a);
}

static PyMethodDef Appender_methods[] = {
    {"append", (PyCFunction)(void (*)(void))Appender_append, METH_FASTCALL,
     "Append one message on the fast path; None when the general path must take it."},
    {"append_batch", (PyCFunction)(void (*)(void))Appender_append_batch, METH_FASTCALL,
     "Append a batch on the fast path; None when the general path must take it."},
    {"append_batch_body", (PyCFunction)(void (*)(void))Appender_append_batch_body,
     METH_FASTCALL,
     "Append the members of a SEND_BATCH_MESSAGE body; None when the general path must."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject AppenderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "bolide.store._append.Appender",
    .tp_basicsize = sizeof(Appender),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The compiled fast path of the store's puts.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Appender_init,
    .tp_dealloc = (destructor)Appender_dealloc,
    .tp_traverse = (traverseproc)Appender_traverse,
    .tp_clear = (inquiry)Appender_clear,
    .tp_methods = Appender_methods,
};

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

enum { PAGES_POPULATE, PAGES_SYNC };

/* madvise(MADV_POPULATE_WRITE) or msync(MS_SYNC) of the pages of a writable mapping (args:
 * buffer, start, length) that hold [start, start + length), with the GIL released. Returns
 * -1 with a Python error, 0 when there was nothing to do, 1 done, 2 when the call failed
 * (errno in *err). */
static int on_pages(PyObject *args, int op, int *err) {
    Py_buffer view;
    Py_ssize_t start, length;
    if (!PyArg_ParseTuple(args, "w*nn", &view, &start, &length))
        return -1;
    long page = sysconf(_SC_PAGESIZE);
    int rc = 0;
    if (page > 0 && start >= 0 && length > 0 && start < view.len) {
        if (length > view.len - start)
            length = view.len - start;
        uintptr_t from = (uintptr_t)view.buf + start, to = from + length;
        from -= from % (uintptr_t)page;
        Py_BEGIN_ALLOW_THREADS
        int failed = op == PAGES_POPULATE
                         ? madvise((void *)from, to - from, MADV_POPULATE_WRITE) != 0
                         : msync((void *)from, to - from, MS_SYNC) != 0;
        *err = errno;
        rc = failed ? 2 : 1;
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&view);
    return rc;
}

/* populate_write(buffer, start, length) -> bool: map the pages of a writable shared mapping
 * for writing now (MADV_POPULATE_WRITE, Linux 5.14+), so that the writer does not take a page
 * fault at its first touch of each page; False when the kernel cannot (the pages are then
 * faulted in by the writes, as before). */
static PyObject *populate_write(PyObject *self, PyObject *args) {
    int err = 0, rc = on_pages(args, PAGES_POPULATE, &err);
    return rc < 0 ? NULL : PyBool_FromLong(rc == 1);
}

/* sync_range(buffer, start, length): msync(MS_SYNC) of the pages of a shared file mapping that
 * hold [start, start + length): a range-limited fdatasync (the kernel writes those pages and
 * the metadata their data needs, and nothing else of the file, such as pages mapped ahead of
 * the writer). Raises OSError. */
static PyObject *sync_range(PyObject *self, PyObject *args) {
    int err = 0, rc = on_pages(args, PAGES_SYNC, &err);
    if (rc < 0)
        return NULL;
    if (rc == 2) {
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    Py_RETURN_NONE;
}

/* offset_msg_ids(store_host, offset, sizes) -> list[str]: the offsetMsgId of each record of a
 * batch written back to back from CommitLog ``offset`` with ``sizes``: the store host bytes
 * and the record's offset (int64, big-endian) in upper-case hex, as
 * bolide.common.msgid.create_offset_msg_id writes one. */
static PyObject *offset_msg_ids(PyObject *self, PyObject *args) {
    static const char hex[] = "0123456789ABCDEF";
    Py_buffer host;
    long long offset;
    PyObject *sizes;
    if (!PyArg_ParseTuple(args, "y*LO!", &host, &offset, &PyList_Type, &sizes))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(sizes), hn = host.len;
    PyObject *ids = NULL;
    if (hn > 64) {
        PyErr_SetString(PyExc_ValueError, "a store host is at most 64 bytes");
        goto done;
    }
    char head[128];
    for (Py_ssize_t k = 0; k < hn; k++) {
        unsigned char c = ((const unsigned char *)host.buf)[k];
        head[2 * k] = hex[c >> 4];
        head[2 * k + 1] = hex[c & 15];
    }
    if ((ids = PyList_New(n)) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *id = PyUnicode_New(2 * hn + 16, 127);
        if (id == NULL) {
            Py_CLEAR(ids);
            goto done;
        }
        char *w = (char *)PyUnicode_DATA(id);
        memcpy(w, head, 2 * hn);
        uint64_t v = (uint64_t)offset;
        for (int k = 15; k >= 0; k--, v >>= 4)
            w[2 * hn + k] = hex[v & 15];
        PyList_SET_ITEM(ids, i, id);
        long long size = PyLong_AsLongLong(PyList_GET_ITEM(sizes, i));
        if (size == -1 && PyErr_Occurred()) {
            Py_CLEAR(ids);
            goto done;
        }
        if (__builtin_add_overflow(offset, size, &offset) && i + 1 < n) {
            PyErr_SetString(PyExc_OverflowError, "CommitLog offset past int64");
            Py_CLEAR(ids);
            goto done;
        }
    }
done:
    PyBuffer_Release(&host);
    return ids;
}

static PyMethodDef module_methods[] = {
    {"offset_msg_ids", offset_msg_ids, METH_VARARGS,
     "offset_msg_ids(store_host, offset, sizes) -> the offsetMsgIds of a batch's records."},
    {"populate_write", populate_write, METH_VARARGS,
     "Map the pages of a writable mapping for writing, the GIL released."},
    {"sync_range", sync_range, METH_VARARGS,
     "msync(MS_SYNC) the pages of a range of a shared mapping, the GIL released."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_append", NULL, -1, module_methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__append(void) {
    crc_init();
    struct { PyObject **slot; const char *text; } names[] = {
        {&s_wrote_position, "wrote_position"}, {&s_file_size, "file_size"},
        {&s_file_from_offset, "file_from_offset"}, {&s_view, "view"},
        {&s_last_store_timestamp, "last_store_timestamp"}, {&s_month_start, "_month_start_ms"},
        {&s_next_month, "_next_month_ms"}, {&s_roll_month, "_roll_month"}, {&s_topic, "topic"},
        {&s_body, "body"}, {&s_properties, "properties"}, {&s_flag, "flag"},
        {&s_files, "files"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if ((*names[i].slot = PyUnicode_InternFromString(names[i].text)) == NULL)
            return NULL;
    if (PyType_Ready(&AppenderType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&AppenderType);
    if (PyModule_AddObject(m, "Appender", (PyObject *)&AppenderType) < 0) {
        Py_DECREF(&AppenderType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
