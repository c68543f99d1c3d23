/* Compiled twin of bolide.store.fastscan's pure-Python scan (same results, tested against
 * each other): walks CommitLog records of the common kind and returns them grouped into runs
 * of ConsumeQueue entries. See fastscan.py for the contract. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_native.h"

/* A ConsumeQueue tagsCode at or below this is a ConsumeQueueExt address (consume_queue.py). */
#define EXT_ADDRESS_MAX (-2147483649LL)

/* Where the TAGS value of an encoded properties blob lies, as record.property_bytes finds
 * it: "TAGS\x01" at the start or right after a 0x02, up to the next 0x02. Returns 1 with
 * [*start, *end) set, 0 when there is no TAGS. */
static int find_tags(const unsigned char *props, Py_ssize_t len, Py_ssize_t *start,
                     Py_ssize_t *end) {
    static const unsigned char needle[5] = {'T', 'A', 'G', 'S', 1};
    Py_ssize_t i = 0;
    while (i + 5 <= len) {
        const unsigned char *hit = memmem(props + i, (size_t)(len - i), needle, 5);
        if (hit == NULL)
            return 0;
        Py_ssize_t at = hit - props;
        if (at == 0 || props[at - 1] == 2) {
            Py_ssize_t k = at + 5;
            while (k < len && props[k] != 2)
                k++;
            *start = at + 5;
            *end = k;
            return 1;
        }
        i = at + 1;
    }
    return 0;
}

/* The tags code of an encoded properties blob: sets *code to the Java hash of its TAGS value
 * (0 when absent or empty); returns 0 when the value is not pure ASCII (the slow path
 * decides). */
static int tags_code_of(const unsigned char *props, Py_ssize_t len, int64_t *code) {
    Py_ssize_t start, end;
    *code = 0;
    if (!find_tags(props, len, &start, &end))
        return 1;
    uint32_t h = 0;
    for (Py_ssize_t k = start; k < end; k++) {
        if (props[k] & 0x80)
            return 0;
        h = 31 * h + props[k];
    }
    *code = (int32_t)h;
    return 1;
}

typedef struct {
    PyObject *runs;        /* list of tuples */
    PyObject *topic;       /* str of the open run (borrowed from the cache) */
    const unsigned char *raw_topic;
    Py_ssize_t raw_topic_len;
    int32_t queue_id;
    int64_t first_qoff, next_qoff, first_phys, end_phys, last_ts;
    int can_extend;
    unsigned char *entries;
    Py_ssize_t count, cap;
} RunState;

static int run_close(RunState *r, PyObject *run_type) {
    if (r->count == 0)
        return 0;
    PyObject *entries = PyBytes_FromStringAndSize((const char *)r->entries, r->count * 20);
    if (entries == NULL)
        return -1;
    PyObject *run = PyObject_CallFunction(run_type, "OiLOLLL", r->topic, (int)r->queue_id,
                                          (long long)r->first_qoff, entries,
                                          (long long)r->first_phys, (long long)r->end_phys,
                                          (long long)r->last_ts);
    Py_DECREF(entries);
    if (run == NULL)
        return -1;
    int rc = PyList_Append(r->runs, run);
    Py_DECREF(run);
    r->count = 0;
    return rc;
}

static PyObject *topic_of(PyObject *cache, const unsigned char *raw, Py_ssize_t len) {
    PyObject *key = PyBytes_FromStringAndSize((const char *)raw, len);
    if (key == NULL)
        return NULL;
    PyObject *topic = PyDict_GetItemWithError(cache, key);
    if (topic == NULL) {
        if (PyErr_Occurred()) {
            Py_DECREF(key);
            return NULL;
        }
        topic = PyUnicode_DecodeUTF8((const char *)raw, len, "replace");
        if (topic == NULL || PyDict_SetItem(cache, key, topic) < 0) {
            Py_XDECREF(topic);
            Py_DECREF(key);
            return NULL;
        }
        Py_DECREF(topic); /* the cache holds it */
    }
    Py_DECREF(key);
    return topic; /* borrowed */
}

/* scan_runs(buf, pos, base, check_crc, max_records, run_type, topic_cache)
 *   -> (pos_after, records, runs) */
