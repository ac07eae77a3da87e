//! JSON ↔ CEL values: one conversion per object revision, with the sizes the runtime cost check
//! needs, and the result of an evaluation back to JSON.

use std::collections::HashMap;

use cel::common::types::{
    CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString, CelUInt,
};
use cel::common::value::Val;
use cel::objects::Key;
use serde_json::{Map, Number, Value};

use crate::limits::Limits;

/// The largest collection and string in a converted value: what the cost check evaluates a
/// program's cost bound at.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sizes {
    /// Elements of the longest list or map.
    pub list: u64,
    /// Bytes of the longest string.
    pub string: u64,
    /// Values in total.
    pub nodes: u64,
}

impl Sizes {
    /// The larger of each size.
    pub fn max(self, other: Sizes) -> Sizes {
        Sizes {
            list: self.list.max(other.list),
            string: self.string.max(other.string),
            nodes: self.nodes.max(other.nodes),
        }
    }
}

/// Why a value could not be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConvertError {
    /// The input has more values than [`Limits::max_input_nodes`].
    #[error("input has more than {limit} values")]
    TooManyNodes {
        /// The limit.
        limit: u64,
    },
    /// The input nests deeper than [`Limits::max_input_depth`].
    #[error("input nests deeper than {limit} levels")]
    TooDeep {
        /// The limit.
        limit: u32,
    },
}

/// Convert `v` into a CEL value, counting its sizes; fails past the input limits.
pub(crate) fn to_cel(
    v: &Value,
    limits: &Limits,
    sizes: &mut Sizes,
) -> Result<Box<dyn Val + 'static>, ConvertError> {
    to_cel_at(v, limits, sizes, 0)
}

fn to_cel_at(
    v: &Value,
    limits: &Limits,
    sizes: &mut Sizes,
    depth: u32,
) -> Result<Box<dyn Val + 'static>, ConvertError> {
    sizes.nodes += 1;
    if sizes.nodes > limits.max_input_nodes {
        return Err(ConvertError::TooManyNodes {
            limit: limits.max_input_nodes,
        });
    }
    if depth > limits.max_input_depth {
        return Err(ConvertError::TooDeep {
            limit: limits.max_input_depth,
        });
    }
    Ok(match v {
        Value::Null => Box::new(CelNull),
        Value::Bool(b) => Box::new(CelBool::from(*b)),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Box::new(CelInt::from(i)),
            (None, Some(u)) => Box::new(CelUInt::from(u)),
            _ => Box::new(CelDouble::from(n.as_f64().unwrap_or(f64::NAN))),
        },
        Value::String(s) => {
            sizes.string = sizes.string.max(s.len() as u64);
            Box::new(CelString::from(s.clone()))
        }
        Value::Array(a) => {
            sizes.list = sizes.list.max(a.len() as u64);
            let items: Result<Vec<_>, _> = a
                .iter()
                .map(|x| to_cel_at(x, limits, sizes, depth + 1))
                .collect();
            Box::new(CelList::from(items?))
        }
        Value::Object(m) => {
            sizes.list = sizes.list.max(m.len() as u64);
            let mut out: HashMap<CelMapKey<'static>, Box<dyn Val>> =
                HashMap::with_capacity(m.len());
            for (k, x) in m {
                sizes.string = sizes.string.max(k.len() as u64);
                out.insert(
                    CelMapKey::from(k.clone()),
                    to_cel_at(x, limits, sizes, depth + 1)?,
                );
            }
            Box::new(CelMap::from(out))
        }
    })
}

/// Why a result could not be turned into JSON.
pub(crate) fn to_json(v: &cel::Value) -> Result<Value, String> {
    Ok(match v {
        cel::Value::Null => Value::Null,
        cel::Value::Bool(b) => Value::Bool(*b),
        cel::Value::Int(i) => Value::from(*i),
        cel::Value::UInt(u) => Value::from(*u),
        cel::Value::Float(f) => Number::from_f64(*f)
            .map(Value::Number)
            .ok_or_else(|| format!("{f} is not a JSON number"))?,
        cel::Value::String(s) => Value::String(s.as_str().to_owned()),
        cel::Value::List(l) => Value::Array(l.iter().map(to_json).collect::<Result<_, _>>()?),
        cel::Value::Map(m) => {
            let mut entries: Vec<(String, Value)> = Vec::with_capacity(m.map.len());
            for (k, x) in m.map.iter() {
                let key = match k {
                    Key::String(s) => s.as_str().to_owned(),
                    Key::Int(i) => i.to_string(),
                    Key::Uint(u) => u.to_string(),
                    Key::Bool(b) => b.to_string(),
                };
                entries.push((key, to_json(x)?));
            }
            // CEL maps are unordered: sort keys so results (and patches) are deterministic.
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().collect::<Map<String, Value>>())
        }
        other => return Err(format!("a {} value has no JSON form", other.type_of())),
    })
}
