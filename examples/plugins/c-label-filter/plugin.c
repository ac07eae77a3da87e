/* c-label-filter: a Flotilla filter plugin in C. Keeps only clusters carrying a label (and, if
 * configured, with a given value).
 *
 * Config: {"label": "dedicated", "value": "ml"}; "value" is optional (then any value fits).
 * The verdict per cluster is computed once per cluster-set push, so a filter call is one table
 * lookup per row.
 */
#include "flotilla.h"

FLOTILLA_PLUGIN("c-label-filter", "0.1.0", "filter");

static char label[256], value[256], reason[600];
static int has_value;
static uint8_t *fits; /* per cluster index, current set */
static uint32_t nfits;

FLOTILLA_INIT(json, len) {
    fl_span config = fl_json_get(fl_json(json, len), "config");
    if (fl_json_string(fl_json_get(config, "label"), label, sizeof label) <= 0)
        return fl_error("config: \"label\" (a non-empty string) is required");
    fl_span v = fl_json_get(config, "value");
    has_value = v.n && !(v.n == 4 && !memcmp(v.p, "null", 4));
    if (has_value && fl_json_string(v, value, sizeof value) < 0) return fl_error("config: \"value\" must be a string");
    fl_buf b = {0};
    fl_buf_cstr(&b, "cluster(s) did not have label ");
    fl_buf_cstr(&b, label);
    if (has_value) { fl_buf_cstr(&b, "="); fl_buf_cstr(&b, value); }
    fl_buf_raw(&b, "", 1);
    if (b.oom || b.n > sizeof reason) return fl_error("config: label too long");
    memcpy(reason, b.p, b.n);
    fl_buf_free(&b);
    return FL_OK;
}

FLOTILLA_CLUSTERS(json, len) {
    fl_span clusters = fl_json_get(fl_json(json, len), "clusters"), it = {0}, c;
    uint32_t n = 0;
    while (fl_json_next(clusters, &it, &c)) n++;
    fl_free(fits);
    fits = fl_alloc(n ? n : 1);
    if (!fits) return fl_error("out of memory");
    nfits = n;
    it = (fl_span){0};
    for (uint32_t i = 0; fl_json_next(clusters, &it, &c); i++) {
        fl_span v = fl_json_get(fl_json_get(fl_json_get(c, "metadata"), "labels"), label);
        fits[i] = v.n && (!has_value || fl_json_str_eq(v, value));
    }
    return FL_OK;
}

FLOTILLA_FILTER(json, len, rows, n) {
    (void)json, (void)len;
    uint8_t *verdicts = fl_alloc(n ? n : 1);
    if (!verdicts) return fl_error("out of memory");
    int any = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (rows[i] >= nfits) { fl_free(verdicts); return fl_error("row refers to a cluster outside the set"); }
        verdicts[i] = fits[rows[i]] ? 0 : 1; /* 1 = reasons[0] */
        any |= verdicts[i];
    }
    fl_set_rows(verdicts, n);
    fl_free(verdicts);
    if (any) {
        fl_buf b = {0};
        fl_buf_cstr(&b, "{\"reasons\":[");
        fl_buf_str(&b, reason);
        fl_buf_cstr(&b, "]}");
        return fl_buf_send(&b);
    }
    return FL_OK;
}
