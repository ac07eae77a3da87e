/* c-shard-interpreter: a Flotilla resource interpreter in C for a `Shard` CRD (example.com/v1),
 * served by flotilla_interpret_v1 (sdk/ABI.md §10).
 *
 *   InterpretReplica: {"replicas": spec.replicas}, 1 when unset;
 *   InterpretHealth:  {"healthy": status.observedGeneration >= metadata.generation
 *                                 && status.readyReplicas >= spec.replicas}.
 * Other operations return an error (the customization does not route them here).
 */
#include "flotilla.h"

FLOTILLA_PLUGIN("c-shard-interpreter", "0.1.0", "interpret");

/* The cluster set is never used by an interpreter, but the export is required. */
FLOTILLA_CLUSTERS(json, len) {
    (void)json, (void)len;
    return FL_OK;
}

/* An integer at `a.b` of `obj`, or `dflt` when absent or not an integer. */
static int64_t field(fl_span obj, const char *a, const char *b, int64_t dflt) {
    int64_t v;
    return fl_json_int(fl_json_get(fl_json_get(obj, a), b), &v) == 0 ? v : dflt;
}

FLOTILLA_INTERPRET(json, len) {
    fl_span req = fl_json(json, len);
    fl_span op = fl_json_get(req, "operation");
    fl_buf b = {0};
    if (fl_json_str_eq(op, "InterpretReplica")) {
        fl_span object = fl_json_get(req, "object");
        fl_buf_cstr(&b, "{\"replicas\":");
        fl_buf_int(&b, field(object, "spec", "replicas", 1));
        fl_buf_cstr(&b, "}");
        return fl_buf_send(&b);
    }
    if (fl_json_str_eq(op, "InterpretHealth")) {
        fl_span observed = fl_json_get(req, "observedObject");
        int healthy = field(observed, "status", "observedGeneration", 0) >= field(observed, "metadata", "generation", 0) &&
                      field(observed, "status", "readyReplicas", 0) >= field(observed, "spec", "replicas", 1);
        fl_buf_cstr(&b, healthy ? "{\"healthy\":true}" : "{\"healthy\":false}");
        return fl_buf_send(&b);
    }
    return fl_error("operation not implemented by c-shard-interpreter");
}