static PyObject *scan_runs(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, max_records;
    long long base;
    int check_crc;
    PyObject *run_type, *cache;
    if (!PyArg_ParseTuple(args, "y*nLpnOO!", &view, &pos, &base, &check_crc, &max_records,
                          &run_type, &PyDict_Type, &cache))
        return NULL;
    const unsigned char *buf = view.buf;
    Py_ssize_t limit = view.len;
    Py_ssize_t records = 0;
    RunState r = {0};
    r.runs = PyList_New(0);
    if (r.runs == NULL)
        goto fail;
    r.cap = 256;
    r.entries = PyMem_Malloc(r.cap * 20);
    if (r.entries == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    while (records < max_records && pos >= 0 && pos + 8 <= limit) {
        const unsigned char *rec = buf + pos;
        int32_t total = rd32(rec);
        if (rd32(rec + 4) != MAGIC_V1 || total < 91 || pos + total > limit)
            break;
        int32_t sys_flag = rd32(rec + 36);
        int32_t body_len = rd32(rec + 84);
        if ((sys_flag & 0x30) || (sys_flag & 0x4) || body_len < 0 || body_len > total - 91)
            break;
        const unsigned char *p = rec + 88 + body_len;
        int topic_len = p[0];
        if (topic_len > 127 || 91 + body_len + topic_len > total)
            break;
        int props_len = (p[1 + topic_len] << 8) | p[2 + topic_len];
        if (91 + body_len + topic_len + props_len != total)
            break;
        if ((topic_len && p[1] == 0) || (props_len && rec[total - 1] == 0))
            break; /* torn */
        int64_t phys = rd64(rec + 28);
        if (phys != base + pos)
            break;
        if (topic_len == 19 && memcmp(p + 1, "SCHEDULE_TOPIC_XXXX", 19) == 0)
            break;
        int64_t code;
        if (!tags_code_of(p + 3 + topic_len, props_len, &code))
            break;
        if (check_crc && body_len &&
            (int32_t)(crc32_of(rec + 88, body_len) & 0x7FFFFFFF) != rd32(rec + 8))
            break;
        int32_t queue_id = rd32(rec + 12);
        int64_t qoff = rd64(rec + 20);
        int64_t store_ts = rd64(rec + 56);
        const unsigned char *raw_topic = p + 1;
        if (!(r.count && r.can_extend && queue_id == r.queue_id && qoff == r.next_qoff &&
              topic_len == r.raw_topic_len && memcmp(raw_topic, r.raw_topic, topic_len) == 0)) {
            if (run_close(&r, run_type) < 0)
                goto fail;
            r.topic = topic_of(cache, raw_topic, topic_len);
            if (r.topic == NULL)
                goto fail;
            r.raw_topic = raw_topic;
            r.raw_topic_len = topic_len;
            r.queue_id = queue_id;
            r.first_qoff = qoff;
            r.first_phys = phys;
        }
        if (r.count == r.cap) {
            unsigned char *grown = PyMem_Realloc(r.entries, r.cap * 2 * 20);
            if (grown == NULL) {
                PyErr_NoMemory();
                goto fail;
            }
            r.entries = grown;
            r.cap *= 2;
        }
        unsigned char *e = r.entries + r.count * 20;
        wr64(e, (uint64_t)phys);
        wr32(e + 8, (uint32_t)total);
        wr64(e + 12, (uint64_t)code);
        r.count++;
        r.can_extend = qoff != INT64_MAX; /* no offset follows the largest one */
        r.next_qoff = r.can_extend ? qoff + 1 : qoff;
        r.end_phys = phys + total;
        r.last_ts = store_ts;
        pos += total;
        records++;
    }
    if (run_close(&r, run_type) < 0)
        goto fail;
    PyMem_Free(r.entries);
    PyBuffer_Release(&view);
    PyObject *out = Py_BuildValue("nnN", pos, records, r.runs);
    return out;
fail:
    PyMem_Free(r.entries);
    Py_XDECREF(r.runs);
    PyBuffer_Release(&view);
    return NULL;
}

/* check_index_entries(entries, count, hash_slot_num, segments, cl_min, cl_end, late_at)
 *   -> (problems, stale, late, slot_of)
 * The entry loop of verify_index._check_file: ``entries`` holds entries 0 .. count-1 of an
 * index file (entry 0 unused); ``segments`` the CommitLog as [(start, buffer), ...] in order.
 * problems: [(n, key_hash, diff, prev)] of entries whose chain link or fields are wrong;
 * stale: entries pointing at no record; late: record offsets >= late_at; slot_of: the slot of
 * every entry as native int32s. */
static PyObject *check_index_entries(PyObject *self, PyObject *args) {
    Py_buffer ent;
    Py_ssize_t count;
    long long slots_n, cl_min, cl_end, late_at;
    PyObject *segments;
    if (!PyArg_ParseTuple(args, "y*nLO!LLL", &ent, &count, &slots_n, &PyList_Type, &segments,
                          &cl_min, &cl_end, &late_at))
        return NULL;
    PyObject *problems = NULL, *late = NULL, *slot_bytes = NULL, *result = NULL;
    Py_ssize_t nseg = PyList_GET_SIZE(segments);
    Py_buffer *segs = PyMem_Calloc(nseg ? nseg : 1, sizeof(Py_buffer));
    long long *starts = PyMem_Calloc(nseg ? nseg : 1, sizeof(long long));
    Py_ssize_t got = 0;
    if (segs == NULL || starts == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (slots_n <= 0 || count < 1 || ent.len < count * 20) {
        PyErr_SetString(PyExc_ValueError, "entries buffer shorter than count entries");
        goto done;
    }
    for (; got < nseg; got++) {
        PyObject *item = PyList_GET_ITEM(segments, got);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
            PyErr_SetString(PyExc_TypeError, "segments must be (start, buffer) tuples");
            goto done;
        }
        starts[got] = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 0));
        if (starts[got] == -1 && PyErr_Occurred())
            goto done;
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(item, 1), &segs[got], PyBUF_SIMPLE) < 0)
            goto done;
    }
    problems = PyList_New(0);
    late = PyList_New(0);
    slot_bytes = PyBytes_FromStringAndSize(NULL, count * 4);
    if (problems == NULL || late == NULL || slot_bytes == NULL)
        goto done;
    int32_t *slot_of = (int32_t *)PyBytes_AS_STRING(slot_bytes);
    memset(slot_of, 0, count * 4);
    const unsigned char *e = ent.buf;
    long long stale = 0, last_phy = -1, seg_lo = 0, seg_hi = 0;
    const unsigned char *m = NULL;
    for (Py_ssize_t n = 1; n < count; n++) {
        const unsigned char *x = e + n * 20;
        int32_t key_hash = rd32(x), diff = rd32(x + 12), prev = rd32(x + 16);
        int64_t phy = rd64(x + 4);
        /* Python's % (floor): the slot of a negative hash is still in [0, slots_n) */
        long long slot = key_hash % slots_n;
        if (slot < 0)
            slot += slots_n;
        slot_of[n] = (int32_t)slot;
        if (prev >= n || prev < 0 || key_hash < 0 || diff < 0 || (prev && slot_of[prev] != slot)) {
            PyObject *t = Py_BuildValue("niii", n, key_hash, diff, prev);
            if (t == NULL || PyList_Append(problems, t) < 0) {
                Py_XDECREF(t);
                goto done;
            }
            Py_DECREF(t);
        }
        if (phy == last_phy || phy < cl_min)
            continue;
        last_phy = phy;
        if (phy + 91 > cl_end) {
            stale++;
            continue;
        }
        if (!(seg_lo <= phy && phy < seg_hi)) {
            Py_ssize_t lo = 0, hi = nseg - 1, at = -1;
            while (lo <= hi) { /* the last segment starting at or before phy */
                Py_ssize_t mid = (lo + hi) / 2;
                if (starts[mid] <= phy) {
                    at = mid;
                    lo = mid + 1;
                } else {
                    hi = mid - 1;
                }
            }
            if (at < 0 || phy >= starts[at] + segs[at].len) {
                stale++;
                continue;
            }
            seg_lo = starts[at];
            seg_hi = seg_lo + segs[at].len - 36;
            m = segs[at].buf;
            if (!(seg_lo <= phy && phy < seg_hi)) {
                stale++;
                continue;
            }
        }
        const unsigned char *r = m + (phy - seg_lo);
        int32_t magic = rd32(r + 4);
        if (rd64(r + 28) != phy || (magic != MAGIC_V1 && magic != MAGIC_V2)) {
            stale++;
        } else if (phy >= late_at) {
            PyObject *v = PyLong_FromLongLong(phy);
            if (v == NULL || PyList_Append(late, v) < 0) {
                Py_XDECREF(v);
                goto done;
            }
            Py_DECREF(v);
        }
    }
    result = Py_BuildValue("OLOO", problems, stale, late, slot_bytes);
