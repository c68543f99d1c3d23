/* Helpers shared by the compiled store loops: big-endian fields and zlib's CRC-32. */
#ifndef BOLIDE_NATIVE_H
#define BOLIDE_NATIVE_H
#include <stdint.h>
#include <string.h>

#define MAGIC_V1 ((int32_t)0xDAA320A7)
#define MAGIC_V2 ((int32_t)0xDAA320AB)

static uint32_t crc_table[8][256] __attribute__((unused));

static inline void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = crc_table[0][i];
        for (int t = 1; t < 8; t++) {
            c = crc_table[0][c & 0xFF] ^ (c >> 8);
            crc_table[t][i] = c;
        }
    }
}

/* zlib's crc32 (slice-by-8, little-endian loads) */
static inline uint32_t crc32_of(const unsigned char *p, Py_ssize_t n) {
    uint32_t c = 0xFFFFFFFFu;
    while (n && ((uintptr_t)p & 7)) {
        c = crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
        n--;
    }
    while (n >= 8) {
        uint32_t a, b;
        memcpy(&a, p, 4);
        memcpy(&b, p + 4, 4);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        a = __builtin_bswap32(a);
        b = __builtin_bswap32(b);
#endif
        a ^= c;
        c = crc_table[7][a & 0xFF] ^ crc_table[6][(a >> 8) & 0xFF] ^
            crc_table[5][(a >> 16) & 0xFF] ^ crc_table[4][a >> 24] ^
            crc_table[3][b & 0xFF] ^ crc_table[2][(b >> 8) & 0xFF] ^
            crc_table[1][(b >> 16) & 0xFF] ^ crc_table[0][b >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

static inline int32_t rd32(const unsigned char *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}

static inline int64_t rd64(const unsigned char *p) {
    return (int64_t)(((uint64_t)(uint32_t)rd32(p) << 32) | (uint32_t)rd32(p + 4));
}

static inline void wr32(unsigned char *p, uint32_t v) {
    p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v;
}

static inline void wr64(unsigned char *p, uint64_t v) {
    wr32(p, (uint32_t)(v >> 32));
    wr32(p + 4, (uint32_t)v);
}

/* Find "key\x01" at a pair start of an encoded properties blob (where record.property_bytes
 * finds it); [*vs, *ve) is its value, up to the next 0x02. Returns 1 when found. */
static inline int find_prop(const unsigned char *p, Py_ssize_t n, const char *key, Py_ssize_t klen,
                             Py_ssize_t *vs, Py_ssize_t *ve) {
    Py_ssize_t i = 0;
    while (i + klen < n) {
        if ((i == 0 || p[i - 1] == 2) && memcmp(p + i, key, klen) == 0 && p[i + klen] == 1) {
            Py_ssize_t e = i + klen + 1;
            while (e < n && p[e] != 2)
                e++;
            *vs = i + klen + 1;
            *ve = e;
            return 1;
        }
        const unsigned char *nx = memchr(p + i, 2, n - i);
        if (nx == NULL)
            return 0;
        i = nx - p + 1;
    }
    return 0;
}

#endif
