// A small JSON reader and writer for plugins (no dependencies).

export const enum Kind { Null, Bool, Number, String, Array, Object }

/** A parsed JSON value. Object members keep their order. */
export class Value {
  kind: Kind = Kind.Null;
  bool: bool = false;
  num: f64 = 0;
  str: string = "";
  items: Array<Value> = [];
  keys: Array<string> = [];

  /** Member `key` of an object, or null. */
  get(key: string): Value | null {
    if (this.kind != Kind.Object) return null;
    for (let i = 0; i < this.keys.length; i++) if (this.keys[i] == key) return this.items[i];
    return null;
  }
  /** Follows object members, e.g. `v.path(["metadata", "labels"])`. */
  path(keys: Array<string>): Value | null {
    let v: Value | null = this;
    for (let i = 0; i < keys.length && v !== null; i++) v = v.get(keys[i]);
    return v;
  }
  /** String member `key`, or `fallback`. */
  getString(key: string, fallback: string = ""): string {
    const v = this.get(key);
    return v !== null && v.kind == Kind.String ? v.str : fallback;
  }
  isNull(): bool { return this.kind == Kind.Null; }
  /** Serializes back to JSON. */
  toJSON(): string {
    const w = new Writer();
    w.value(this);
    return w.toString();
  }
}

/** Parses `len` bytes of UTF-8 JSON at `ptr`; throws (an error status for the call) if malformed. */
export function parse(ptr: usize, len: usize): Value {
  const p = new Parser(ptr, ptr + len);
  const v = p.value();
  p.ws();
  if (p.p != p.end) throw new Error("JSON: trailing data");
  return v;
}

/** Parses a string. */
export function parseString(s: string): Value {
  const b = String.UTF8.encode(s);
  return parse(changetype<usize>(b), b.byteLength);
}

class Parser {
  constructor(public p: usize, public end: usize) {}
  ws(): void {
    while (this.p < this.end) {
      const c = load<u8>(this.p);
      if (c != 0x20 && c != 0x0a && c != 0x0d && c != 0x09) break;
      this.p++;
    }
  }
  peek(): u32 { return this.p < this.end ? <u32>load<u8>(this.p) : 0; }
  expect(c: u32): void {
    if (this.peek() != c) throw new Error("JSON: unexpected character");
    this.p++;
  }
  literal(word: string): void {
    for (let i = 0; i < word.length; i++) this.expect(<u32>word.charCodeAt(i));
  }
  value(): Value {
    this.ws();
    const v = new Value();
    const c = this.peek();
    if (c == 0x7b) { // {
      v.kind = Kind.Object;
      this.p++;
      this.ws();
      if (this.peek() == 0x7d) { this.p++; return v; }
      while (true) {
        this.ws();
        v.keys.push(this.string());
        this.ws();
        this.expect(0x3a);
        v.items.push(this.value());
        this.ws();
        if (this.peek() == 0x2c) { this.p++; continue; }
        this.expect(0x7d);
        return v;
      }
    } else if (c == 0x5b) { // [
      v.kind = Kind.Array;
      this.p++;
      this.ws();
      if (this.peek() == 0x5d) { this.p++; return v; }
      while (true) {
        v.items.push(this.value());
        this.ws();
        if (this.peek() == 0x2c) { this.p++; continue; }
        this.expect(0x5d);
        return v;
      }
    } else if (c == 0x22) {
      v.kind = Kind.String;
      v.str = this.string();
    } else if (c == 0x74) { this.literal("true"); v.kind = Kind.Bool; v.bool = true; }
    else if (c == 0x66) { this.literal("false"); v.kind = Kind.Bool; }
    else if (c == 0x6e) { this.literal("null"); }
    else {
      const start = this.p;
      while (this.p < this.end) {
        const d = load<u8>(this.p);
        if (!((d >= 0x30 && d <= 0x39) || d == 0x2d || d == 0x2b || d == 0x2e || d == 0x65 || d == 0x45)) break;
        this.p++;
      }
      if (this.p == start) throw new Error("JSON: unexpected character");
      v.kind = Kind.Number;
      v.num = parseFloat(String.UTF8.decodeUnsafe(start, this.p - start));
    }
    return v;
  }
  string(): string {
    this.expect(0x22);
    const start = this.p;
    let escaped = false;
    while (this.p < this.end) {
      const c = load<u8>(this.p);
      if (c == 0x22) break;
      if (c == 0x5c) { escaped = true; this.p++; }
      this.p++;
    }
    if (this.p >= this.end) throw new Error("JSON: unterminated string");
    const raw = String.UTF8.decodeUnsafe(start, this.p - start);
    this.p++;
    return escaped ? unescape(raw) : raw;
  }
}

function unescape(s: string): string {
  let out = "";
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c != 0x5c || i + 1 >= s.length) { out += String.fromCharCode(c); continue; }
    const e = s.charCodeAt(++i);
    if (e == 0x6e) out += "\n";
    else if (e == 0x74) out += "\t";
    else if (e == 0x72) out += "\r";
    else if (e == 0x62) out += "\b";
    else if (e == 0x66) out += "\f";
    else if (e == 0x75) { out += String.fromCharCode(<i32>parseInt(s.substr(i + 1, 4), 16)); i += 4; }
    else out += String.fromCharCode(e);
  }
  return out;
}

/** Quotes and escapes a string as JSON. */
export function quote(s: string): string {
  let out = "\"";
  let from = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c == 0x22 || c == 0x5c || c < 0x20) {
      out += s.substring(from, i);
      if (c == 0x22) out += "\\\"";
      else if (c == 0x5c) out += "\\\\";
      else if (c == 0x0a) out += "\\n";
      else out += "\\u00" + (c < 16 ? "0" : "") + c.toString(16);
      from = i + 1;
    }
  }
  return out + s.substring(from) + "\"";
}

/** Builds JSON text. */
export class Writer {
  private parts: Array<string> = [];
  raw(s: string): Writer { this.parts.push(s); return this; }
  string(s: string): Writer { this.parts.push(quote(s)); return this; }
  number(n: f64): Writer {
    this.parts.push(n == Math.floor(n) && Math.abs(n) < 9007199254740992 ? (<i64>n).toString() : n.toString());
    return this;
  }
  value(v: Value): Writer {
    if (v.kind == Kind.Null) this.raw("null");
    else if (v.kind == Kind.Bool) this.raw(v.bool ? "true" : "false");
    else if (v.kind == Kind.Number) this.number(v.num);
    else if (v.kind == Kind.String) this.string(v.str);
    else if (v.kind == Kind.Array) {
      this.raw("[");
      for (let i = 0; i < v.items.length; i++) { if (i) this.raw(","); this.value(v.items[i]); }
      this.raw("]");
    } else {
      this.raw("{");
      for (let i = 0; i < v.items.length; i++) {
        if (i) this.raw(",");
        this.string(v.keys[i]).raw(":").value(v.items[i]);
      }
      this.raw("}");
    }
    return this;
  }
  toString(): string { return this.parts.join(""); }
}
