//! The batch and training kinds whose components are pod templates: Volcano Job tasks, MPIJob,
//! TFJob and PyTorchJob replica specs, Ray head and worker groups. Each component's requirements
//! are Karmada's `GenerateReplicaRequirements` of its template.

use flotilla_api::interpreter::Component;
use flotilla_core::error::PluginError;
use serde_json::Value;

use super::{MAX_COMPONENTS, count, count_at, fail, lua_number, template_requirements};

fn list<'a>(v: Option<&'a Value>, at: &str) -> Result<&'a [Value], PluginError> {
    match v {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(a)) if a.len() > MAX_COMPONENTS => Err(fail(format!(
            "{at}: {} entries, more than the {MAX_COMPONENTS} a workload may have",
            a.len()
        ))),
        Some(Value::Array(a)) => Ok(a),
        Some(other) => Err(fail(format!("{at}: expected a list, got {}", kind(other)))),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// A pod template (`template:`), which must be an object when present.
fn template<'a>(v: &'a Value, at: &str) -> Result<Option<&'a Value>, PluginError> {
    match v.get("template") {
        None | Some(Value::Null) => Ok(None),
        Some(t @ Value::Object(_)) => Ok(Some(t)),
        Some(other) => Err(fail(format!(
            "{at}.template: expected a pod template, got {}",
            kind(other)
        ))),
    }
}

fn name_or(v: &Value, key: &str, default: impl FnOnce() -> String) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map_or_else(default, str::to_owned)
}

/// Volcano Job: one component per `spec.tasks` entry, named after the task (`task-<index>` when
/// unnamed, from 0), with `minAvailable` replicas (default 1): the gang that must run together.
pub(super) fn volcano(object: &Value) -> Result<Vec<Component>, PluginError> {
    let tasks = list(object.pointer("/spec/tasks"), "spec.tasks")?;
    tasks
        .iter()
        .enumerate()
        .map(|(i, task)| {
            let at = format!("spec.tasks[{i}]");
            let replicas = match lua_number(task.get("minAvailable")) {
                None => 1,
                Some(f) => count(f, &format!("{at}.minAvailable"))?,
            };
            // `kube.accuratePodRequirements` needs the template.
            let template = template(task, &at)?
                .ok_or_else(|| fail(format!("{at}.template: a task needs a pod template")))?;
            Ok(Component {
                name: name_or(task, "name", || format!("task-{i}")),
                replicas,
                replica_requirements: template_requirements(template),
            })
        })
        .collect()
}

/// MPIJob: one component per `spec.mpiReplicaSpecs` entry with a template, named after its key
/// (`Launcher`, `Worker`), with `replicas` (default 1, 0 for the worker). Entries come in key
/// order (Karmada walks a Lua table, whose order is unspecified).
pub(super) fn mpi(object: &Value) -> Result<Vec<Component>, PluginError> {
    let specs = match object.pointer("/spec/mpiReplicaSpecs") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(m)) if m.len() > MAX_COMPONENTS => {
            return Err(fail(format!(
                "spec.mpiReplicaSpecs: {} entries, more than the {MAX_COMPONENTS} a workload may have",
                m.len()
            )));
        }
        Some(Value::Object(m)) => m,
        Some(other) => {
            return Err(fail(format!(
                "spec.mpiReplicaSpecs: expected an object, got {}",
                kind(other)
            )));
        }
    };
    let mut specs: Vec<(&String, &Value)> = specs.iter().collect();
    specs.sort_by(|a, b| a.0.cmp(b.0));
    let mut out = Vec::new();
    for (key, spec) in specs {
        let at = format!("spec.mpiReplicaSpecs.{key}");
        let Some(template) = template(spec, &at)? else {
            continue;
        };
        let default = i32::from(!key.eq_ignore_ascii_case("worker"));
        let replicas = match lua_number(spec.get("replicas")) {
            None => default,
            Some(f) => count(f, &format!("{at}.replicas"))?,
        };
        out.push(Component {
            name: key.clone(),
            replicas,
            replica_requirements: template_requirements(template),
        });
    }
    Ok(out)
}

/// TFJob and PyTorchJob: the replica specs under `pointer` present among `types` (key, component
/// name), in that order, with `replicas` (default 1). A spec without a template still counts,
/// without requirements (Karmada's empty table decodes to none).
pub(super) fn replica_specs(
    object: &Value,
    pointer: &str,
    types: &[(&str, &str)],
) -> Result<Vec<Component>, PluginError> {
    let mut out = Vec::new();
    for (key, name) in types {
        let p = format!("{pointer}/{key}");
        let Some(spec) = object.pointer(&p).filter(|v| !v.is_null()) else {
            continue;
        };
        let at = super::field(&p);
        let replicas = count_at(object, &format!("{p}/replicas"), 1)?;
        out.push(Component {
            name: (*name).to_owned(),
            replicas,
            replica_requirements: template(spec, &at)?.and_then(template_requirements),
        });
    }
    Ok(out)
}

/// RayCluster spec (a RayCluster's `spec`, a RayJob's `spec.rayClusterSpec`): `ray-head` (one
/// replica) when the head group has a template, then one component per worker group, named after
/// `groupName` (`worker-<n>` when unnamed, from 1), with `replicas` (default 0).
pub(super) fn ray(spec: Option<&Value>) -> Result<Vec<Component>, PluginError> {
    let Some(spec) = spec.filter(|v| !v.is_null()) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    if let Some(head) = spec.get("headGroupSpec").filter(|v| !v.is_null())
        && let Some(t) = template(head, "headGroupSpec")?
    {
        out.push(Component {
            name: "ray-head".into(),
            replicas: 1,
            replica_requirements: template_requirements(t),
        });
    }
    for (i, group) in list(spec.get("workerGroupSpecs"), "workerGroupSpecs")?
        .iter()
        .enumerate()
    {
        let at = format!("workerGroupSpecs[{i}]");
        // `workerGroup.replicas or 0`: the number as it is, no string conversion.
        let replicas = match group.get("replicas") {
            None | Some(Value::Null) => 0,
            Some(Value::Number(n)) => {
                count(n.as_f64().unwrap_or(f64::NAN), &format!("{at}.replicas"))?
            }
            Some(other) => {
                return Err(fail(format!(
                    "{at}.replicas: expected a number, got {}",
                    kind(other)
                )));
            }
        };
        out.push(Component {
            name: name_or(group, "groupName", || format!("worker-{}", i + 1)),
            replicas,
            replica_requirements: template(group, &at)?.and_then(template_requirements),
        });
    }
    Ok(out)
}
