
/* Labels the manifest sent to each cluster with `label: <cluster name>` (JSON Patch add; the
 * manifest's metadata.labels must exist, as it does in the scenario). */
FLOTILLA_OVERRIDE(json, len) {
    fl_span req = fl_json(json, len);
    fl_span labels = fl_json_get(fl_json_get(fl_json_get(req, "object"), "metadata"), "labels");
    if (!labels.n || labels.p[0] != '{') {
        fl_set_result_str("{\"patch\":[]}");
        return FL_OK;
    }
    static char name[256], path[600];
    if (fl_json_string(fl_json_get(fl_json_get(fl_json_get(req, "cluster"), "metadata"), "name"), name, sizeof name) < 0)
        return fl_error("cluster has no metadata.name");
    /* JSON Pointer: "~" is written "~0" and "/" is written "~1". */
    static const char prefix[] = "/metadata/labels/";
    uint32_t k = sizeof prefix - 1;
    memcpy(path, prefix, k);
    for (const char *s = label; *s && k + 3 < sizeof path; s++) {
        if (*s == '~') path[k++] = '~', path[k++] = '0';
        else if (*s == '/') path[k++] = '~', path[k++] = '1';
        else path[k++] = *s;
    }
    path[k] = 0;
    fl_buf b = {0};
    fl_buf_cstr(&b, "{\"patch\":[{\"op\":\"add\",\"path\":");
    fl_buf_str(&b, path);
    fl_buf_cstr(&b, ",\"value\":");
    fl_buf_str(&b, name);
    fl_buf_cstr(&b, "}]}");
    return fl_buf_send(&b);
}