done:
    for (Py_ssize_t i = 0; i < got; i++)
        PyBuffer_Release(&segs[i]);
    PyMem_Free(segs);
    PyMem_Free(starts);
    Py_XDECREF(problems);
    Py_XDECREF(late);
    Py_XDECREF(slot_bytes);
    PyBuffer_Release(&ent);
    return result;
}


/* The TAGS value of the record at ``rec`` (``size`` bytes), as record.record_property finds
 * it. Returns 1 with *val and *vlen set, 0 when the record has no TAGS, -1 when the record's
 * fields do not fit ``size`` (the caller lets the pure-Python path decide). */
static int record_tags(const unsigned char *rec, int64_t size, const unsigned char **val,
                       Py_ssize_t *vlen) {
    if (size < 40)
        return -1;
    int32_t sys_flag = rd32(rec + 36);
    int64_t p = 48 + ((sys_flag & 0x10) ? 20 : 8) + 8;
    p += ((sys_flag & 0x20) ? 20 : 8) + 12;
    if (p + 4 > size)
        return -1;
    int32_t body_len = rd32(rec + p);
    if (body_len < 0)
        return -1;
    p += 4 + (int64_t)body_len;
    if (rd32(rec + 4) == MAGIC_V1) {
        if (p + 1 > size)
            return -1;
        p += 1 + rec[p];
    } else {
        if (p + 2 > size)
            return -1;
        int16_t topic_len = (int16_t)((rec[p] << 8) | rec[p + 1]);
        p += 2 + topic_len;
    }
    if (p < 0 || p + 2 > size)
        return -1;
    int16_t props_len = (int16_t)((rec[p] << 8) | rec[p + 1]);
    if (props_len <= 0)
        return 0;
    if (p + 2 + props_len > size)
        return -1;
    const unsigned char *props = rec + p + 2;
    Py_ssize_t start, end;
    if (!find_tags(props, props_len, &start, &end))
        return 0;
    *val = props + start;
    *vlen = end - start;
    return 1;
}

