//! `sigs.k8s.io/yaml` round trip for fieldOverrider: YAML text → JSON value, and JSON value →
//! YAML text the way go-yaml v2 emits it (map keys sorted with go-yaml's natural order, 2-space
//! indent, sequences inside mappings not indented, strings quoted only when needed).

use serde_json::{Map, Number, Value};

use super::gofmt::format_float_g;

/// Parses YAML text into a JSON value (`yaml.YAMLToJSON`). Empty text is `null`.
pub(crate) fn yaml_to_json(text: &str) -> Result<Value, String> {
    let y: serde_yaml::Value = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
    convert(&y)
}

fn key_string(k: &serde_yaml::Value) -> Result<String, String> {
    Ok(match k {
        serde_yaml::Value::String(s) => s.clone(),
        serde_yaml::Value::Bool(b) => b.to_string(),
        serde_yaml::Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() => format_float_g(f),
            _ => n.to_string(),
        },
        serde_yaml::Value::Null => "null".into(),
        serde_yaml::Value::Tagged(t) => key_string(&t.value)?,
        _ => return Err("unsupported map key type".into()),
    })
}

fn convert(y: &serde_yaml::Value) -> Result<Value, String> {
    Ok(match y {
        serde_yaml::Value::Null => Value::Null,
        serde_yaml::Value::Bool(b) => Value::Bool(*b),
        serde_yaml::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::Number(i.into())
            } else if let Some(u) = n.as_u64() {
                Value::Number(u.into())
            } else {
                let f = n.as_f64().unwrap_or(0.0);
                Number::from_f64(f)
                    .map(Value::Number)
                    .ok_or("cannot convert NaN or Inf to JSON")?
            }
        }
        serde_yaml::Value::String(s) => Value::String(s.clone()),
        serde_yaml::Value::Sequence(s) => {
            Value::Array(s.iter().map(convert).collect::<Result<_, _>>()?)
        }
        serde_yaml::Value::Mapping(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                out.insert(key_string(k)?, convert(v)?);
            }
            Value::Object(out)
        }
        serde_yaml::Value::Tagged(t) => convert(&t.value)?,
    })
}

/// go-yaml v2's `keyList.Less` for string keys: letters before digits, digit runs compared
/// numerically.
fn key_less(a: &str, b: &str) -> bool {
    let ar: Vec<char> = a.chars().collect();
    let br: Vec<char> = b.chars().collect();
    let mut i = 0;
    while i < ar.len() && i < br.len() {
        if ar[i] == br[i] {
            i += 1;
            continue;
        }
        let al = ar[i].is_alphabetic();
        let bl = br[i].is_alphabetic();
        if al && bl {
            return ar[i] < br[i];
        }
        if al || bl {
            return bl;
        }
        let (mut an, mut bn): (i64, i64) = (0, 0);
        if ar[i] == '0' || br[i] == '0' {
            let mut j = i;
            while j > 0 && ar[j - 1].is_ascii_digit() {
                j -= 1;
                if ar[j] != '0' {
                    an = 1;
                    bn = 1;
                    break;
                }
            }
        }
        let mut ai = i;
        while ai < ar.len() && ar[ai].is_ascii_digit() {
            an = an
                .wrapping_mul(10)
                .wrapping_add(i64::from(ar[ai] as u8 - b'0'));
            ai += 1;
        }
        let mut bi = i;
        while bi < br.len() && br[bi].is_ascii_digit() {
            bn = bn
                .wrapping_mul(10)
                .wrapping_add(i64::from(br[bi] as u8 - b'0'));
            bi += 1;
        }
        if an != bn {
            return an < bn;
        }
        if ai != bi {
            return ai < bi;
        }
        return ar[i] < br[i];
    }
    ar.len() < br.len()
}

