//! Decoding any serde format (JSON, YAML) into a [`serde_json::Value`] the way
//! `Value`'s own `Deserialize` does, but with every mapping key shown to a [`KeyCheck`] first:
//! the API server records duplicate fields with their paths for `fieldValidation`, the offline
//! loader refuses duplicate and merge keys as kubectl's strict decoding does.

use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// What a decoder does with each mapping key, and where it is in the document.
pub trait KeyCheck {
    /// A key about to be read into a mapping that already holds `seen` (the path still ends at
    /// the mapping). An error refuses the document; the format adds its position (YAML: the
    /// key's line and column).
    ///
    /// # Errors
    /// The message to refuse the document with.
    fn key(&mut self, key: &str, seen: &Map<String, Value>) -> Result<(), String>;

    /// The decoder enters the value of mapping key `key`.
    fn enter_key(&mut self, _key: &str) {}

    /// The decoder enters item `index` of a sequence.
    fn enter_index(&mut self, _index: usize) {}

    /// The decoder leaves the value entered last.
    fn leave(&mut self) {}
}

/// Decodes one value, showing every key to the [`KeyCheck`]. A repeated key the check lets
/// through keeps its last value, as in serde_json.
pub struct Checked<'a, K: KeyCheck>(pub &'a mut K);

impl<'de, K: KeyCheck> DeserializeSeed<'de> for Checked<'_, K> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, de: D) -> Result<Value, D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de, K: KeyCheck> Visitor<'de> for Checked<'_, K> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON-compatible value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: de::Deserializer<'de>>(self, de: D) -> Result<Value, D::Error> {
        de.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        loop {
            self.0.enter_index(items.len());
            let item = seq.next_element_seed(Checked(&mut *self.0));
            self.0.leave();
            match item? {
                Some(v) => items.push(v),
                None => return Ok(Value::Array(items)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key_seed(Key {
            check: &mut *self.0,
            seen: &out,
        })? {
            self.0.enter_key(&key);
            let value = map.next_value_seed(Checked(&mut *self.0));
            self.0.leave();
            out.insert(key, value?);
        }
        Ok(Value::Object(out))
    }
}

/// Reads a mapping key and shows it to the check while the parser is still at the key.
struct Key<'a, K: KeyCheck> {
    check: &'a mut K,
    seen: &'a Map<String, Value>,
}

impl<'de, K: KeyCheck> DeserializeSeed<'de> for Key<'_, K> {
    type Value = String;

    fn deserialize<D: de::Deserializer<'de>>(self, de: D) -> Result<String, D::Error> {
        de.deserialize_string(self)
    }
}

impl<'de, K: KeyCheck> Visitor<'de> for Key<'_, K> {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<String, E> {
        self.check.key(key, self.seen).map_err(E::custom)?;
        Ok(key.to_owned())
    }

    fn visit_string<E: de::Error>(self, key: String) -> Result<String, E> {
        self.check.key(&key, self.seen).map_err(E::custom)?;
        Ok(key)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Records `path.key` for every repeated key.
    #[derive(Default)]
    struct Paths {
        path: Vec<String>,
        repeated: Vec<String>,
    }

    impl KeyCheck for Paths {
        fn key(&mut self, key: &str, seen: &Map<String, Value>) -> Result<(), String> {
            if key == "<<" {
                return Err("merge key".into());
            }
            if seen.contains_key(key) {
                let mut p = self.path.join("");
                p.push('.');
                p.push_str(key);
                self.repeated.push(p);
            }
            Ok(())
        }
        fn enter_key(&mut self, key: &str) {
            self.path.push(format!(".{key}"));
        }
        fn enter_index(&mut self, index: usize) {
            self.path.push(format!("[{index}]"));
        }
        fn leave(&mut self) {
            self.path.pop();
        }
    }

    #[test]
    fn values_decode_as_serde_json_and_keys_are_checked_with_their_path() {
        let src = r#"{"a":[1,-2,3.5,null,true,"s",{"k":1,"k":2}],"b":{"c":{"d":[]}},"b":0}"#;
        let mut check = Paths::default();
        let mut de = serde_json::Deserializer::from_str(src);
        let v = Checked(&mut check).deserialize(&mut de).unwrap();
        assert_eq!(v, json!({"a":[1,-2,3.5,null,true,"s",{"k":2}],"b":0}));
        assert_eq!(check.repeated, [".a[6].k", ".b"]);
        assert!(check.path.is_empty());
    }

    #[test]
    fn a_refused_key_carries_the_yaml_position() {
        let mut check = Paths::default();
        let de = serde_yaml::Deserializer::from_str("a: 1\nb:\n  <<: {c: 1}\n");
        let err = Checked(&mut check).deserialize(de).unwrap_err().to_string();
        assert!(err.contains("merge key") && err.contains("line 3"), "{err}");
    }
}
