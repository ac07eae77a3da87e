//! SparkApplication (sparkoperator.k8s.io/v1beta2): one driver and the executors.
//!
//! Executors: `spec.executor.instances` (default 1), raised to `dynamicAllocation`'s
//! `initialExecutors` and `minExecutors` (default 1 each) when dynamic allocation is on. Each pod
//! requests its `cores` (default 1), its JVM-style `memory` (default `1g`) plus the memory
//! overhead (`memoryOverhead`, else `memory × memoryOverheadFactor` but at least 384 MiB; the
//! factor defaults to 0.10 for Java/Scala and 0.40 otherwise) and its GPU; node selector,
//! tolerations, required node affinity and priority class come from the driver's or executor's
//! own spec.

use flotilla_api::interpreter::Component;
use flotilla_api::work::ReplicaRequirements;
use flotilla_core::error::PluginError;
use serde_json::Value;

use super::{apply_pod_spec, count, fail, lua_number, quantity};

/// Binary units the rule computes in, smallest first, with their scale.
const UNITS: [(&str, f64); 6] = [
    ("B", 1.0),
    ("Ki", 1024.0),
    ("Mi", 1_048_576.0),
    ("Gi", 1_073_741_824.0),
    ("Ti", 1_099_511_627_776.0),
    ("Pi", 1_125_899_906_842_624.0),
];

/// A JVM memory string (`512m`, `2g`, `1.5gb`): its number and unit index in [`UNITS`].
fn java_memory(v: &Value, at: &str) -> Result<(f64, usize), PluginError> {
    let text = match v {
        Value::String(s) => s.to_ascii_lowercase(),
        Value::Number(n) => n.to_string(),
        other => return Err(fail(format!("{at}: expected a memory size, got {other}"))),
    };
    let shown: String = text.chars().take(64).collect();
    let bad = || {
        fail(format!(
            "{at}: {shown:?} is not a JVM memory size such as 512m or 2g"
        ))
    };
    let digits = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    // `^(%d+%.?%d*)`: digits, at most one dot, not leading.
    if !number.starts_with(|c: char| c.is_ascii_digit()) || number.matches('.').count() > 1 {
        return Err(bad());
    }
    let unit = match unit {
        "b" => 0,
        "kb" | "k" => 1,
        "mb" | "m" => 2,
        "gb" | "g" => 3,
        "tb" | "t" => 4,
        "pb" | "p" => 5,
        _ => return Err(bad()),
    };
    let value = number.parse::<f64>().map_err(|_| bad())?;
    Ok((value, unit))
}

fn convert(value: f64, from: usize, to: usize) -> f64 {
    if from == to {
        value
    } else {
        value * (UNITS[from].1 / UNITS[to].1)
    }
}

/// The pod's memory request: memory plus overhead, in the smaller of their units, printed with
/// six decimals as the rule does before Karmada parses it as a quantity.
fn total_memory(
    memory: &Value,
    overhead: Option<&Value>,
    factor: f64,
    at: &str,
) -> Result<String, PluginError> {
    let (mem, mem_unit) = java_memory(memory, &format!("{at}.memory"))?;
    let (over, over_unit) = match overhead {
        Some(o) => java_memory(o, &format!("{at}.memoryOverhead"))?,
        None => {
            // The 384 MiB floor.
            let (min, min_unit) = (384.0, 2);
            let smaller = mem_unit.min(min_unit);
            let computed = convert(mem * factor, mem_unit, smaller);
            (computed.max(convert(min, min_unit, smaller)), smaller)
        }
    };
    let unit = mem_unit.min(over_unit);
    let total = convert(mem, mem_unit, unit) + convert(over, over_unit, unit);
    Ok(format!("{total:.6}{}", UNITS[unit].0))
}

fn pod(object: &Value, role: &str, replicas: f64, factor: f64) -> Result<Component, PluginError> {
    let spec = object
        .pointer(&format!("/spec/{role}"))
        .filter(|v| !v.is_null());
    let get = |k: &str| spec.and_then(|s| s.get(k)).filter(|v| !v.is_null());
    let at = format!("spec.{role}");
    let mut requires = ReplicaRequirements::default();
    let one = Value::from(1);
    requires.resource_request.insert(
        "cpu".into(),
        quantity(get("cores").unwrap_or(&one), &format!("{at}.cores"))?,
    );
    let default_memory = Value::from("1g");
    let memory = total_memory(
        get("memory").unwrap_or(&default_memory),
        get("memoryOverhead"),
        factor,
        &at,
    )?;
    requires.resource_request.insert(
        "memory".into(),
        quantity(&Value::String(memory), &format!("{at}.memory"))?,
    );
    if let Some(gpu) = get("gpu") {
        let name = gpu.get("name").and_then(Value::as_str).unwrap_or("");
        let qty = lua_number(gpu.get("quantity")).unwrap_or(0.0);
        if !name.is_empty() && qty > 0.0 {
            let n = serde_json::Number::from_f64(qty)
                .ok_or_else(|| fail(format!("{at}.gpu.quantity: not a finite number")))?;
            requires.resource_request.insert(
                name.to_owned(),
                quantity(&Value::Number(n), &format!("{at}.gpu.quantity"))?,
            );
        }
    }
    apply_pod_spec(spec, true, &mut requires, &at)?;
    Ok(Component {
        name: role.into(),
        replicas: count(replicas, &format!("{role} replicas"))?,
        replica_requirements: Some(requires),
    })
}

/// Is the value true as Lua sees it (anything but absent, null and `false`)?
fn truthy(v: Option<&Value>) -> bool {
    !matches!(v, None | Some(Value::Null | Value::Bool(false)))
}

/// InterpretComponent: `driver` (always one) and `executor`.
pub(super) fn components(object: &Value) -> Result<Vec<Component>, PluginError> {
    let job_type = match object.pointer("/spec/type") {
        Some(Value::String(s)) => s.to_ascii_lowercase(),
        other => {
            return Err(fail(format!(
                "spec.type: expected the application type (Java, Scala, Python, R), got {}",
                other.map_or_else(|| "nothing".to_owned(), Value::to_string)
            )));
        }
    };
    let default_factor = if matches!(job_type.as_str(), "java" | "scala") {
        0.10
    } else {
        0.40
    };
    let factor = lua_number(object.pointer("/spec/memoryOverheadFactor")).unwrap_or(default_factor);

    let mut executors = lua_number(object.pointer("/spec/executor/instances")).unwrap_or(1.0);
    if truthy(object.pointer("/spec/dynamicAllocation/enabled")) {
        let initial =
            lua_number(object.pointer("/spec/dynamicAllocation/initialExecutors")).unwrap_or(1.0);
        let min = lua_number(object.pointer("/spec/dynamicAllocation/minExecutors")).unwrap_or(1.0);
        executors = executors.max(initial).max(min);
    }
    Ok(vec![
        pod(object, "driver", 1.0, factor)?,
        pod(object, "executor", executors, factor)?,
    ])
}
