
/* Keeps only the clusters labelled `label`, in the order given; when none is, keeps them all. */
FLOTILLA_SELECT(json, len, rows, n) {
    (void)json, (void)len;
    uint32_t any = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (rows[i].index >= nclusters) return fl_error("row refers to a cluster outside the set");
        any |= labelled[rows[i].index];
    }
    fl_buf b = {0};
    fl_buf_cstr(&b, "{\"selected\":[");
    for (uint32_t i = 0, first = 1; i < n; i++) {
        if (any && !labelled[rows[i].index]) continue;
        if (!first) fl_buf_cstr(&b, ",");
        fl_buf_int(&b, i);
        first = 0;
    }
    fl_buf_cstr(&b, "]}");
    return fl_buf_send(&b);
}
