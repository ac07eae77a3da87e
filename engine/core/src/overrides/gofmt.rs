//! Go-compatible text encodings: `encoding/json` (compact, HTML-escaped, Go float format),
//! `strconv.FormatFloat(f, 'g', -1, 64)`, and `fmt`'s `%s` of unstructured values.

use serde_json::Value;

/// `encoding/json`'s string escaping (with `SetEscapeHTML(true)`, the default).
pub(crate) fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32))
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Splits a finite, non-zero f64 into its shortest round-trip decimal digits and the exponent of
/// the first digit (`d.ddd × 10^exp`).
fn shortest_digits(f: f64) -> (String, i32) {
    let s = format!("{:e}", f.abs());
    let (mant, exp) = s.split_once('e').unwrap_or((s.as_str(), "0"));
    let digits: String = mant.chars().filter(char::is_ascii_digit).collect();
    (digits, exp.parse().unwrap_or(0))
}

fn exp_form(neg: bool, digits: &str, exp: i32) -> String {
    let mut s = String::new();
    if neg {
        s.push('-');
    }
    s.push_str(&digits[..1]);
    if digits.len() > 1 {
        s.push('.');
        s.push_str(&digits[1..]);
    }
    s.push('e');
    s.push(if exp < 0 { '-' } else { '+' });
    let e = exp.unsigned_abs();
    if e < 10 {
        s.push('0');
    }
    s.push_str(&e.to_string());
    s
}

/// `strconv.FormatFloat(f, 'g', -1, 64)` (YAML v2 and `fmt` `%v` of float64).
pub(crate) fn format_float_g(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    if f == 0.0 {
        return if f.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let (digits, exp) = shortest_digits(f);
    // With the shortest precision Go switches to %e when exp < -4 || exp >= 6.
    if !(-4..6).contains(&exp) {
        return exp_form(f < 0.0, &digits, exp);
    }
    format!("{f}")
}

/// `encoding/json`'s float64 encoding: `'f'` format, switching to `'e'` below 1e-6 or at 1e21.
pub(crate) fn format_float_json(f: f64) -> String {
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let (digits, exp) = shortest_digits(f);
        let mut s = exp_form(f < 0.0, &digits, exp);
        // Go trims "e-07" to "e-7".
        if let Some(pos) = s.find("e-0") {
            s.remove(pos + 2);
        }
        return s;
    }
    format!("{f}")
}

/// Compact Go `encoding/json` text of `v` (object keys in their stored order).
pub(crate) fn to_json(v: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, v);
    out
}

fn write_value(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            if n.is_f64() {
                out.push_str(&format_float_json(n.as_f64().unwrap_or(0.0)));
            } else {
                out.push_str(&n.to_string());
            }
        }
        Value::String(s) => write_string(out, s),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, x);
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, k);
                out.push(':');
                write_value(out, x);
            }
            out.push('}');
        }
    }
}

/// Compact JSON like evanphx's output: raw number text kept (serde's), Go string escaping.
pub(crate) fn to_json_raw_numbers(v: &Value) -> String {
    let mut out = String::new();
    write_raw(&mut out, v);
    out
}

fn write_raw(out: &mut String, v: &Value) {
    match v {
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_raw(out, x);
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, k);
                out.push(':');
                write_raw(out, x);
            }
            out.push('}');
        }
        Value::Number(n) => out.push_str(&n.to_string()),
        other => write_value(out, other),
    }
}

/// Recursively sorts object keys (Go `map[string]any` encoding order).
pub(crate) fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted(&m[k.as_str()])))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// `fmt.Sprintf("%s", v)` for an unstructured value (Karmada's command/args conversion).
pub(crate) fn sprintf_s(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "%!s(<nil>)".into(),
        Value::Bool(b) => format!("%!s(bool={b})"),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => format!("%!s(int64={i})"),
            (None, Some(f)) if n.is_f64() => format!("%!s(float64={})", format_float_g(f)),
            _ => format!("%!s(int64={n})"),
        },
        other => format!("%!s({})", to_json(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats() {
        assert_eq!(format_float_g(2.0), "2");
        assert_eq!(format_float_g(1.5), "1.5");
        assert_eq!(format_float_g(100000.0), "100000");
        assert_eq!(format_float_g(1000000.0), "1e+06");
        assert_eq!(format_float_g(1234567.0), "1.234567e+06");
        assert_eq!(format_float_g(0.0001), "0.0001");
        assert_eq!(format_float_g(0.00001), "1e-05");
        assert_eq!(format_float_json(2.0), "2");
        assert_eq!(format_float_json(1e21), "1e+21");
        assert_eq!(format_float_json(1e20), "100000000000000000000");
        assert_eq!(format_float_json(1e-7), "1e-7");
    }

    #[test]
    fn strings() {
        let mut s = String::new();
        write_string(&mut s, "<a&b>\u{1}");
        assert_eq!(s, r#""\u003ca\u0026b\u003e\u0001""#);
    }
}
