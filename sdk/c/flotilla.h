/* flotilla.h: the C SDK for Flotilla plugins (plugin ABI v1, see sdk/ABI.md). Single header,
 * freestanding (no libc), for one translation unit per plugin:
 *
 *   clang --target=wasm32-unknown-unknown -O2 -nostdlib -Wl,--no-entry -Wl,--export-dynamic \
 *         -I sdk/c -o plugin.wasm plugin.c
 *
 * It provides
 *   - the required exports: flotilla_abi_version, flotilla_alloc, flotilla_dealloc (a small
 *     first-fit allocator over linear memory; fl_alloc/fl_free for your own use), and
 *     memcpy/memset/memmove/memcmp, which clang may emit calls to;
 *   - the host imports: fl_log, fl_set_result, fl_set_rows (+ fl_set_result_str, fl_error);
 *   - one macro per export, so a plugin "registers" an extension point by defining it:
 *       FLOTILLA_INIT(json, len)            { ... return FL_OK; }   (optional)
 *       FLOTILLA_CLUSTERS(json, len)        { ... }                  (required)
 *       FLOTILLA_FILTER(json, len, rows, n) { ... }  rows: n x uint32_t cluster index
 *       FLOTILLA_SCORE(json, len, rows, n)  { ... }  reply: n x int64_t via fl_set_rows
 *       FLOTILLA_SELECT / FLOTILLA_ASSIGN(json, len, rows, n)  rows: n x fl_detail_row
 *       FLOTILLA_OVERRIDE(json, len)        { ... }  reply: {"patch":[...]} via fl_set_result
 *       FLOTILLA_INTERPRET(json, len)       { ... }  resource interpreter (ABI.md §10): request
 *                                          {"operation": ..., "object": ...}, reply e.g.
 *                                          {"replicas": 3} or {"healthy": true} via fl_set_result
 *   - FLOTILLA_PLUGIN(name, version, capabilities...): the optional flotilla.plugin metadata
 *     custom section;
 *   - a JSON reader over spans (no allocation): fl_json_get, fl_json_next, fl_json_str_eq,
 *     fl_json_string, fl_json_int; and a JSON writer into a growable buffer (fl_buf_*).
 *
 * Input buffers belong to the host: copy what you need before returning.
 */
#ifndef FLOTILLA_H
#define FLOTILLA_H

#include <stddef.h>
#include <stdint.h>

#define FL_ABI_VERSION 1
#define FL_OK 0
#define FL_ERROR 1
enum { FL_LOG_ERROR = 0, FL_LOG_WARN = 1, FL_LOG_INFO = 2, FL_LOG_DEBUG = 3 };

#define FL_IMPORT(name) __attribute__((import_module("flotilla:host/v1"), import_name(name)))
#define FL_EXPORT(name) __attribute__((export_name(name)))

FL_IMPORT("log") void fl_log_raw(int32_t level, const void *ptr, uint32_t len);
FL_IMPORT("set_result") void fl_set_result(const void *ptr, uint32_t len);
FL_IMPORT("set_rows") void fl_set_rows(const void *ptr, uint32_t len);

/* Select/assign row (32 bytes). */
typedef struct {
    uint32_t index;          /* cluster index in the pushed set */
    uint32_t overflow_order; /* 0 primary affinity, i+1 i-th overflow tier, 1000 none */
    int64_t score;           /* total weighted score */
    int64_t allocatable_replicas;
    int64_t available_replicas;
} fl_detail_row;

#define FLOTILLA_INIT(j, n) FL_EXPORT("flotilla_init_v1") int32_t flotilla_init_v1(const char *j, uint32_t n)
#define FLOTILLA_CLUSTERS(j, n) FL_EXPORT("flotilla_clusters_v1") int32_t flotilla_clusters_v1(const char *j, uint32_t n)
#define FLOTILLA_FILTER(j, n, r, c) \
    FL_EXPORT("flotilla_filter_v1") int32_t flotilla_filter_v1(const char *j, uint32_t n, const uint32_t *r, uint32_t c)
#define FLOTILLA_SCORE(j, n, r, c) \
    FL_EXPORT("flotilla_score_v1") int32_t flotilla_score_v1(const char *j, uint32_t n, const uint32_t *r, uint32_t c)
#define FLOTILLA_SELECT(j, n, r, c) \
    FL_EXPORT("flotilla_select_v1") int32_t flotilla_select_v1(const char *j, uint32_t n, const fl_detail_row *r, uint32_t c)
#define FLOTILLA_ASSIGN(j, n, r, c) \
    FL_EXPORT("flotilla_assign_v1") int32_t flotilla_assign_v1(const char *j, uint32_t n, const fl_detail_row *r, uint32_t c)
