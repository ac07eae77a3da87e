
/* Clusters labelled `label` do not fit; every other cluster does. */
FLOTILLA_FILTER(json, len, rows, n) {
    (void)json, (void)len;
    uint8_t *verdicts = fl_alloc(n ? n : 1);
    if (!verdicts) return fl_error("out of memory");
    int any = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (rows[i] >= nclusters) { fl_free(verdicts); return fl_error("row refers to a cluster outside the set"); }
        verdicts[i] = labelled[rows[i]]; /* 0 = fit, 1 = reasons[0] */
        any |= verdicts[i];
    }
    fl_set_rows(verdicts, n);
    fl_free(verdicts);
    if (!any) return FL_OK;
    static char reason[300];
    static const char prefix[] = "cluster(s) had label ";
    uint32_t k = sizeof prefix - 1, m = fl_strlen(label);
    memcpy(reason, prefix, k);
    memcpy(reason + k, label, m + 1);
    fl_buf b = {0};
    fl_buf_cstr(&b, "{\"reasons\":[");
    fl_buf_str(&b, reason);
    fl_buf_cstr(&b, "]}");
    return fl_buf_send(&b);
}
