
/* Divided bindings: every replica goes to the clusters labelled `label`, split evenly (the first
 * take the remainder). Skips (the built-in assigners decide) for Duplicated bindings and when no
 * selected cluster is labelled. */
FLOTILLA_ASSIGN(json, len, rows, n) {
    fl_span req = fl_json(json, len);
    fl_span type = fl_json_get(fl_json_get(fl_json_get(req, "placement"), "replicaScheduling"), "replicaSchedulingType");
    int64_t replicas = 0;
    fl_span r = fl_json_get(req, "replicas");
    if (r.n && fl_json_int(r, &replicas)) return fl_error("replicas is not an integer");
    uint32_t picked = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (rows[i].index >= nclusters) return fl_error("row refers to a cluster outside the set");
        picked += labelled[rows[i].index];
    }
    if (!fl_json_str_eq(type, "Divided") || !picked) {
        fl_set_result_str("\"skip\"");
        return FL_OK;
    }
    fl_buf b = {0};
    fl_buf_cstr(&b, "{\"assigned\":[");
    for (uint32_t i = 0, k = 0; i < n; i++) {
        if (!labelled[rows[i].index]) continue;
        if (k) fl_buf_cstr(&b, ",");
        fl_buf_cstr(&b, "[");
        fl_buf_int(&b, i);
        fl_buf_cstr(&b, ",");
        fl_buf_int(&b, replicas / picked + ((int64_t)k < replicas % picked ? 1 : 0));
        fl_buf_cstr(&b, "]");
        k++;
    }
    fl_buf_cstr(&b, "]}");
    return fl_buf_send(&b);
}
