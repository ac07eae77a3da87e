
/* InterpretReplica: the object's replicas are its label `label` when that holds a number, else
 * spec.replicas, else 1. Other operations are not implemented (the customization routes only
 * replicaResource here). */
FLOTILLA_INTERPRET(json, len) {
    fl_span req = fl_json(json, len), object = fl_json_get(req, "object");
    if (!fl_json_str_eq(fl_json_get(req, "operation"), "InterpretReplica"))
        return fl_error("operation not implemented (only InterpretReplica)");
    int64_t replicas = 1, v;
    fl_span r = fl_json_get(fl_json_get(object, "spec"), "replicas");
    if (r.n && fl_json_int(r, &v) == 0) replicas = v;
    static char text[32];
    fl_span l = fl_json_get(fl_json_get(fl_json_get(object, "metadata"), "labels"), label);
    int32_t k = l.n ? fl_json_string(l, text, sizeof text) : -1;
    if (k > 0 && fl_json_int((fl_span){text, (uint32_t)k}, &v) == 0) replicas = v;
    fl_buf b = {0};
    fl_buf_cstr(&b, "{\"replicas\":");
    fl_buf_int(&b, replicas);
    fl_buf_cstr(&b, "}");
    return fl_buf_send(&b);
}
