//! FlinkDeployment (flink.apache.org/v1beta1): a JobManager and TaskManagers.
//!
//! Replicas: `spec.jobManager.replicas` (default 1); `spec.taskManager.replicas`, else
//! ⌈`spec.job.parallelism` / `taskmanager.numberOfTaskSlots`⌉ (1 when either is unset or the slots
//! are 0). Requests come from `spec.<manager>.resource.{cpu,memory}` (Flink's own memory strings
//! are read as Kubernetes quantities, as Karmada does); node selector, tolerations and priority
//! class from the shared `spec.podTemplate.spec`.

use flotilla_api::interpreter::Component;
use flotilla_api::meta::Quantity;
use flotilla_api::work::ReplicaRequirements;
use flotilla_core::error::PluginError;
use flotilla_core::interpreter::Replicas;
use flotilla_core::quantity::parse_nano;
use serde_json::Value;

use super::{apply_pod_spec, count, decimal, fail, lua_number, quantity};

/// JobManager and TaskManager replica counts, as numbers (the rule adds them before converting).
fn manager_counts(object: &Value) -> (f64, f64) {
    let jm = lua_number(object.pointer("/spec/jobManager/replicas")).unwrap_or(1.0);
    let tm = lua_number(object.pointer("/spec/taskManager/replicas")).unwrap_or_else(|| {
        let parallelism = lua_number(object.pointer("/spec/job/parallelism"));
        let slots = lua_number(
            object
                .pointer("/spec/flinkConfiguration")
                .and_then(|c| c.get("taskmanager.numberOfTaskSlots")),
        );
        match (parallelism, slots) {
            (Some(p), Some(s)) if s != 0.0 => (p / s).ceil(),
            _ => 1.0,
        }
    });
    (jm, tm)
}

/// A memory field as `kube.getResourceQuantity` reads it: a quantity string.
fn memory_nano(v: &Value, at: &str) -> Result<i128, PluginError> {
    let Value::String(s) = v else {
        return Err(fail(format!("{at}: expected a quantity string, got {v}")));
    };
    let nano = parse_nano(s.trim()).map_err(|e| fail(format!("{at}: {e}")))?;
    if nano < 0 {
        return Err(fail(format!("{at}: {s:?} is negative")));
    }
    Ok(nano)
}

fn present<'a>(object: &'a Value, pointer: &str) -> Option<&'a Value> {
    object.pointer(pointer).filter(|v| !v.is_null())
}

fn manager(
    object: &Value,
    which: &str,
    name: &str,
    replicas: f64,
) -> Result<Component, PluginError> {
    let mut requires = ReplicaRequirements::default();
    let at = format!("spec.{which}.resource");
    if let Some(cpu) = present(object, &format!("/spec/{which}/resource/cpu")) {
        requires
            .resource_request
            .insert("cpu".into(), quantity(cpu, &format!("{at}.cpu"))?);
    }
    if let Some(memory) = present(object, &format!("/spec/{which}/resource/memory")) {
        // `kube.getResourceQuantity` hands the rule a plain number of bytes: the quantity keeps
        // its value and loses its suffix (`2Gi` → `2147483648`, `2048m` → `2048m`).
        let nano = memory_nano(memory, &format!("{at}.memory"))?;
        requires.resource_request.insert(
            "memory".into(),
            Quantity::from(decimal(nano, true).as_str()),
        );
    }
    apply_pod_spec(
        object.pointer("/spec/podTemplate/spec"),
        false,
        &mut requires,
        "spec.podTemplate.spec",
    )?;
    Ok(Component {
        name: name.into(),
        replicas: count(replicas, &format!("{name} replicas"))?,
        replica_requirements: Some(requires),
    })
}

/// InterpretComponent: `jobmanager` and `taskmanager`.
pub(super) fn components(object: &Value) -> Result<Vec<Component>, PluginError> {
    let (jm, tm) = manager_counts(object);
    Ok(vec![
        manager(object, "jobManager", "jobmanager", jm)?,
        manager(object, "taskManager", "taskmanager", tm)?,
    ])
}

/// A CPU field as Lua's `math.max` reads it: a number or a numeric string.
fn cpu_number(v: &Value, at: &str) -> Result<f64, PluginError> {
    lua_number(Some(v)).ok_or_else(|| {
        fail(format!(
            "{at}: expected a number of CPUs to compare, got {v}"
        ))
    })
}

/// InterpretReplica (from before components existed): JobManager plus TaskManager replicas, each
/// with the larger of the two managers' CPU and memory, the pod template's node selector,
/// tolerations and priority class, and the object's namespace.
pub(super) fn replicas(object: &Value) -> Result<Replicas, PluginError> {
    let (jm, tm) = manager_counts(object);
    let replicas = count(jm + tm, "jobManager + taskManager replicas")?;
    let mut requires = ReplicaRequirements::default();

    let jm_cpu = present(object, "/spec/jobManager/resource/cpu");
    let tm_cpu = present(object, "/spec/taskManager/resource/cpu");
    let cpu = match (jm_cpu, tm_cpu) {
        (Some(j), Some(t)) => {
            let max = cpu_number(t, "spec.taskManager.resource.cpu")?
                .max(cpu_number(j, "spec.jobManager.resource.cpu")?);
            let n = serde_json::Number::from_f64(max)
                .ok_or_else(|| fail("spec.*.resource.cpu: not a finite number"))?;
            Some(Value::Number(n))
        }
        (Some(one), None) | (None, Some(one)) => Some(one.clone()),
        (None, None) => None,
    };
    if let Some(cpu) = cpu {
        requires
            .resource_request
            .insert("cpu".into(), quantity(&cpu, "spec.*.resource.cpu")?);
    }

    let jm_mem = present(object, "/spec/jobManager/resource/memory");
    let tm_mem = present(object, "/spec/taskManager/resource/memory");
    let memory = match (jm_mem, tm_mem) {
        (Some(j), Some(t)) => {
            if memory_nano(j, "spec.jobManager.resource.memory")?
                > memory_nano(t, "spec.taskManager.resource.memory")?
            {
                Some(j)
            } else {
                Some(t)
            }
        }
        (Some(one), None) | (None, Some(one)) => Some(one),
        (None, None) => None,
    };
    if let Some(memory) = memory {
        requires
            .resource_request
            .insert("memory".into(), quantity(memory, "spec.*.resource.memory")?);
    }

    apply_pod_spec(
        object.pointer("/spec/podTemplate/spec"),
        false,
        &mut requires,
        "spec.podTemplate.spec",
    )?;
    if let Some(ns) = object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
    {
        requires.namespace = ns.to_owned();
    }
    Ok(Replicas {
        replicas,
        requirements: Some(requires),
    })
}
