//! Values across the Lua boundary, converted as Karmada converts them.
//!
//! Into Lua (`luavm.decodeValue` → `gopher-json.DecodeValue`): every JSON number becomes a double,
//! `null` becomes `nil` (so a `null` field is absent and a `null` array item is skipped), objects
//! and arrays become tables.
//!
//! Out of Lua (`gopher-json.Encode`, then `luavm.ConvertLuaResultInto`): a table whose first key is
//! a string is an object, one whose keys are `1..n` is an array, an empty table is `[]`; mixed or
//! sparse keys, functions, a table reached twice, NaN and infinities are errors. Integral doubles
//! become JSON integers, keys come out sorted (Go marshals maps sorted). Then
//! `convertEmptySliceToEmptyStructPartly`: a `[]` whose path (array indices left out) is `{}` in
//! one of the references (the arguments the script received) becomes `{}` again, a `[]` that is
//! `[]` there stays, any other `[]` is pruned; an all-empty result is `{}` when the target is a
//! struct.

use std::collections::HashSet;

use mlua::{Lua, Table, Value as LuaValue};
use serde_json::{Map, Number, Value};

/// Deepest nesting converted either way (the API's own decoders stop well before).
pub(crate) const MAX_DEPTH: usize = 256;

/// Why a value could not cross the boundary.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConvertError {
    /// Not representable in JSON (gopher-json's messages).
    #[error("encode lua result to json failed: {0}")]
    Encode(String),
    /// The result exceeds the output budget.
    #[error("result exceeds {limit} bytes of JSON")]
    TooLarge {
        /// The budget.
        limit: usize,
    },
    /// Nested deeper than [`MAX_DEPTH`].
    #[error("value nests deeper than {MAX_DEPTH} levels")]
    TooDeep,
    /// The Lua state failed (out of memory while building a table).
    #[error(transparent)]
    Lua(#[from] mlua::Error),
}

/// `value` as Lua sees it (`decodeValue` of the marshalled object).
pub(crate) fn to_lua(lua: &Lua, value: &Value) -> Result<LuaValue, ConvertError> {
    to_lua_at(lua, value, 0)
}

fn to_lua_at(lua: &Lua, value: &Value, depth: usize) -> Result<LuaValue, ConvertError> {
    if depth > MAX_DEPTH {
        return Err(ConvertError::TooDeep);
    }
    Ok(match value {
        Value::Null => LuaValue::Nil,
        Value::Bool(b) => LuaValue::Boolean(*b),
        Value::Number(n) => LuaValue::Number(n.as_f64().unwrap_or(0.0)),
        Value::String(s) => LuaValue::String(lua.create_string(s)?),
        Value::Array(items) => {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            // gopher-lua's Append ignores nil: null items close up.
            let mut i = 0;
            for item in items {
                let v = to_lua_at(lua, item, depth + 1)?;
                if !v.is_nil() {
                    i += 1;
                    t.raw_set(i, v)?;
                }
            }
            LuaValue::Table(t)
        }
        Value::Object(fields) => {
            let t = lua.create_table_with_capacity(0, fields.len())?;
            for (k, v) in fields {
                let v = to_lua_at(lua, v, depth + 1)?;
                if !v.is_nil() {
                    t.raw_set(lua.create_string(k)?, v)?;
                }
            }
            LuaValue::Table(t)
        }
    })
}

/// A Lua number as JSON: integral doubles print as integers (Go's `json.Marshal(float64)`).
pub(crate) fn number(n: f64) -> Result<Value, ConvertError> {
    if !n.is_finite() {
        let what = if n.is_nan() { "NaN" } else { "+Inf" };
        return Err(ConvertError::Encode(format!(
            "json: unsupported value: {what}"
        )));
    }
    // Go prints |x| < 1e21 without an exponent; such an integral value reads back as an int64.
    if n.fract() == 0.0 && n.abs() < 9.2e18 {
        #[allow(clippy::cast_possible_truncation)]
        return Ok(Value::Number(Number::from(n as i64)));
    }
    Ok(Number::from_f64(n).map_or(Value::Null, Value::Number))
}

/// Encodes Lua values as gopher-json does, within an output budget.
pub(crate) struct Encoder {
    visited: HashSet<usize>,
    budget: usize,
    limit: usize,
}

impl Encoder {
    /// An encoder allowing `limit` bytes of output (approximately: strings plus a few bytes per
    /// value).
    pub(crate) fn new(limit: usize) -> Self {
        Encoder {
            visited: HashSet::new(),
            budget: limit,
            limit,
        }
    }

    fn spend(&mut self, n: usize) -> Result<(), ConvertError> {
        self.budget = self
            .budget
            .checked_sub(n)
            .ok_or(ConvertError::TooLarge { limit: self.limit })?;
        Ok(())
    }

    /// `gopher-json.Encode(value)` as a JSON value.
    pub(crate) fn encode(&mut self, value: &LuaValue) -> Result<Value, ConvertError> {
        self.encode_at(value, 0)
    }

