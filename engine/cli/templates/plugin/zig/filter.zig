
/// Clusters labelled `label` do not fit; every other cluster does.
export fn flotilla_filter_v1(json: [*]const u8, len: usize, rows: [*]const u8, n: usize) i32 {
    _ = json;
    _ = len;
    const verdicts = gpa.alloc(u8, n) catch return fail("out of memory");
    defer gpa.free(verdicts);
    var any = false;
    for (0..n) |i| {
        const c = cluster(std.mem.readInt(u32, rows[4 * i ..][0..4], .little)) orelse return fail("row refers to a cluster outside the set");
        verdicts[i] = if (labelled[c]) 1 else 0; // 0 = fit, 1 = reasons[0]
        any = any or labelled[c];
    }
    set_rows(verdicts.ptr, n);
    if (!any) return 0;
    var out: std.ArrayList(u8) = .empty;
    out.appendSlice(gpa, "{\"reasons\":[") catch return fail("out of memory");
    const reason = std.mem.concat(gpa, u8, &.{ "cluster(s) had label ", label }) catch return fail("out of memory");
    defer gpa.free(reason);
    quote(&out, reason) catch return fail("out of memory");
    out.appendSlice(gpa, "]}") catch return fail("out of memory");
    return send(&out);
}