/* select_entries(entries, i, n, seg, seg_start, seg_end, codes, tags, limits, buffers,
 *                qoffsets, state) -> (i, scanned, total_bytes, max_phy, stop)
 * The entry loop of MessageStore.get_message over ConsumeQueue entries i .. n-1 whose records
 * lie in one CommitLog segment ``seg`` (a memoryview of the bytes from global offset
 * ``seg_start`` to ``seg_end``). ``codes``: tuple of accepted tag codes or None; ``tags``:
 * tuple of accepted tags (UTF-8) or None; ``limits``: (cl_max, memory_limit, mem_count,
 * mem_bytes, disk_count, disk_bytes); ``state``: (offset, scanned, total_bytes, max_phy).
 * Queue offsets of accepted records are appended to ``qoffsets``, and to ``buffers`` a slice
 * of ``seg`` per record, or (``buffers`` a bytearray) the record's bytes. stop: 0 all entries done, 1 a transfer limit was reached (get_message stops),
 * 2 entry i needs the pure-Python step (record outside ``seg``, or tags it cannot compare). */
static PyObject *select_entries(PyObject *self, PyObject *args) {
    Py_buffer ent;
    Py_ssize_t i, n, mem_count, disk_count;
    long long seg_start, seg_end, cl_max, memory_limit, mem_bytes, disk_bytes;
    long long offset, total_bytes, max_phy;
    Py_ssize_t scanned;
    PyObject *seg, *codes, *tags, *buffers, *qoffsets;
    if (!PyArg_ParseTuple(args, "y*nnOLLOO(LLnLnL)OO!(LnLL)", &ent, &i, &n, &seg, &seg_start,
                          &seg_end, &codes, &tags, &cl_max, &memory_limit, &mem_count, &mem_bytes,
                          &disk_count, &disk_bytes, &buffers, &PyList_Type,
                          &qoffsets, &offset, &scanned, &total_bytes, &max_phy))
        return NULL;
    int joined = PyByteArray_CheckExact(buffers);
    if (!joined && !PyList_CheckExact(buffers)) {
        PyBuffer_Release(&ent);
        PyErr_SetString(PyExc_TypeError, "buffers must be a list or a bytearray");
        return NULL;
    }
    Py_buffer sv;
    if (PyObject_GetBuffer(seg, &sv, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&ent);
        return NULL;
    }
    int64_t code_list[16];
    Py_ssize_t ncodes = -1; /* -1: every code */
    if (codes != Py_None) {
        if (!PyTuple_Check(codes) || PyTuple_GET_SIZE(codes) > 16) {
            ncodes = -2; /* too many to hold: the pure-Python step decides */
        } else {
            ncodes = PyTuple_GET_SIZE(codes);
            for (Py_ssize_t k = 0; k < ncodes; k++) {
                code_list[k] = PyLong_AsLongLong(PyTuple_GET_ITEM(codes, k));
                if (code_list[k] == -1 && PyErr_Occurred())
                    goto fail;
            }
        }
    }
    if (tags != Py_None && !PyTuple_Check(tags)) {
        PyErr_SetString(PyExc_TypeError, "tags must be a tuple of bytes or None");
        goto fail;
    }
    const unsigned char *e = ent.buf;
    Py_ssize_t limit_n = ent.len / 20 < n ? ent.len / 20 : n;
    Py_ssize_t accepted = PyList_GET_SIZE(qoffsets);
    const unsigned char *base = sv.buf;
    int stop = 0;
    if (ncodes == -2) {
        stop = i < limit_n ? 2 : 0;
        goto done;
    }
    for (; i < limit_n; i++) {
        const unsigned char *p = e + i * 20;
        int64_t phys = rd64(p);
        int32_t size = rd32(p + 8);
        int64_t code = rd64(p + 12);
        if (size == 0x7FFFFFFF) {
            scanned++;
            continue;
        }
        if (size <= 0 || phys < 0) { /* a damaged entry: the caller's general step skips it */
            stop = 2;
            break;
        }
        int wanted = ncodes < 0;
        if (!wanted && code <= EXT_ADDRESS_MAX) { /* a ConsumeQueueExt address: the record's tag */
            if (tags == Py_None) {                 /* decides, or the general step does */
                stop = 2;
                break;
            }
            wanted = 1;
        }
        for (Py_ssize_t k = 0; k < ncodes && !wanted; k++)
            wanted = code_list[k] == code;
        int tag_ok = 1;
        if (wanted) {
            if (phys < seg_start || phys > seg_end || size > seg_end - phys
                || phys - seg_start + size > sv.len) {
                stop = 2;
                break;
            }
            if (tags != Py_None) {
                const unsigned char *val = NULL;
                Py_ssize_t vlen = 0;
                int found = record_tags(base + (phys - seg_start), size, &val, &vlen);
                if (found < 0) {
                    stop = 2;
                    break;
                }
                tag_ok = 0;
                if (found) {
                    int ascii = 1;
                    for (Py_ssize_t k = 0; k < vlen; k++)
                        if (val[k] & 0x80) { ascii = 0; break; }
                    if (!ascii) {
                        stop = 2;
                        break;
                    }
                    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(tags) && !tag_ok; k++) {
                        PyObject *t = PyTuple_GET_ITEM(tags, k);
                        tag_ok = PyBytes_Check(t) && PyBytes_GET_SIZE(t) == vlen &&
                                 memcmp(PyBytes_AS_STRING(t), val, (size_t)vlen) == 0;
                    }
                }
            }
        }
        max_phy = phys;
        if (accepted) {
            if (cl_max - phys > memory_limit) {
                if (total_bytes + size > disk_bytes || accepted >= disk_count) {
                    stop = 1;
                    break;
                }
            } else if (total_bytes + size > mem_bytes || accepted >= mem_count) {
                stop = 1;
                break;
            }
        }
        scanned++;
        if (!wanted || !tag_ok)
            continue;
        int rc;
        if (joined) { /* the record's bytes onto the get's one buffer */
            Py_ssize_t at = PyByteArray_GET_SIZE(buffers);
            if (PyByteArray_Resize(buffers, at + size) < 0)
                goto fail;
            memcpy(PyByteArray_AS_STRING(buffers) + at, base + (phys - seg_start), (size_t)size);
        } else {
            PyObject *slice = PySequence_GetSlice(seg, (Py_ssize_t)(phys - seg_start),
                                                  (Py_ssize_t)(phys - seg_start + size));
            if (slice == NULL)
                goto fail;
            rc = PyList_Append(buffers, slice);
            Py_DECREF(slice);
            if (rc < 0)
                goto fail;
        }
        PyObject *qoff = PyLong_FromLongLong(offset + (long long)scanned - 1);
        if (qoff == NULL)
            goto fail;
        rc = PyList_Append(qoffsets, qoff);
        Py_DECREF(qoff);
        if (rc < 0)
            goto fail;
        accepted++;
        total_bytes += size;
    }
