
/* 100 for clusters labelled `label`, 0 for the others (0..100; the profile's weight multiplies). */
FLOTILLA_SCORE(json, len, rows, n) {
    (void)json, (void)len;
    int64_t *scores = fl_alloc(8 * (n ? n : 1));
    if (!scores) return fl_error("out of memory");
    for (uint32_t i = 0; i < n; i++) {
        if (rows[i] >= nclusters) { fl_free(scores); return fl_error("row refers to a cluster outside the set"); }
        scores[i] = labelled[rows[i]] ? 100 : 0;
    }
    fl_set_rows(scores, 8 * n);
    fl_free(scores);
    return FL_OK;
}
