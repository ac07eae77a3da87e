//! __NAME__: a Flotilla __POINT__ plugin in Zig, on the plugin ABI directly (there is no Zig SDK:
//! the few exports and imports below are the whole contract, see the ABI reference linked from
//! README.md). Build: ./build.sh (zig build-exe -target wasm32-freestanding -fno-entry -rdynamic).
const std = @import("std");

const gpa = std.heap.wasm_allocator;

extern "flotilla:host/v1" fn set_result(ptr: [*]const u8, len: usize) void;
extern "flotilla:host/v1" fn set_rows(ptr: [*]const u8, len: usize) void;

/// The cluster label this plugin looks at; the profile's config.label overrides it.
var label: []const u8 = "__LABEL__";
/// Per cluster index of the current set: whether it carries the label, and its name.
var labelled: []bool = &.{};
var names: [][]u8 = &.{};

export fn flotilla_abi_version() i32 {
    return 1;
}

export fn flotilla_alloc(len: usize) ?[*]u8 {
    const s = gpa.alloc(u8, len) catch return null;
    return s.ptr;
}

export fn flotilla_dealloc(ptr: [*]u8, len: usize) void {
    gpa.free(ptr[0..len]);
}

/// Reports `msg` as the call's error.
fn fail(msg: []const u8) i32 {
    set_result(msg.ptr, msg.len);
    return 1;
}

fn parse(ptr: [*]const u8, len: usize) ?std.json.Parsed(std.json.Value) {
    return std.json.parseFromSlice(std.json.Value, gpa, ptr[0..len], .{}) catch null;
}

/// Member `key` of `v` when `v` is an object.
fn get(v: ?std.json.Value, key: []const u8) ?std.json.Value {
    const o = v orelse return null;
    return switch (o) {
        .object => |m| m.get(key),
        else => null,
    };
}

fn str(v: ?std.json.Value) ?[]const u8 {
    const s = v orelse return null;
    return switch (s) {
        .string => |x| x,
        else => null,
    };
}

export fn flotilla_init_v1(ptr: [*]const u8, len: usize) i32 {
    const req = parse(ptr, len) orelse return fail("init: malformed JSON");
    defer req.deinit();
    const l = get(get(req.value, "config"), "label") orelse return 0;
    if (l == .null) return 0;
    const s = str(l) orelse return fail("config: \"label\" must be a non-empty string");
    if (s.len == 0) return fail("config: \"label\" must be a non-empty string");
    label = gpa.dupe(u8, s) catch return fail("out of memory");
    return 0;
}

/// Once per cluster set: which clusters carry the label, and their names.
export fn flotilla_clusters_v1(ptr: [*]const u8, len: usize) i32 {
    const req = parse(ptr, len) orelse return fail("clusters: malformed JSON");
    defer req.deinit();
    const list = get(req.value, "clusters") orelse return fail("clusters: missing");
    if (list != .array) return fail("clusters: not an array");
    const items = list.array.items;
    for (names) |n| gpa.free(n);
    gpa.free(names);
    gpa.free(labelled);
    labelled = gpa.alloc(bool, items.len) catch return fail("out of memory");
    names = gpa.alloc([]u8, items.len) catch return fail("out of memory");
    for (items, 0..) |c, i| {
        const meta = get(c, "metadata");
        labelled[i] = get(get(meta, "labels"), label) != null;
        names[i] = gpa.dupe(u8, str(get(meta, "name")) orelse "") catch return fail("out of memory");
    }
    return 0;
}

/// Appends `s` to `out` as a JSON string (quoted, escaped).
fn quote(out: *std.ArrayList(u8), s: []const u8) !void {
    try out.append(gpa, '"');
    for (s) |c| {
        switch (c) {
            '"', '\\' => try out.appendSlice(gpa, &.{ '\\', c }),
            0...0x1f => try out.print(gpa, "\\u{x:0>4}", .{c}),
            else => try out.append(gpa, c),
        }
    }
    try out.append(gpa, '"');
}

fn send(out: *std.ArrayList(u8)) i32 {
    set_result(out.items.ptr, out.items.len);
    out.deinit(gpa);
    return 0;
}

/// The row's cluster index, checked against the set.
fn cluster(index: u32) ?usize {
    return if (index < labelled.len) index else null;
}

/// A select/assign row (32 bytes, little-endian): cluster index, overflow order, score,
/// allocatable and available replicas.
fn detailIndex(rows: [*]const u8, i: usize) u32 {
    return std.mem.readInt(u32, rows[32 * i ..][0..4], .little);
}