    fn encode_at(&mut self, value: &LuaValue, depth: usize) -> Result<Value, ConvertError> {
        if depth > MAX_DEPTH {
            return Err(ConvertError::TooDeep);
        }
        self.spend(8)?;
        match value {
            LuaValue::Nil => Ok(Value::Null),
            LuaValue::Boolean(b) => Ok(Value::Bool(*b)),
            #[allow(clippy::cast_precision_loss)]
            LuaValue::Integer(i) => number(*i as f64),
            LuaValue::Number(n) => number(*n),
            LuaValue::String(s) => {
                let bytes = s.as_bytes();
                self.spend(bytes.len())?;
                // Go's encoder replaces invalid UTF-8 with U+FFFD.
                Ok(Value::String(String::from_utf8_lossy(&bytes).into_owned()))
            }
            LuaValue::Table(t) => self.table(t, depth),
            other => Err(ConvertError::Encode(format!(
                "cannot encode {} to JSON",
                other.type_name()
            ))),
        }
    }

    fn table(&mut self, t: &Table, depth: usize) -> Result<Value, ConvertError> {
        // gopher-json never forgets a table it has seen: a table reached twice is an error even
        // when it is not a cycle.
        if !self.visited.insert(t.to_pointer() as usize) {
            return Err(ConvertError::Encode(
                "cannot encode recursively nested tables to JSON".into(),
            ));
        }
        // Keys are copied out and values fetched one at a time: holding every value would
        // exhaust mlua's reference slots on large tables.
        let mut strings: Vec<String> = Vec::new();
        let mut numbers: Vec<f64> = Vec::new();
        let mut invalid = false;
        for pair in t.pairs::<LuaValue, LuaValue>() {
            let (k, _) = pair?;
            match k {
                LuaValue::String(s) => strings.push(s.to_str()?.to_owned()),
                LuaValue::Number(n) => numbers.push(n),
                #[allow(clippy::cast_precision_loss)]
                LuaValue::Integer(i) => numbers.push(i as f64),
                _ => invalid = true,
            }
            self.spend(1)?;
        }
        if invalid || (!strings.is_empty() && !numbers.is_empty()) {
            return Err(ConvertError::Encode(
                "cannot encode mixed or invalid key types".into(),
            ));
        }
        if strings.is_empty() && numbers.is_empty() {
            return Ok(Value::Array(Vec::new()));
        }
        if !numbers.is_empty() {
            numbers.sort_by(f64::total_cmp);
            let mut out = Vec::with_capacity(numbers.len());
            for (i, k) in numbers.iter().enumerate() {
                #[allow(clippy::cast_precision_loss)]
                if *k != (i + 1) as f64 {
                    return Err(ConvertError::Encode("cannot encode sparse array".into()));
                }
                let v: LuaValue = t.raw_get(*k)?;
                out.push(self.encode_at(&v, depth + 1)?);
            }
            return Ok(Value::Array(out));
        }
        strings.sort();
        let mut out = Map::new();
        for k in strings {
            self.spend(k.len())?;
            let v: LuaValue = t.raw_get(k.as_str())?;
            let v = self.encode_at(&v, depth + 1)?;
            out.insert(k, v);
        }
        Ok(Value::Object(out))
    }
}

/// Paths (array indices left out) of the empty arrays and empty objects in `references`.
#[derive(Default)]
pub(crate) struct EmptyFields {
    slices: HashSet<Vec<String>>,
    structs: HashSet<Vec<String>>,
}

impl EmptyFields {
    /// Record the empty fields of each reference.
    pub(crate) fn of(references: &[&Value]) -> Self {
        let mut e = EmptyFields::default();
        for r in references {
            e.collect(r, &mut Vec::new(), 0);
        }
        e
    }

    fn collect(&mut self, v: &Value, path: &mut Vec<String>, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        let mut visit = |key: Option<&str>, child: &Value, this: &mut Self| {
            if let Some(k) = key {
                path.push(k.to_owned());
            }
            match child {
                Value::Array(a) if a.is_empty() => {
                    this.slices.insert(path.clone());
                }
                Value::Object(o) if o.is_empty() => {
                    this.structs.insert(path.clone());
                }
                Value::Array(_) | Value::Object(_) => this.collect(child, path, depth + 1),
                _ => {}
            }
            if key.is_some() {
                path.pop();
            }
        };
        match v {
            Value::Object(o) => {
                for (k, child) in o {
                    visit(Some(k), child, self);
                }
            }
            Value::Array(a) => {
                for child in a {
                    visit(None, child, self);
                }
            }
            _ => {}
        }
    }

    /// Restore `{}` where a reference had one, prune the `[]` no reference had (Karmada's
    /// `convertEmptySliceToEmptyStructPartly`); `is_struct`: the result decodes into a struct,
    /// so a wholly empty result is `{}`.
    pub(crate) fn fix(&self, result: Value, is_struct: bool) -> Value {
        if matches!(&result, Value::Array(a) if a.is_empty()) {
            return if is_struct {
                Value::Object(Map::new())
            } else {
                result
            };
        }
        let mut result = result;
        self.fix_children(&mut result, &mut Vec::new(), 0);
        result
    }