#define FLOTILLA_OVERRIDE(j, n) \
    FL_EXPORT("flotilla_override_v1") int32_t flotilla_override_v1(const char *j, uint32_t n, const void *_r, uint32_t _c)
#define FLOTILLA_INTERPRET(j, n) \
    FL_EXPORT("flotilla_interpret_v1") int32_t flotilla_interpret_v1(const char *j, uint32_t n, const void *_r, uint32_t _c)

/* ---- the optional flotilla.plugin custom section (sdk/ABI.md §1) --------------------------
 * At file scope, once per module:
 *   FLOTILLA_PLUGIN("c-label-filter", "0.1.0", "filter", "log");
 * emits the metadata JSON {"abi":1,"name":...,"version":...,"capabilities":[...]} that
 * `flotilla plugin inspect` prints and the host checks at load. Capabilities (1 to 7): the
 * extension points ("filter", "score", "select", "assign", "override") and imports ("log", "wasi")
 * the module uses. Arguments are string literals without quotes or backslashes. clang's wasm backend turns
 * the assembler section ".custom_section.NAME" into the custom section NAME (a C global with
 * __attribute__((section(...))) becomes a data segment instead, which the linker drops). */
#define FL__Q(x) "\\\"" x "\\\""
#define FL__CAPS1(a) FL__Q(a)
#define FL__CAPS2(a, ...) FL__Q(a) "," FL__CAPS1(__VA_ARGS__)
#define FL__CAPS3(a, ...) FL__Q(a) "," FL__CAPS2(__VA_ARGS__)
#define FL__CAPS4(a, ...) FL__Q(a) "," FL__CAPS3(__VA_ARGS__)
#define FL__CAPS5(a, ...) FL__Q(a) "," FL__CAPS4(__VA_ARGS__)
#define FL__CAPS6(a, ...) FL__Q(a) "," FL__CAPS5(__VA_ARGS__)
#define FL__CAPS7(a, ...) FL__Q(a) "," FL__CAPS6(__VA_ARGS__)
#define FL__NARG(...) FL__NARG_(__VA_ARGS__, 7, 6, 5, 4, 3, 2, 1, 0)
#define FL__NARG_(a, b, c, d, e, f, g, n, ...) n
#define FL__CAT(a, b) FL__CAT_(a, b)
#define FL__CAT_(a, b) a##b
#define FLOTILLA_PLUGIN(name, version, ...)                                                           \
    __asm__(".section .custom_section.flotilla.plugin,\"\",@\n"                                      \
            ".ascii \"{\\\"abi\\\":1,\\\"name\\\":" FL__Q(name) ",\\\"version\\\":" FL__Q(version) \
            ",\\\"capabilities\\\":[" FL__CAT(FL__CAPS, FL__NARG(__VA_ARGS__))(__VA_ARGS__) "]}\"\n"     \
            ".text\n")

/* ---- libc bits clang may call ------------------------------------------------------------ */
#define FL_STATIC static __attribute__((unused))
#define FL_NOBUILTIN __attribute__((no_builtin))
FL_NOBUILTIN void *memset(void *d, int c, size_t n) {
    unsigned char *p = d;
    while (n--) *p++ = (unsigned char)c;
    return d;
}
FL_NOBUILTIN void *memcpy(void *restrict d, const void *restrict s, size_t n) {
    unsigned char *p = d;
    const unsigned char *q = s;
    while (n--) *p++ = *q++;
    return d;
}
FL_NOBUILTIN void *memmove(void *d, const void *s, size_t n) {
    unsigned char *p = d;
    const unsigned char *q = s;
    if (p < q) { while (n--) *p++ = *q++; }
    else { p += n; q += n; while (n--) *--p = *--q; }
    return d;
}
FL_NOBUILTIN int memcmp(const void *a, const void *b, size_t n) {
    const unsigned char *p = a, *q = b;
    for (; n; n--, p++, q++) if (*p != *q) return *p - *q;
    return 0;
}
FL_STATIC uint32_t fl_strlen(const char *s) { uint32_t n = 0; while (s[n]) n++; return n; }

/* ---- allocator: 8-byte header (block size), first-fit free list, bump for the rest -------- */
extern unsigned char __heap_base;
FL_STATIC uintptr_t fl__heap = (uintptr_t)&__heap_base;
typedef struct fl__block { uint32_t size, _pad; struct fl__block *next; } fl__block;
FL_STATIC fl__block *fl__free;

