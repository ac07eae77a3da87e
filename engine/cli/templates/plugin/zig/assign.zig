
/// Divided bindings: every replica goes to the clusters labelled `label`, split evenly (the first
/// take the remainder). Skips (the built-in assigners decide) for Duplicated bindings and when no
/// selected cluster is labelled.
export fn flotilla_assign_v1(json: [*]const u8, len: usize, rows: [*]const u8, n: usize) i32 {
    const req = parse(json, len) orelse return fail("assign: malformed JSON");
    defer req.deinit();
    const kind = str(get(get(get(req.value, "placement"), "replicaScheduling"), "replicaSchedulingType")) orelse "";
    const replicas: i64 = if (get(req.value, "replicas")) |r| (if (r == .integer) r.integer else 0) else 0;
    var picked: i64 = 0;
    for (0..n) |i| {
        const c = cluster(detailIndex(rows, i)) orelse return fail("row refers to a cluster outside the set");
        if (labelled[c]) picked += 1;
    }
    if (!std.mem.eql(u8, kind, "Divided") or picked == 0) {
        const skip = "\"skip\"";
        set_result(skip.ptr, skip.len);
        return 0;
    }
    var out: std.ArrayList(u8) = .empty;
    out.appendSlice(gpa, "{\"assigned\":[") catch return fail("out of memory");
    var k: i64 = 0;
    for (0..n) |i| {
        if (!labelled[detailIndex(rows, i)]) continue;
        if (k > 0) out.append(gpa, ',') catch return fail("out of memory");
        const r = @divTrunc(replicas, picked) + @as(i64, if (k < @rem(replicas, picked)) 1 else 0);
        out.print(gpa, "[{d},{d}]", .{ i, r }) catch return fail("out of memory");
        k += 1;
    }
    out.appendSlice(gpa, "]}") catch return fail("out of memory");
    return send(&out);
}