fn sorted_keys(m: &Map<String, Value>) -> Vec<&String> {
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort_by(|a, b| {
        if key_less(a, b) {
            std::cmp::Ordering::Less
        } else if key_less(b, a) {
            std::cmp::Ordering::Greater
        } else {
            std::cmp::Ordering::Equal
        }
    });
    keys
}

/// Serialises `v` as YAML (`yaml.JSONToYAML`).
pub(crate) fn json_to_yaml(v: &Value) -> String {
    let mut out = String::new();
    match v {
        Value::Object(m) if !m.is_empty() => write_map(&mut out, m, 0),
        Value::Array(a) if !a.is_empty() => write_seq(&mut out, a, 0),
        other => {
            out.push_str(&scalar(other));
            out.push('\n');
        }
    }
    out
}

fn pad(out: &mut String, indent: usize) {
    out.extend(std::iter::repeat_n(' ', indent));
}

fn is_block(v: &Value) -> bool {
    match v {
        Value::Object(m) => !m.is_empty(),
        Value::Array(a) => !a.is_empty(),
        _ => false,
    }
}

fn write_map(out: &mut String, m: &Map<String, Value>, indent: usize) {
    for (n, k) in sorted_keys(m).into_iter().enumerate() {
        if n > 0 {
            pad(out, indent);
        }
        out.push_str(&string_scalar(k));
        out.push(':');
        let v = &m[k.as_str()];
        match v {
            Value::Object(sub) if !sub.is_empty() => {
                out.push('\n');
                pad(out, indent + 2);
                write_map(out, sub, indent + 2);
            }
            Value::Array(a) if !a.is_empty() => {
                out.push('\n');
                pad(out, indent);
                write_seq(out, a, indent);
            }
            other => {
                out.push(' ');
                out.push_str(&scalar(other));
                out.push('\n');
            }
        }
    }
}

fn write_seq(out: &mut String, a: &[Value], indent: usize) {
    for (n, v) in a.iter().enumerate() {
        if n > 0 {
            pad(out, indent);
        }
        out.push_str("- ");
        match v {
            Value::Object(sub) if is_block(v) => write_map(out, sub, indent + 2),
            Value::Array(sub) if is_block(v) => write_seq(out, sub, indent + 2),
            other => {
                out.push_str(&scalar(other));
                out.push('\n');
            }
        }
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => {
            if n.is_f64() {
                match format_float_g(n.as_f64().unwrap_or(0.0)).as_str() {
                    "+Inf" => ".inf".into(),
                    "-Inf" => "-.inf".into(),
                    "NaN" => ".nan".into(),
                    s => s.to_string(),
                }
            } else {
                n.to_string()
            }
        }
        Value::String(s) => string_scalar(s),
        Value::Object(_) => "{}".into(),
        Value::Array(_) => "[]".into(),
    }
}

/// True when a plain scalar `s` would be read back as something other than a string by
/// go-yaml v2's resolver (null, bool, int, float, timestamp, base-60 float).
fn resolves_to_non_string(s: &str) -> bool {
    const SPECIAL: &[&str] = &[
        "", "~", "null", "Null", "NULL", "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO",
        "true", "True", "TRUE", "false", "False", "FALSE", "on", "On", "ON", "off", "Off", "OFF",
        ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF", ".nan",
        ".NaN", ".NAN", "<<",
    ];
    if SPECIAL.contains(&s) {
        return true;
    }
    let first = s.as_bytes()[0];
    if !(first.is_ascii_digit() || matches!(first, b'+' | b'-' | b'.')) {
        return false;
    }
    let plain = s.replace('_', "");
    let unsigned = plain.strip_prefix(['+', '-']).unwrap_or(&plain);
    let int_like = |t: &str, radix: u32| !t.is_empty() && t.chars().all(|c| c.is_digit(radix));
    if int_like(unsigned, 10)
        || unsigned.strip_prefix("0x").is_some_and(|t| int_like(t, 16))
        || unsigned.strip_prefix("0b").is_some_and(|t| int_like(t, 2))
        || unsigned.strip_prefix("0o").is_some_and(|t| int_like(t, 8))
    {
        return true;
    }
    // Float: digits with optional '.', optional exponent.
    let (mant, exp) = match unsigned.find(['e', 'E']) {
        Some(i) => (&unsigned[..i], Some(&unsigned[i + 1..])),
        None => (unsigned, None),
    };
    let mant_ok = {
        let (a, b) = mant.split_once('.').unwrap_or((mant, ""));
        (!a.is_empty() || !b.is_empty())
            && a.chars().all(|c| c.is_ascii_digit())
            && b.chars().all(|c| c.is_ascii_digit())
    };
    let exp_ok = exp.is_none_or(|e| int_like(e.strip_prefix(['+', '-']).unwrap_or(e), 10));
    if mant_ok && exp_ok {
        return true;
    }
    // Base-60 float (1:20.5) and timestamps (2001-12-14...).
    let b = s.as_bytes();
    if b.len() >= 10 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'-' {
        return true;
    }
    if s.contains(':')
        && s.split(':')
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit() || c == '.'))
    {
        return true;
    }
    false
}