FL_STATIC void *fl_alloc(uint32_t len) {
    uint32_t size = (len + 15) & ~7u; /* payload rounded up, at least 8 bytes for the list link */
    for (fl__block **b = &fl__free; *b; b = &(*b)->next)
        if ((*b)->size >= size && (*b)->size <= 2 * size + 64) {
            fl__block *hit = *b;
            *b = hit->next;
            return (char *)hit + 8;
        }
    uintptr_t p = (fl__heap + 7) & ~(uintptr_t)7, end = p + 8 + size;
    uintptr_t have = __builtin_wasm_memory_size(0) * 65536;
    if (end > have && __builtin_wasm_memory_grow(0, (end - have + 65535) / 65536) == (size_t)-1) return 0;
    fl__heap = end;
    ((fl__block *)p)->size = size;
    return (void *)(p + 8);
}
FL_STATIC void fl_free(void *ptr) {
    if (!ptr) return;
    fl__block *b = (fl__block *)((char *)ptr - 8);
    b->next = fl__free;
    fl__free = b;
}

FL_EXPORT("flotilla_abi_version") int32_t flotilla_abi_version(void) { return FL_ABI_VERSION; }
FL_EXPORT("flotilla_alloc") void *flotilla_alloc(uint32_t len) { return fl_alloc(len); }
FL_EXPORT("flotilla_dealloc") void flotilla_dealloc(void *ptr, uint32_t len) { (void)len; fl_free(ptr); }

/* ---- replies --------------------------------------------------------------------------- */
FL_STATIC void fl_log(int32_t level, const char *msg) { fl_log_raw(level, msg, fl_strlen(msg)); }
FL_STATIC void fl_set_result_str(const char *s) { fl_set_result(s, fl_strlen(s)); }
/* Report an error: `return fl_error("bad config");` */
FL_STATIC int32_t fl_error(const char *msg) { fl_set_result_str(msg); return FL_ERROR; }

/* ---- JSON reader: values are spans into the input; nothing is copied ----------------------- */
typedef struct { const char *p; uint32_t n; } fl_span; /* n == 0: absent */