done:
    PyBuffer_Release(&sv);
    PyBuffer_Release(&ent);
    return Py_BuildValue("nnLLi", i, scanned, total_bytes, max_phy, stop);
fail:
    PyBuffer_Release(&sv);
    PyBuffer_Release(&ent);
    return NULL;
}

/* java_hash(text) -> int: Java's String.hashCode() of ``text`` (UTF-16 code units), signed. */
static PyObject *java_hash(PyObject *self, PyObject *arg) {
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "java_hash takes a str");
        return NULL;
    }
    if (PyUnicode_READY(arg) < 0)
        return NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(arg);
    int kind = PyUnicode_KIND(arg);
    const void *data = PyUnicode_DATA(arg);
    uint32_t h = 0;
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *p = data;
        for (Py_ssize_t i = 0; i < n; i++)
            h = 31 * h + p[i];
    } else {
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_UCS4 c = PyUnicode_READ(kind, data, i);
            if (c >= 0x10000) { /* a surrogate pair in UTF-16 */
                c -= 0x10000;
                h = 31 * h + (0xD800 + (c >> 10));
                h = 31 * h + (0xDC00 + (c & 0x3FF));
            } else {
                h = 31 * h + c;
            }
        }
    }
    return PyLong_FromLong((long)(int32_t)h);
}

/* walk_records(buf, pos, stop, max_rows) -> (bytes of native int64 record starts, next pos):
   follows the TOTALSIZE prefixes from pos while a record starts before min(stop, len - 3),
   at most max_rows; stops before a TOTALSIZE under 91 (a BLANK, zeros, damage). */
