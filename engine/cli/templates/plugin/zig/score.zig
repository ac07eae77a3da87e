
/// 100 for clusters labelled `label`, 0 for the others (0..100; the profile's weight multiplies).
export fn flotilla_score_v1(json: [*]const u8, len: usize, rows: [*]const u8, n: usize) i32 {
    _ = json;
    _ = len;
    const scores = gpa.alloc(u8, 8 * n) catch return fail("out of memory");
    defer gpa.free(scores);
    for (0..n) |i| {
        const c = cluster(std.mem.readInt(u32, rows[4 * i ..][0..4], .little)) orelse return fail("row refers to a cluster outside the set");
        std.mem.writeInt(i64, scores[8 * i ..][0..8], if (labelled[c]) 100 else 0, .little);
    }
    set_rows(scores.ptr, scores.len);
    return 0;
}