    fn fix_children(&self, v: &mut Value, path: &mut Vec<String>, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        match v {
            Value::Object(o) => {
                let mut prune = Vec::new();
                for (k, child) in o.iter_mut() {
                    path.push(k.clone());
                    if self.fix_child(child, path, depth) {
                        prune.push(k.clone());
                    }
                    path.pop();
                }
                for k in prune {
                    o.remove(&k);
                }
            }
            Value::Array(a) => {
                let mut keep = Vec::with_capacity(a.len());
                for mut child in std::mem::take(a) {
                    if !self.fix_child(&mut child, path, depth) {
                        keep.push(child);
                    }
                }
                *a = keep;
            }
            _ => {}
        }
    }

    /// Fix `child` at `path`; `true`: prune it.
    fn fix_child(&self, child: &mut Value, path: &mut Vec<String>, depth: usize) -> bool {
        match child {
            Value::Array(a) if a.is_empty() => {
                if self.structs.contains(path) {
                    *child = Value::Object(Map::new());
                    false
                } else {
                    !self.slices.contains(path)
                }
            }
            Value::Array(_) | Value::Object(_) => {
                self.fix_children(child, path, depth + 1);
                false
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn roundtrip(lua: &Lua, src: &str) -> Result<Value, ConvertError> {
        let v: LuaValue = lua.load(src).eval().unwrap();
        Encoder::new(1 << 20).encode(&v)
    }

    #[test]
    fn tables_encode_as_gopher_json_does() {
        let lua = Lua::new();
        assert_eq!(roundtrip(&lua, "{}").unwrap(), json!([]));
        assert_eq!(
            roundtrip(&lua, "{1, 2.5, 'x'}").unwrap(),
            json!([1, 2.5, "x"])
        );
        assert_eq!(
            roundtrip(&lua, "{b = 1, a = {c = true}}").unwrap(),
            json!({"a": {"c": true}, "b": 1})
        );
        let e = |src| roundtrip(&lua, src).unwrap_err().to_string();
        assert!(e("{1, x = 2}").contains("mixed or invalid key types"));
        assert!(e("{[2] = 1}").contains("sparse array"));
        assert!(e("{[1.5] = 1}").contains("sparse array"));
        assert!(e("{f = print}").contains("cannot encode function"));
        assert!(e("{n = 0/0}").contains("NaN"));
        assert!(e("local t = {} return {a = t, b = t}").contains("recursively nested"));
        assert!(e("local t = {} t.t = t return t").contains("recursively nested"));
    }

    #[test]
    fn numbers_are_doubles_and_integral_ones_come_back_as_integers() {
        let lua = Lua::new();
        let v = to_lua(
            &lua,
            &json!({"n": 3, "f": 0.5, "nul": null, "a": [1, null, 2]}),
        )
        .unwrap();
        lua.globals().set("v", v).unwrap();
        let (n, f, nul, len): (f64, f64, bool, i64) = lua
            .load("return v.n, v.f, v.nul == nil, #v.a")
            .eval()
            .unwrap();
        assert_eq!((n, f, nul, len), (3.0, 0.5, true, 2));
        assert_eq!(number(3.0).unwrap(), json!(3));
        assert_eq!(number(-0.25).unwrap(), json!(-0.25));
        assert!(number(f64::INFINITY).is_err());
    }

    #[test]
    fn empty_tables_become_what_the_references_had_or_are_pruned() {
        let desired = json!({"spec": {"sel": {}, "list": [], "nested": [{"inner": {}}]}});
        let e = EmptyFields::of(&[&desired]);
        let result = json!({"spec": {"sel": [], "list": [], "new": [], "nested": [{"inner": []}], "keep": 1}});
        assert_eq!(
            e.fix(result, true),
            json!({"spec": {"sel": {}, "list": [], "nested": [{"inner": {}}], "keep": 1}})
        );
        let none = EmptyFields::of(&[]);
        assert_eq!(none.fix(json!([]), true), json!({}));
        assert_eq!(none.fix(json!([]), false), json!([]));
        assert_eq!(
            none.fix(json!({"a": [], "b": [[], 1]}), true),
            json!({"b": [1]})
        );
    }

    #[test]
    fn output_and_depth_are_bounded() {
        let lua = Lua::new();
        let v: LuaValue = lua
            .load("local t = {} for i = 1, 1000 do t[i] = string.format('%99d', i) end return t")
            .eval()
            .unwrap();
        assert!(matches!(
            Encoder::new(10_000).encode(&v),
            Err(ConvertError::TooLarge { .. })
        ));
        let deep: LuaValue = lua
            .load("local t = {} for i = 1, 1000 do t = {t} end return t")
            .eval()
            .unwrap();
        assert!(matches!(
            Encoder::new(1 << 20).encode(&deep),
            Err(ConvertError::TooDeep)
        ));
    }
}