static PyObject *walk_records(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, stop, max_rows;
    if (!PyArg_ParseTuple(args, "y*nnn", &view, &pos, &stop, &max_rows))
        return NULL;
    const unsigned char *buf = view.buf;
    Py_ssize_t end = view.len - 3 < stop ? view.len - 3 : stop;
    if (max_rows < 0)
        max_rows = 0;
    PyObject *out = PyBytes_FromStringAndSize(NULL, (max_rows < 65536 ? max_rows : 65536) * 8);
    if (out == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    Py_ssize_t cap = PyBytes_GET_SIZE(out) / 8, count = 0;
    while (count < max_rows && pos >= 0 && pos < end) {
        int32_t size = rd32(buf + pos);
        if (size < 91)
            break;
        if (count == cap) {
            Py_ssize_t grown = cap * 2 < max_rows ? cap * 2 : max_rows;
            if (_PyBytes_Resize(&out, grown * 8) < 0) {
                PyBuffer_Release(&view);
                return NULL;
            }
            cap = grown;
        }
        int64_t at = pos;
        memcpy(PyBytes_AS_STRING(out) + count * 8, &at, 8);
        count++;
        pos += size;
    }
    PyBuffer_Release(&view);
    if (count != cap && _PyBytes_Resize(&out, count * 8) < 0)
        return NULL;
    return Py_BuildValue("(Nn)", out, pos);
}

/* One record's header fields as classify_records lays them out: native byte order, 96 bytes
   (record_columns.FIELDS is the numpy dtype of this struct). */
typedef struct {
    int64_t total, queue_offset, phys, born_ts, store_ts;
    uint64_t born_host, store_host;
    int64_t body_len, topic_len;
    int32_t queue_id, sys_flag, reconsume, magic;
    uint8_t ok;
    uint8_t pad[7];
} record_fields;
_Static_assert(sizeof(record_fields) == 96, "record_fields must match record_columns.FIELDS");

#define SLOW_FLAGS (0x10 | 0x20 | 0x1) /* BORNHOST_V6 | STOREHOST_V6 | COMPRESSED */
#define MAGIC_V1 (-626843481)

/* classify_records(buf, starts) -> bytes of one record_fields per native int64 start: the
   header fields (of the record at byte 0 for a start too close to the end, as the numpy
   twin) and ok = 1 when the columnar decoder takes the record: v1, IPv4 hosts with ports
   below 65536, uncompressed, lengths that add up to TOTALSIZE, a topic not starting with a
   zero byte, properties ending with 0x02. */
static PyObject *classify_records(PyObject *self, PyObject *args) {
    Py_buffer view, starts;
    if (!PyArg_ParseTuple(args, "y*y*", &view, &starts))
        return NULL;
    const unsigned char *buf = view.buf;
    Py_ssize_t size = view.len, n = starts.len / 8;
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(record_fields));
    if (out == NULL)
        goto done;
    record_fields *rec = (record_fields *)PyBytes_AS_STRING(out);
    const int64_t *pos = starts.buf;
    for (Py_ssize_t i = 0; i < n; i++, rec++) {
        memset(rec, 0, sizeof(*rec));
        int64_t at = pos[i];
        int inside = at >= 0 && at <= size - 88;
        if (!inside) {
            if (size < 88)
                continue;
            at = 0;
        }
        const unsigned char *r = buf + at;
        rec->total = rd32(r);
        rec->magic = rd32(r + 4);
        rec->queue_id = rd32(r + 12);
        rec->queue_offset = rd64(r + 20);
        rec->phys = rd64(r + 28);
        rec->sys_flag = rd32(r + 36);
        rec->born_ts = rd64(r + 40);
        rec->born_host = (uint64_t)rd64(r + 48);
        rec->store_ts = rd64(r + 56);
        rec->store_host = (uint64_t)rd64(r + 64);
        rec->reconsume = rd32(r + 72);
        rec->body_len = rd32(r + 84);
        if (!inside || rec->magic != MAGIC_V1 || rec->total < 91 || at + rec->total > size
            || (rec->sys_flag & SLOW_FLAGS) || rec->body_len < 0 || rec->body_len > rec->total - 91
            || (rec->born_host & 0xFFFFFFFFu) > 65535 || (rec->store_host & 0xFFFFFFFFu) > 65535)
            continue;
        const unsigned char *topic = r + 88 + rec->body_len;
        int64_t topic_len = topic[0];
        if (topic_len > 127 || 91 + rec->body_len + topic_len > rec->total)
            continue;
        const unsigned char *props = topic + 1 + topic_len;
        int64_t props_len = ((int64_t)props[0] << 8) | props[1];
        if (91 + rec->body_len + topic_len + props_len != rec->total)
            continue;
        if (topic_len && topic[1] == 0)
            continue;
        if (props_len && r[rec->total - 1] != 2)
            continue;
        rec->topic_len = topic_len; /* 0 where the record is not taken, as the numpy twin */
        rec->ok = 1;
    }
done:
    PyBuffer_Release(&view);
    PyBuffer_Release(&starts);
    return out;
}

/* gather_spans(buf, starts, lengths) -> (int32 offsets bytes, data bytes): the byte spans
   [starts[i], starts[i] + lengths[i]) of buf (native int64 each) copied back to back, with
   the n + 1 offsets of an Arrow binary array over them. ValueError for a span outside buf or
   more than 2 GiB in all. */
static PyObject *gather_spans(PyObject *self, PyObject *args) {
    Py_buffer view, st, ln;
    PyObject *offsets = NULL, *data = NULL, *out = NULL;
    if (!PyArg_ParseTuple(args, "y*y*y*", &view, &st, &ln))
        return NULL;
    Py_ssize_t n = st.len / 8;
    const int64_t *starts = st.buf, *lengths = ln.buf;
    int64_t total = 0;
    if (ln.len != st.len) {
        PyErr_SetString(PyExc_ValueError, "starts and lengths differ in length");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (starts[i] < 0 || lengths[i] < 0 || starts[i] > view.len - lengths[i]) {
            PyErr_Format(PyExc_ValueError, "span %zd is outside the buffer", i);
            goto done;
        }
        total += lengths[i];
        if (total > INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "spans of more than 2 GiB");
            goto done;
        }
    }
    offsets = PyBytes_FromStringAndSize(NULL, (n + 1) * 4);
    data = PyBytes_FromStringAndSize(NULL, total);
    if (offsets == NULL || data == NULL)
        goto done;
    int32_t *off = (int32_t *)PyBytes_AS_STRING(offsets);
    char *dst = PyBytes_AS_STRING(data);
    const char *src = view.buf;
    Py_BEGIN_ALLOW_THREADS
    int32_t at = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        off[i] = at;
        memcpy(dst + at, src + starts[i], (size_t)lengths[i]);
        at += (int32_t)lengths[i];
    }
    off[n] = at;
    Py_END_ALLOW_THREADS
    out = PyTuple_Pack(2, offsets, data);
