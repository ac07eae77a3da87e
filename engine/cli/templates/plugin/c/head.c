/* __NAME__: a Flotilla __POINT__ plugin in C, on the vendored C SDK (flotilla.h, freestanding:
 * clang --target=wasm32-unknown-unknown, no libc). Build: ./build.sh. What it does and how to
 * test and load it: README.md. */
#include "flotilla.h"

FLOTILLA_PLUGIN("__NAME__", "0.1.0", "__CAPABILITY__");

/* The cluster label this plugin looks at; the profile's config.label overrides it. */
static char label[256] = "__LABEL__";
static uint8_t *labelled; /* per cluster index of the current set: 1 if it carries the label */
static uint32_t nclusters;

FLOTILLA_INIT(json, len) {
    fl_span l = fl_json_get(fl_json_get(fl_json(json, len), "config"), "label");
    if (l.n && !(l.n == 4 && !memcmp(l.p, "null", 4)) && fl_json_string(l, label, sizeof label) <= 0)
        return fl_error("config: \"label\" must be a non-empty string (at most 255 bytes)");
    return FL_OK;
}

/* Once per cluster set: which clusters carry the label (calls then only look it up). */
FLOTILLA_CLUSTERS(json, len) {
    fl_span clusters = fl_json_get(fl_json(json, len), "clusters"), it = {0}, c;
    uint32_t n = 0;
    while (fl_json_next(clusters, &it, &c)) n++;
    fl_free(labelled);
    labelled = fl_alloc(n ? n : 1);
    if (!labelled) return fl_error("out of memory");
    nclusters = n;
    it = (fl_span){0};
    for (uint32_t i = 0; fl_json_next(clusters, &it, &c); i++)
        labelled[i] = fl_json_get(fl_json_get(fl_json_get(c, "metadata"), "labels"), label).n != 0;
    return FL_OK;
}