/// Whether libyaml's scalar analysis allows the plain style in block context.
fn plain_allowed(s: &str) -> bool {
    if s.is_empty() || s.starts_with("---") || s.starts_with("...") {
        return false;
    }
    let chars: Vec<char> = s.chars().collect();
    if chars[0] == ' ' || chars[chars.len() - 1] == ' ' {
        return false;
    }
    for (i, &c) in chars.iter().enumerate() {
        let next_blank = chars.get(i + 1).is_none_or(|n| *n == ' ');
        if c == '\n' || c == '\r' || c == '\t' || c.is_control() || c == '\u{feff}' {
            return false;
        }
        if i == 0 {
            if matches!(
                c,
                '#' | ','
                    | '['
                    | ']'
                    | '{'
                    | '}'
                    | '&'
                    | '*'
                    | '!'
                    | '|'
                    | '>'
                    | '\''
                    | '"'
                    | '%'
                    | '@'
                    | '`'
            ) {
                return false;
            }
            if matches!(c, '?' | ':' | '-') && next_blank {
                return false;
            }
        } else {
            if c == ':' && next_blank {
                return false;
            }
            if c == '#' && chars[i - 1] == ' ' {
                return false;
            }
        }
    }
    true
}

fn double_quoted(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\0' => out.push_str("\\0"),
            c if c.is_control() || c == '\u{feff}' => {
                let n = c as u32;
                if n <= 0xff {
                    out.push_str(&format!("\\x{n:02X}"));
                } else {
                    out.push_str(&format!("\\u{n:04X}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn string_scalar(s: &str) -> String {
    if resolves_to_non_string(s)
        || s.contains(['\n', '\r'])
        || s.chars().any(|c| c.is_control() && c != '\t')
    {
        return double_quoted(s);
    }
    if plain_allowed(s) {
        return s.to_string();
    }
    if s.contains('\t') {
        return double_quoted(s);
    }
    format!("'{}'", s.replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn karmada_pinned() {
        let v = yaml_to_json("key:\n  key1: value").expect("yaml");
        assert_eq!(v, json!({"key": {"key1": "value"}}));
        assert_eq!(
            json_to_yaml(&json!({"key": {"key1": "updated_value"}})),
            "key:\n  key1: updated_value\n"
        );
    }

    #[test]
    fn layout() {
        let v = json!({"b": [1, {"y": 2, "x": [true]}], "a": {}, "c": "true", "d": "a: b", "a10": 1, "a2": 2.0});
        assert_eq!(
            json_to_yaml(&v),
            "a: {}\na2: 2\na10: 1\nb:\n- 1\n- x:\n  - true\n  \"y\": 2\nc: \"true\"\nd: 'a: b'\n"
        );
    }
}
