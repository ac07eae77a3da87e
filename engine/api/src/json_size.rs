//! The size and depth of JSON values, measured without serialising and without recursion:
//! what the API server checks objects against and what bounds Wasm override patches.

use serde_json::Value;

/// The JSON size of `v` (estimated: exact unless strings need escapes) and its nesting depth
/// (a scalar is 0, `{}` is 1). Walks iteratively, so deep documents cannot overflow the stack, and
/// stops as soon as the size passes `limit` (the depth is then partial).
pub fn measure(v: &Value, limit: usize) -> (usize, usize) {
    let mut size = 0usize;
    let mut depth = 0usize;
    let mut stack: Vec<(&Value, usize)> = vec![(v, 0)];
    while let Some((v, level)) = stack.pop() {
        size = size.saturating_add(match v {
            Value::Null => 4,
            Value::Bool(b) => 4 + usize::from(!*b),
            Value::Number(n) => number_len(n),
            Value::String(s) => s.len() + 2,
            Value::Array(a) => {
                depth = depth.max(level + 1);
                stack.extend(a.iter().map(|x| (x, level + 1)));
                2 + a.len().saturating_sub(1)
            }
            Value::Object(m) => {
                depth = depth.max(level + 1);
                stack.extend(m.values().map(|x| (x, level + 1)));
                2 + m.len().saturating_sub(1) + m.keys().map(|k| k.len() + 3).sum::<usize>()
            }
        });
        if size > limit {
            break;
        }
    }
    (size, depth)
}

fn number_len(n: &serde_json::Number) -> usize {
    let digits = |mut u: u64| {
        let mut d = 1;
        while u >= 10 {
            u /= 10;
            d += 1;
        }
        d
    };
    if let Some(u) = n.as_u64() {
        digits(u)
    } else if let Some(i) = n.as_i64() {
        1 + digits(i.unsigned_abs())
    } else {
        n.to_string().len()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn measure_matches_compact_json_and_counts_depth() {
        for v in [
            json!(null),
            json!(true),
            json!(false),
            json!(-12345),
            json!(u64::MAX),
            json!(1.5),
            json!("abc"),
            json!([]),
            json!({}),
            json!({"a": [1, -22, true, false, "x"], "bb": {"c": 3.5}}),
            json!({"a": [1, 2, {"b": null}], "cd": {"e": "f"}}),
        ] {
            assert_eq!(measure(&v, usize::MAX).0, v.to_string().len(), "{v}");
        }
        assert_eq!(measure(&json!(1), usize::MAX).1, 0);
        assert_eq!(measure(&json!({"a": {"b": [1]}}), usize::MAX).1, 3);
        assert_eq!(measure(&json!({"a": [[{}]]}), usize::MAX).1, 4);
    }

    #[test]
    fn measuring_stops_past_the_limit() {
        let v = json!(["x".repeat(100), "y".repeat(100), "z".repeat(100)]);
        let (size, _) = measure(&v, 50);
        assert!(size > 50 && size < v.to_string().len(), "{size}");
    }
}
