
/// InterpretReplica: the object's replicas are its label `label` when that holds a number, else
/// spec.replicas, else 1. Other operations are not implemented (the customization routes only
/// replicaResource here).
export fn flotilla_interpret_v1(json: [*]const u8, len: usize, rows: [*]const u8, n: usize) i32 {
    _ = rows;
    _ = n;
    const req = parse(json, len) orelse return fail("interpret: malformed JSON");
    defer req.deinit();
    const op = str(get(req.value, "operation")) orelse "";
    if (!std.mem.eql(u8, op, "InterpretReplica")) return fail("operation not implemented (only InterpretReplica)");
    const object = get(req.value, "object");
    var replicas: i64 = 1;
    if (get(get(object, "spec"), "replicas")) |r| {
        if (r == .integer) replicas = r.integer;
    }
    if (str(get(get(get(object, "metadata"), "labels"), label))) |v| {
        replicas = std.fmt.parseInt(i64, v, 10) catch replicas;
    }
    var out: std.ArrayList(u8) = .empty;
    out.print(gpa, "{{\"replicas\":{d}}}", .{replicas}) catch return fail("out of memory");
    return send(&out);
}
