
/// Keeps only the clusters labelled `label`, in the order given; when none is, keeps them all.
export fn flotilla_select_v1(json: [*]const u8, len: usize, rows: [*]const u8, n: usize) i32 {
    _ = json;
    _ = len;
    var any = false;
    for (0..n) |i| {
        const c = cluster(detailIndex(rows, i)) orelse return fail("row refers to a cluster outside the set");
        any = any or labelled[c];
    }
    var out: std.ArrayList(u8) = .empty;
    out.appendSlice(gpa, "{\"selected\":[") catch return fail("out of memory");
    var first = true;
    for (0..n) |i| {
        if (any and !labelled[detailIndex(rows, i)]) continue;
        if (!first) out.append(gpa, ',') catch return fail("out of memory");
        out.print(gpa, "{d}", .{i}) catch return fail("out of memory");
        first = false;
    }
    out.appendSlice(gpa, "]}") catch return fail("out of memory");
    return send(&out);
}