done:
    Py_XDECREF(offsets);
    Py_XDECREF(data);
    PyBuffer_Release(&view);
    PyBuffer_Release(&st);
    PyBuffer_Release(&ln);
    return out;
}

/* Interned property keys of split_properties: open addressing over (start, length) spans of
   the data, ids in first-seen order. */
typedef struct {
    const unsigned char *data;
    int32_t *slots; /* id + 1, 0 = empty */
    Py_ssize_t mask;
    int32_t *start, *len, *last_rec;
    int32_t count, cap;
} key_table;

static uint32_t span_hash(const unsigned char *p, Py_ssize_t n) {
    uint32_t h = 2166136261u;
    for (Py_ssize_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

static int table_grow(key_table *t) {
    Py_ssize_t size = (t->mask + 1) * 2;
    int32_t *slots = PyMem_Calloc((size_t)size, sizeof(int32_t));
    int32_t cap = t->cap * 2;
    int32_t *start = PyMem_Realloc(t->start, (size_t)cap * sizeof(int32_t));
    if (start != NULL)
        t->start = start;
    int32_t *len = PyMem_Realloc(t->len, (size_t)cap * sizeof(int32_t));
    if (len != NULL)
        t->len = len;
    int32_t *last = PyMem_Realloc(t->last_rec, (size_t)cap * sizeof(int32_t));
    if (last != NULL)
        t->last_rec = last;
    if (slots == NULL || start == NULL || len == NULL || last == NULL) {
        PyMem_Free(slots);
        return -1;
    }
    t->cap = cap;
    for (int32_t id = 0; id < t->count; id++) {
        Py_ssize_t at = span_hash(t->data + t->start[id], t->len[id]) & (size - 1);
        while (slots[at])
            at = (at + 1) & (size - 1);
        slots[at] = id + 1;
    }
    PyMem_Free(t->slots);
    t->slots = slots;
    t->mask = size - 1;
    return 0;
}

/* The id of the key data[start, start + len), added when new; -1 when out of memory. */
static int32_t table_id(key_table *t, int32_t start, int32_t len) {
    const unsigned char *key = t->data + start;
    Py_ssize_t at = span_hash(key, len) & t->mask;
    while (t->slots[at]) {
        int32_t id = t->slots[at] - 1;
        if (t->len[id] == len && memcmp(t->data + t->start[id], key, (size_t)len) == 0)
            return id;
        at = (at + 1) & t->mask;
    }
    if (t->count == t->cap || (t->count + 1) * 2 > t->mask + 1) {
        if (table_grow(t) < 0)
            return -1;
        return table_id(t, start, len);
    }
    int32_t id = t->count++;
    t->start[id] = start;
    t->len[id] = len;
    t->last_rec[id] = -1;
    t->slots[at] = id + 1;
    return id;
}

/* split_properties(offsets, data) -> (rec, key_ids, names, key_offsets, key_data,
   value_offsets, value_data) or None: the properties blobs of an Arrow binary array (int32
   offsets, n + 1 of them, and its data) split as record_columns does in numpy: pairs end
   with 0x02, key and value split at the first 0x01, pairs with an empty key or value
   dropped. rec and key_ids are native int32 per kept pair (ids index names, the distinct
   keys as bytes in first-seen order); keys and values are copied back to back with int32
   Arrow offsets. None when a record holds a key twice. */
static PyObject *split_properties(PyObject *self, PyObject *args) {
    Py_buffer ob, db;
    PyObject *out = NULL, *rec_b = NULL, *kid_b = NULL, *koff_b = NULL, *kdat_b = NULL,
             *voff_b = NULL, *vdat_b = NULL, *names = NULL;
    key_table t = {0};
    if (!PyArg_ParseTuple(args, "y*y*", &ob, &db))
        return NULL;
    const unsigned char *d = db.buf;
    const int32_t *offs = ob.buf;
    Py_ssize_t n = ob.len / 4 - 1;
    if (n < 0 || offs[0] < 0 || offs[n] > db.len) {
        PyErr_SetString(PyExc_ValueError, "offsets outside the data");
        goto done;
    }
    Py_ssize_t pairs = 0;
    for (Py_ssize_t i = offs[0]; i < offs[n]; i++)
        pairs += d[i] == 2;
    Py_ssize_t bytes = offs[n] - offs[0];
    rec_b = PyBytes_FromStringAndSize(NULL, pairs * 4);
    kid_b = PyBytes_FromStringAndSize(NULL, pairs * 4);
    koff_b = PyBytes_FromStringAndSize(NULL, (pairs + 1) * 4);
    voff_b = PyBytes_FromStringAndSize(NULL, (pairs + 1) * 4);
    kdat_b = PyBytes_FromStringAndSize(NULL, bytes);
    vdat_b = PyBytes_FromStringAndSize(NULL, bytes);
    t.data = d;
    t.mask = 15;
    t.cap = 8;
    t.slots = PyMem_Calloc(16, sizeof(int32_t));
    t.start = PyMem_Malloc(8 * sizeof(int32_t));
    t.len = PyMem_Malloc(8 * sizeof(int32_t));
    t.last_rec = PyMem_Malloc(8 * sizeof(int32_t));
    if (!rec_b || !kid_b || !koff_b || !voff_b || !kdat_b || !vdat_b || !t.slots || !t.start
        || !t.len || !t.last_rec) {
        PyErr_NoMemory();
        goto done;
    }
    int32_t *rec = (int32_t *)PyBytes_AS_STRING(rec_b), *kid = (int32_t *)PyBytes_AS_STRING(kid_b);
    int32_t *koff = (int32_t *)PyBytes_AS_STRING(koff_b), *voff = (int32_t *)PyBytes_AS_STRING(voff_b);
    char *kdat = PyBytes_AS_STRING(kdat_b), *vdat = PyBytes_AS_STRING(vdat_b);
    Py_ssize_t kept = 0;
    int32_t kat = 0, vat = 0;
    for (Py_ssize_t r = 0; r < n; r++) {
        int32_t p = offs[r], e = offs[r + 1];
        while (p < e) {
            const unsigned char *end = memchr(d + p, 2, (size_t)(e - p));
            if (end == NULL)
                break;
            int32_t q = (int32_t)(end - d);
            const unsigned char *sep = memchr(d + p, 1, (size_t)(q - p));
            if (sep != NULL && sep - d > p && sep - d < q - 1) {
                int32_t s = (int32_t)(sep - d);
                int32_t id = table_id(&t, p, s - p);
                if (id < 0) {
                    PyErr_NoMemory();
                    goto done;
                }
                if (t.last_rec[id] == r) { /* a key given twice: the per-message decoder */
                    out = Py_NewRef(Py_None);
                    goto done;
                }
                t.last_rec[id] = (int32_t)r;
                rec[kept] = (int32_t)r;
                kid[kept] = id;
                koff[kept] = kat;
                voff[kept] = vat;
                memcpy(kdat + kat, d + p, (size_t)(s - p));
                kat += s - p;
                memcpy(vdat + vat, d + s + 1, (size_t)(q - s - 1));
                vat += q - s - 1;
                kept++;
            }
            p = q + 1;
        }
    }
    koff[kept] = kat;
    voff[kept] = vat;
    names = PyList_New(t.count);
    if (names == NULL)
        goto done;
    for (int32_t id = 0; id < t.count; id++) {
        PyObject *name = PyBytes_FromStringAndSize((const char *)d + t.start[id], t.len[id]);
        if (name == NULL)
            goto done;
        PyList_SET_ITEM(names, id, name);
    }
    if (_PyBytes_Resize(&rec_b, kept * 4) < 0 || _PyBytes_Resize(&kid_b, kept * 4) < 0
        || _PyBytes_Resize(&koff_b, (kept + 1) * 4) < 0
        || _PyBytes_Resize(&voff_b, (kept + 1) * 4) < 0 || _PyBytes_Resize(&kdat_b, kat) < 0
        || _PyBytes_Resize(&vdat_b, vat) < 0)
        goto done;
    out = PyTuple_Pack(7, rec_b, kid_b, names, koff_b, kdat_b, voff_b, vdat_b);
done:
    Py_XDECREF(rec_b);
    Py_XDECREF(kid_b);
    Py_XDECREF(koff_b);
    Py_XDECREF(kdat_b);
    Py_XDECREF(voff_b);
    Py_XDECREF(vdat_b);
    Py_XDECREF(names);
    PyMem_Free(t.slots);
    PyMem_Free(t.start);
    PyMem_Free(t.len);
    PyMem_Free(t.last_rec);
    PyBuffer_Release(&ob);
    PyBuffer_Release(&db);
    return out;
}

static PyMethodDef methods[] = {
    {"walk_records", walk_records, METH_VARARGS,
     "Record starts found by following TOTALSIZE prefixes."},
    {"scan_runs", scan_runs, METH_VARARGS, "Scan fast-path CommitLog records into runs."},
    {"check_index_entries", check_index_entries, METH_VARARGS,
     "The entry loop of the index check of verify."},
    {"java_hash", java_hash, METH_O, "Java's String.hashCode() of a str."},
    {"classify_records", classify_records, METH_VARARGS,
     "Header fields of records and whether the columnar decoder takes each."},
    {"gather_spans", gather_spans, METH_VARARGS,
     "Byte spans of a buffer copied back to back, with Arrow binary offsets."},
    {"split_properties", split_properties, METH_VARARGS,
     "Properties blobs split into keys and values, as the columnar decoder does."},
    {"select_entries", select_entries, METH_VARARGS,
     "The entry loop of MessageStore.get_message within one CommitLog segment."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastscan", NULL, -1, methods};

PyMODINIT_FUNC PyInit__fastscan(void) {
    crc_init();
    return PyModule_Create(&module);
}
