//! rust-shard-interpreter: a Flotilla resource interpreter in Rust for a `Shard` CRD
//! (`example.com/v1`), served by `flotilla_interpret_v1` (sdk/ABI.md §10).
//!
//! A `Shard` has `spec.replicas`, a pod template (`spec.template.spec.containers[*].resources`) and
//! reports `status.readyReplicas` and `status.observedGeneration`. The plugin answers:
//! - `InterpretReplica`: `spec.replicas` (default 1), and per-replica requirements summed over the
//!   containers' requests (quantities kept as written when one container asks, else added as
//!   milli-units for `cpu` and bytes for the rest);
//! - `ReviseReplica`: a merge patch setting `spec.replicas`;
//! - `AggregateStatus`: `replicas` and `readyReplicas` summed over the members' statuses;
//! - `InterpretHealth`: healthy when the member observed the latest generation and all its
//!   replicas are ready.
//! Any other operation is an error (the customization does not route it here).

use std::collections::BTreeMap;

use flotilla_pdk::Plugin;
use flotilla_pdk::abi::{InitRequest, InterpretReply, InterpretRequest};
use flotilla_pdk::serde_json::{Map, Value, json};

/// The plugin (stateless).
pub struct ShardInterpreter;

fn int(v: Option<&Value>) -> i64 {
    v.and_then(Value::as_i64).unwrap_or(0)
}

/// A quantity in its base unit × 1000 (milli-units), for the suffixes pod requests use.
fn milli(q: &Value) -> Option<i128> {
    let s = match q {
        Value::Number(n) => return n.as_i64().map(|n| i128::from(n) * 1000),
        Value::String(s) => s.as_str(),
        _ => return None,
    };
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, suffix) = s.split_at(split);
    let factor: i128 = match suffix {
        "" => 1000,
        "m" => 1,
        "k" => 1000 * 1000,
        "M" => 1000 * 1000 * 1000,
        "G" => 1000 * 1000 * 1000 * 1000,
        "Ki" => 1000 * 1024,
        "Mi" => 1000 * 1024 * 1024,
        "Gi" => 1000 * 1024 * 1024 * 1024,
        _ => return None,
    };
    let (whole, frac) = num.split_once('.').unwrap_or((num, ""));
    let whole: i128 = if whole.is_empty() { 0 } else { whole.parse().ok()? };
    let mut total = whole.checked_mul(factor)?;
    let mut scale = factor;
    for d in frac.chars().take(9) {
        scale /= 10;
        total = total.checked_add(i128::from(d.to_digit(10)?) * scale)?;
    }
    Some(total)
}

/// Milli-units back to a quantity string: whole units when exact, else milli-units.
fn quantity(m: i128) -> String {
    if m % 1000 == 0 { (m / 1000).to_string() } else { format!("{m}m") }
}

/// `{resourceRequest: …}` summed over the template's containers.
fn requirements(object: &Value) -> Option<Value> {
    let containers = object.pointer("/spec/template/spec/containers")?.as_array()?;
    let mut sums: BTreeMap<String, i128> = BTreeMap::new();
    for c in containers {
        let Some(requests) = c.pointer("/resources/requests").and_then(Value::as_object) else {
            continue;
        };
        for (name, q) in requests {
            let m = milli(q)?;
            *sums.entry(name.clone()).or_default() += m;
        }
    }
    if sums.is_empty() {
        return None;
    }
    let request: Map<String, Value> =
        sums.into_iter().map(|(k, m)| (k, Value::String(quantity(m)))).collect();
    Some(json!({"resourceRequest": request}))
}

impl Plugin for ShardInterpreter {
    type Cluster = serde::de::IgnoredAny;
    type Binding = Value;

    fn new(_init: InitRequest) -> Result<Self, String> {
        Ok(ShardInterpreter)
    }

    fn interpret(&mut self, req: InterpretRequest) -> Result<InterpretReply, String> {
        let mut reply = InterpretReply::default();
        match req.operation.as_str() {
            "InterpretReplica" => {
                let object = req.object.ok_or("InterpretReplica without object")?;
                reply.replicas = Some(object.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1));
                reply.replica_requirements = requirements(&object);
            }
            "ReviseReplica" => {
                let replicas = req.desired_replicas.ok_or("ReviseReplica without desiredReplicas")?;
                reply.patch = Some(json!({"spec": {"replicas": replicas}}));
            }
            "AggregateStatus" => {
                let items = req.status_items.unwrap_or_default();
                let (mut replicas, mut ready) = (0, 0);
                for item in &items {
                    replicas += int(item.pointer("/status/replicas"));
                    ready += int(item.pointer("/status/readyReplicas"));
                }
                reply.status = Some(json!({"replicas": replicas, "readyReplicas": ready}));
            }
            "InterpretHealth" => {
                let observed = req.observed_object.ok_or("InterpretHealth without observedObject")?;
                let generation = int(observed.pointer("/metadata/generation"));
                let observed_generation = int(observed.pointer("/status/observedGeneration"));
                let want = observed.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1);
                let ready = int(observed.pointer("/status/readyReplicas"));
                reply.healthy = Some(observed_generation >= generation && ready >= want);
            }
            other => return Err(format!("{other} is not implemented by rust-shard-interpreter")),
        }
        Ok(reply)
    }
}

flotilla_pdk::export_plugin!(ShardInterpreter, name = "rust-shard-interpreter", points = [interpret]);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_add_up_in_milli_units() {
        assert_eq!(milli(&json!("250m")), Some(250));
        assert_eq!(milli(&json!("1.5")), Some(1500));
        assert_eq!(milli(&json!("1Gi")), Some(1000 << 30));
        assert_eq!(milli(&json!(2)), Some(2000));
        assert_eq!(milli(&json!("1Xi")), None);
        assert_eq!(quantity(1750), "1750m");
        assert_eq!(quantity(2000), "2");
    }

    #[test]
    fn requirements_sum_the_containers() {
        let shard = json!({"spec": {"template": {"spec": {"containers": [
            {"resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}},
            {"resources": {"requests": {"cpu": "1"}}}
        ]}}}});
        assert_eq!(
            requirements(&shard),
            Some(json!({"resourceRequest": {"cpu": "1250m", "memory": (1u64 << 30).to_string()}}))
        );
    }
}