FL_STATIC const char *fl__ws(const char *p, const char *e) {
    while (p < e && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    return p;
}
/* End of the JSON value starting at p (after whitespace), or 0 if malformed. */
FL_STATIC const char *fl_json_skip(const char *p, const char *e) {
    p = fl__ws(p, e);
    if (p >= e) return 0;
    if (*p == '"') {
        for (p++; p < e; p++) {
            if (*p == '\\') p++;
            else if (*p == '"') return p + 1;
        }
        return 0;
    }
    if (*p == '{' || *p == '[') {
        int depth = 0;
        for (; p < e; p++) {
            if (*p == '"') { p = fl_json_skip(p, e); if (!p) return 0; p--; }
            else if (*p == '{' || *p == '[') depth++;
            else if ((*p == '}' || *p == ']') && --depth == 0) return p + 1;
        }
        return 0;
    }
    while (p < e && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\n' && *p != '\r' && *p != '\t') p++;
    return p;
}
FL_STATIC fl_span fl_json(const char *p, uint32_t n) {
    const char *e = p + n, *s = fl__ws(p, e), *end = fl_json_skip(s, e);
    return end ? (fl_span){s, (uint32_t)(end - s)} : (fl_span){0, 0};
}
/* Does the JSON string v (with quotes) decode to the n bytes at s? Handles the common escapes. */
FL_STATIC int fl_json_str_eqn(fl_span v, const char *s, uint32_t n) {
    if (v.n < 2 || v.p[0] != '"') return 0;
    const char *p = v.p + 1, *e = v.p + v.n - 1;
    uint32_t i = 0;
    while (p < e) {
        char c = *p++;
        if (c == '\\' && p < e) {
            c = *p++;
            c = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c == 'b' ? '\b' : c == 'f' ? '\f' : c;
            if (c == 'u') return 0; /* \u escapes: not compared */
        }
        if (i >= n || s[i++] != c) return 0;
    }
    return i == n;
}
FL_STATIC int fl_json_str_eq(fl_span v, const char *s) { return fl_json_str_eqn(v, s, fl_strlen(s)); }
/* Object member `key` of object v, or an absent span. */
FL_STATIC fl_span fl_json_get(fl_span v, const char *key) {
    const char *p = v.p, *e = v.p + v.n;
    if (!v.n || *p != '{') return (fl_span){0, 0};
    p++;
    for (;;) {
        p = fl__ws(p, e);
        if (p >= e || *p == '}') return (fl_span){0, 0};
        const char *k = p, *ke = fl_json_skip(p, e);
        if (!ke) return (fl_span){0, 0};
        p = fl__ws(ke, e);
        if (p >= e || *p != ':') return (fl_span){0, 0};
        const char *vs = fl__ws(p + 1, e), *ve = fl_json_skip(vs, e);
        if (!ve) return (fl_span){0, 0};
        if (fl_json_str_eq((fl_span){k, (uint32_t)(ke - k)}, key)) return (fl_span){vs, (uint32_t)(ve - vs)};
        p = fl__ws(ve, e);
        if (p < e && *p == ',') p++;
    }
}
/* Array iteration: `fl_span it = {0}, el; while (fl_json_next(arr, &it, &el)) ...` */
FL_STATIC int fl_json_next(fl_span arr, fl_span *it, fl_span *el) {
    const char *e = arr.p + arr.n, *p = it->p ? it->p : arr.p + 1;
    if (!arr.n || *arr.p != '[') return 0;
    p = fl__ws(p, e);
    if (p < e && *p == ',') p = fl__ws(p + 1, e);
    if (p >= e || *p == ']') return 0;
    const char *ve = fl_json_skip(p, e);
    if (!ve) return 0;
    *el = (fl_span){p, (uint32_t)(ve - p)};
    it->p = ve;
    it->n = 1;
    return 1;
}
/* Decode JSON string v into buf (NUL-terminated); returns its length or -1 (not a string or too
 * long). \u escapes other than ASCII are not supported (-1). */
FL_STATIC int32_t fl_json_string(fl_span v, char *buf, uint32_t cap) {
    if (v.n < 2 || v.p[0] != '"' || !cap) return -1;
    const char *p = v.p + 1, *e = v.p + v.n - 1;
    uint32_t i = 0;
    while (p < e) {
        char c = *p++;
        if (c == '\\' && p < e) {
            c = *p++;
            if (c == 'u') {
                uint32_t u = 0;
                for (int k = 0; k < 4 && p < e; k++, p++)
                    u = u * 16 + (uint32_t)(*p <= '9' ? *p - '0' : (*p | 32) - 'a' + 10);
                if (u > 127) return -1;
                c = (char)u;
            } else c = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c == 'b' ? '\b' : c == 'f' ? '\f' : c;
        }
        if (i + 1 >= cap) return -1;
        buf[i++] = c;
    }
    buf[i] = 0;
    return (int32_t)i;
}
/* Integer value of v (a JSON number without fraction); 0 on success. */
FL_STATIC int fl_json_int(fl_span v, int64_t *out) {
    const char *p = v.p, *e = v.p + v.n;
    int neg = 0;
    int64_t x = 0;
    if (p < e && *p == '-') neg = 1, p++;
    if (p >= e) return -1;
    for (; p < e; p++) {
        if (*p < '0' || *p > '9') return -1;
        x = x * 10 + (*p - '0');
    }
    *out = neg ? -x : x;
    return 0;
}

/* ---- JSON writer: a growable buffer (fl_alloc); check b.oom before sending ------------------ */
typedef struct { char *p; uint32_t n, cap; int oom; } fl_buf;
FL_STATIC void fl_buf_raw(fl_buf *b, const char *s, uint32_t n) {
    if (b->n + n > b->cap) {
        uint32_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n) cap *= 2;
        char *q = fl_alloc(cap);
        if (!q) { b->oom = 1; return; }
        if (b->p) { memcpy(q, b->p, b->n); fl_free(b->p); }
        b->p = q, b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}
FL_STATIC void fl_buf_cstr(fl_buf *b, const char *s) { fl_buf_raw(b, s, fl_strlen(s)); }
/* Append s (n bytes) as a quoted, escaped JSON string. */
FL_STATIC void fl_buf_strn(fl_buf *b, const char *s, uint32_t n) {
    static const char hex[] = "0123456789abcdef";
    fl_buf_raw(b, "\"", 1);
    for (uint32_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') { char q[2] = {'\\', (char)c}; fl_buf_raw(b, q, 2); }
        else if (c < 0x20) { char q[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]}; fl_buf_raw(b, q, 6); }
        else fl_buf_raw(b, (const char *)&c, 1);
    }
    fl_buf_raw(b, "\"", 1);
}
FL_STATIC void fl_buf_str(fl_buf *b, const char *s) { fl_buf_strn(b, s, fl_strlen(s)); }
FL_STATIC void fl_buf_int(fl_buf *b, int64_t v) {
    char t[24];
    int i = 24;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do t[--i] = (char)('0' + u % 10); while (u /= 10);
    if (v < 0) t[--i] = '-';
    fl_buf_raw(b, t + i, (uint32_t)(24 - i));
}
FL_STATIC void fl_buf_free(fl_buf *b) { fl_free(b->p); b->p = 0, b->n = b->cap = 0; }
/* Send the buffer with set_result and free it; FL_ERROR if it ran out of memory. */
FL_STATIC int32_t fl_buf_send(fl_buf *b) {
    if (b->oom) { fl_buf_free(b); return fl_error("out of memory"); }
    fl_set_result(b->p, b->n);
    fl_buf_free(b);
    return FL_OK;
}

#endif /* FLOTILLA_H */
