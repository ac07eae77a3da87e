
/// Labels the manifest sent to each cluster with `label: <cluster name>` (JSON Patch add; the
/// manifest's metadata.labels must exist, as it does in the scenario).
export fn flotilla_override_v1(json: [*]const u8, len: usize, rows: [*]const u8, n: usize) i32 {
    _ = rows;
    _ = n;
    const req = parse(json, len) orelse return fail("override: malformed JSON");
    defer req.deinit();
    var out: std.ArrayList(u8) = .empty;
    const labels = get(get(get(req.value, "object"), "metadata"), "labels");
    if (labels == null or labels.? != .object) {
        out.appendSlice(gpa, "{\"patch\":[]}") catch return fail("out of memory");
        return send(&out);
    }
    const name = str(get(get(get(req.value, "cluster"), "metadata"), "name")) orelse return fail("cluster has no metadata.name");
    // JSON Pointer: "~" is written "~0" and "/" is written "~1".
    var path: std.ArrayList(u8) = .empty;
    defer path.deinit(gpa);
    path.appendSlice(gpa, "/metadata/labels/") catch return fail("out of memory");
    for (label) |c| {
        switch (c) {
            '~' => path.appendSlice(gpa, "~0") catch return fail("out of memory"),
            '/' => path.appendSlice(gpa, "~1") catch return fail("out of memory"),
            else => path.append(gpa, c) catch return fail("out of memory"),
        }
    }
    out.appendSlice(gpa, "{\"patch\":[{\"op\":\"add\",\"path\":") catch return fail("out of memory");
    quote(&out, path.items) catch return fail("out of memory");
    out.appendSlice(gpa, ",\"value\":") catch return fail("out of memory");
    quote(&out, name) catch return fail("out of memory");
    out.appendSlice(gpa, "}]}") catch return fail("out of memory");
    return send(&out);
}
