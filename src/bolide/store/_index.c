/* Compiled twin of IndexService.build over a stretch of CommitLog records (see
 * bolide/store/index_service.py, build_records): each record's UNIQ_KEY and KEYS go into
 * the current IndexFile exactly as IndexFile.put writes them, with the GIL released. A record
 * it does not take (not v1, a BLANK, damage, non-ASCII topic or keys, too many keys) ends the
 * call: the Python path indexes it, then calls again. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_native.h"

#define HEADER 40
#define ENTRY 20
#define MAX_KEYS 64
#define PAGE 4096

enum { STOP_END = 0, STOP_PYTHON = 1, STOP_FULL = 2, STOP_ALLOCATE = 3 };

typedef struct {
    int64_t begin_ts, end_ts, begin_phy, end_phy;
    int32_t slot_count, index_count;
} IndexState;

typedef struct {
    const unsigned char *start;
    Py_ssize_t len;
} Key;

static int ascii(const unsigned char *p, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++)
        if (p[i] >= 0x80)
            return 0;
    return 1;
}

/* abs(("topic#key").hashCode()) as index_key_hash computes it */
static uint32_t key_hash(uint32_t topic_hash, const Key *k) {
    uint32_t h = topic_hash * 31 + '#';
    for (Py_ssize_t i = 0; i < k->len; i++)
        h = h * 31 + k->start[i];
    int32_t s = (int32_t)h;
    return s == INT32_MIN ? 0 : (uint32_t)(s < 0 ? -s : s);
}

typedef struct {
    const unsigned char *log;
    Py_ssize_t end;
    unsigned char *idx;
    Py_ssize_t idx_len;
    const unsigned char *allocated;
    Py_ssize_t pages;
    long long entries_at, slot_num, index_num;
    Py_ssize_t max_records;
} Job;

static int page_ready(const Job *j, long long offset) {
    long long page = offset / PAGE;
    return page < j->pages && j->allocated[page];
}

/* Index records from *pos; returns why it stopped, *need_at for STOP_ALLOCATE. */
static int index_loop(const Job *j, Py_ssize_t *pos, IndexState *st, long long *last,
                      Py_ssize_t *records, long long *need_at) {
    while (*pos < j->end && *records < j->max_records) {
        const unsigned char *p = j->log + *pos;
        Py_ssize_t room = j->end - *pos;
        if (room < 8)
            return STOP_PYTHON;
        int32_t total = rd32(p);
        if (rd32(p + 4) != MAGIC_V1 || total < 91 || total > room)
            return STOP_PYTHON;
        int32_t sys_flag = rd32(p + 36);
        int bl = sys_flag & 0x10 ? 20 : 8, sl = sys_flag & 0x20 ? 20 : 8;
        Py_ssize_t body_at = 72 + bl + sl;
        if (body_at + 3 > total)
            return STOP_PYTHON;
        int32_t body_len = rd32(p + body_at - 4);
        if (body_len < 0 || body_at + body_len + 3 > total)
            return STOP_PYTHON;
        Py_ssize_t t = body_at + body_len;
        Py_ssize_t topic_len = p[t];
        if (t + 1 + topic_len + 2 > total)
            return STOP_PYTHON;
        const unsigned char *topic = p + t + 1;
        Py_ssize_t props_len = ((Py_ssize_t)p[t + 1 + topic_len] << 8) | p[t + 2 + topic_len];
        const unsigned char *props = p + t + 3 + topic_len;
        if (t + 3 + topic_len + props_len != total)
            return STOP_PYTHON;
        long long phys = rd64(p + 28);
        long long store_ts = rd64(p + 48 + bl);
        Key keys[MAX_KEYS];
        int nkeys = 0;
        Py_ssize_t vs, ve;
        if (phys > *last && (sys_flag & 0xC) != 0xC) {
            if (find_prop(props, props_len, "UNIQ_KEY", 8, &vs, &ve) && ve > vs) {
                keys[nkeys].start = props + vs;
                keys[nkeys++].len = ve - vs;
            }
            if (find_prop(props, props_len, "KEYS", 4, &vs, &ve)) {
                Py_ssize_t k = vs;
                while (k < ve) {
                    Py_ssize_t e = k;
                    while (e < ve && props[e] != ' ')
                        e++;
                    if (e > k) {
                        if (nkeys == MAX_KEYS)
                            return STOP_PYTHON;
                        keys[nkeys].start = props + k;
                        keys[nkeys++].len = e - k;
                    }
                    k = e + 1;
                }
            }
        }
        if (nkeys) {
            if (!ascii(topic, topic_len))
                return STOP_PYTHON;
            for (int i = 0; i < nkeys; i++)
                if (!ascii(keys[i].start, keys[i].len))
                    return STOP_PYTHON;
            if (st->index_count + nkeys > j->index_num)
                return STOP_FULL;
            uint32_t th = 0;
            for (Py_ssize_t i = 0; i < topic_len; i++)
                th = th * 31 + topic[i];
            long long slots[MAX_KEYS];
            uint32_t hashes[MAX_KEYS];
            for (int i = 0; i < nkeys; i++) { /* every page before the first write */
                hashes[i] = key_hash(th, &keys[i]);
                slots[i] = HEADER + (long long)(hashes[i] % (uint32_t)j->slot_num) * 4;
                long long entry_at = j->entries_at + (long long)(st->index_count + i) * ENTRY;
                long long need[3] = {slots[i], entry_at, entry_at + ENTRY - 1};
                for (int n = 0; n < 3; n++)
                    if (!page_ready(j, need[n])) {
                        *need_at = need[n];
                        return STOP_ALLOCATE;
                    }
                if (entry_at + ENTRY > j->idx_len)
                    return STOP_PYTHON;
            }
            for (int i = 0; i < nkeys; i++) {
                int32_t count = st->index_count;
                int32_t slot_value = rd32(j->idx + slots[i]);
                if (slot_value <= 0 || slot_value >= count) /* only older entries are links */
                    slot_value = 0;
                long long diff = 0;
                if (st->begin_ts > 0) {
                    long long d = store_ts - st->begin_ts;
                    /* Python's floor division, then clamped to [0, 2^31 - 1] */
                    d = d >= 0 ? d / 1000 : -((-d + 999) / 1000);
                    diff = d < 0 ? 0 : d > INT32_MAX ? INT32_MAX : d;
                }
                if (count <= 1) {
                    st->begin_phy = phys;
                    st->begin_ts = store_ts;
                }
                if (slot_value == 0)
                    st->slot_count++;
                st->index_count = count + 1;
                st->end_phy = phys;
                st->end_ts = store_ts;
                unsigned char *e = j->idx + j->entries_at + (long long)count * ENTRY;
                wr32(e, hashes[i]); /* entry, slot, header: the order a crash may cut */
                wr64(e + 4, (uint64_t)phys);
                wr32(e + 12, (uint32_t)diff);
                wr32(e + 16, (uint32_t)slot_value);
                wr32(j->idx + slots[i], (uint32_t)count);
                wr64(j->idx, (uint64_t)st->begin_ts);
                wr64(j->idx + 8, (uint64_t)st->end_ts);
                wr64(j->idx + 16, (uint64_t)st->begin_phy);
                wr64(j->idx + 24, (uint64_t)st->end_phy);
                wr32(j->idx + 32, (uint32_t)st->slot_count);
                wr32(j->idx + 36, (uint32_t)st->index_count);
            }
            *last = phys;
        }
        *pos += total;
        (*records)++;
    }
    return STOP_END;
}

/* index_records(log, pos, end, index_view, allocated, entries_at, hash_slot_num,
 *               index_num, state, last_indexed, max_records)
 *   -> (pos, state, last_indexed, records, reason, need_at)
 * state: (begin_ts, end_ts, begin_phy, end_phy, hash_slot_count, index_count) of the file;
 * reason: 0 end or max_records reached, 1 the record at pos needs the Python path, 2 the
 * file is full before it, 3 the page holding need_at must be allocated first. */
static PyObject *index_records(PyObject *self, PyObject *args) {
    Py_buffer log, idx, alloc;
    Py_ssize_t pos, end, max_records;
    long long last;
    Job j;
    IndexState st;
    if (!PyArg_ParseTuple(args, "y*nnw*y*LLL(LLLLii)Ln", &log, &pos, &end, &idx, &alloc,
                          &j.entries_at, &j.slot_num, &j.index_num, &st.begin_ts, &st.end_ts,
                          &st.begin_phy, &st.end_phy, &st.slot_count, &st.index_count, &last,
                          &max_records))
        return NULL;
    if (end > log.len)
        end = log.len;
    j.log = log.buf;
    j.end = end;
    j.idx = idx.buf;
    j.idx_len = idx.len;
    j.allocated = alloc.buf;
    j.pages = alloc.len;
    j.max_records = max_records;
    Py_ssize_t records = 0;
    long long need_at = -1;
    int reason = STOP_PYTHON;
    if (j.slot_num > 0 && j.entries_at >= HEADER && pos >= 0 && idx.len >= HEADER) {
        Py_BEGIN_ALLOW_THREADS
        reason = index_loop(&j, &pos, &st, &last, &records, &need_at);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&log);
    PyBuffer_Release(&idx);
    PyBuffer_Release(&alloc);
    return Py_BuildValue("(n(LLLLii)LniL)", pos, st.begin_ts, st.end_ts, st.begin_phy, st.end_phy,
                         st.slot_count, st.index_count, last, records, reason, need_at);
}

static PyMethodDef methods[] = {
    {"index_records", index_records, METH_VARARGS,
     "Index a stretch of CommitLog records into an IndexFile's mapping."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_index", NULL, -1, methods, NULL,
                                    NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__index(void) {
    return PyModule_Create(&module);
}
