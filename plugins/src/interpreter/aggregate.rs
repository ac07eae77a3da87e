//! AggregateStatus: the members' statuses folded into the template (Karmada
//! `native/aggregatestatus.go`), plus the Deployment `Available`/`Progressing` conditions Flotilla
//! adds (see [`deployment_conditions`]).

use std::collections::BTreeSet;

use flotilla_api::work::AggregatedStatusItem;
use flotilla_core::error::PluginError;
use serde_json::{Map, Value, json};

use super::{array_at, fail, gvk, int_at, str_at};

/// Now, as an RFC 3339 time (condition timestamps).
fn now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    flotilla_core::time::format_rfc3339(secs)
}

/// The reported statuses (items without one are skipped, as Karmada's `item.Status == nil`).
fn reported(items: &[AggregatedStatusItem]) -> impl Iterator<Item = (&str, &Value)> {
    items
        .iter()
        .filter_map(|i| Some((i.cluster_name.as_str(), i.status.as_ref()?)))
}

/// A member status's integer field (0 when absent), an error when it is not an integer.
fn member_int(cluster: &str, status: &Value, field: &str) -> Result<i64, PluginError> {
    int_at(status, &format!("/{field}"))
        .map_err(|_| {
            fail(format!(
                "status of cluster {cluster}: {field} is not an integer"
            ))
        })
        .map(Option::unwrap_or_default)
}

/// The template's status object, created when absent.
fn status_mut(object: &mut Value) -> Result<&mut Map<String, Value>, PluginError> {
    let o = object
        .as_object_mut()
        .ok_or_else(|| fail("the object is not a JSON object"))?;
    let s = o
        .entry("status")
        .or_insert_with(|| Value::Object(Map::new()));
    if !s.is_object() {
        *s = Value::Object(Map::new());
    }
    s.as_object_mut()
        .ok_or_else(|| fail("status: expected an object"))
}

/// Put `v` at `field` of `status`: zero removes it unless it is always serialised (no
/// `omitempty` in the Go type).
fn put_int(status: &mut Map<String, Value>, field: &str, v: i64, always: bool) {
    if v == 0 && !always {
        status.remove(field);
    } else {
        status.insert(field.to_owned(), Value::from(v));
    }
}

/// A replicated workload's status (Deployment, ReplicaSet, StatefulSet, DaemonSet): the
/// `summed` fields added up over the members; `observedGeneration` moves to the template's
/// generation once every member reports the latest spec (`stale` says when one does not).
fn sum_workload(
    object: &Value,
    items: &[AggregatedStatusItem],
    summed: &[(&str, bool)],
    up_to_date: impl Fn(&Value, i64) -> Result<bool, PluginError>,
) -> Result<Value, PluginError> {
    let generation = int_at(object, "/metadata/generation")?.unwrap_or(0);
    let old_observed = int_at(object, "/status/observedGeneration")?.unwrap_or(0);
    let mut sums = vec![0i64; summed.len()];
    let mut current = 0usize;
    for (cluster, s) in reported(items) {
        if up_to_date(s, generation)? {
            current += 1;
        }
        for (i, (f, _)) in summed.iter().enumerate() {
            sums[i] = sums[i].saturating_add(member_int(cluster, s, f)?);
        }
    }
    let observed = if current == items.len() {
        generation
    } else {
        old_observed
    };
    let unchanged = observed == old_observed
        && summed
            .iter()
            .zip(&sums)
            .try_fold(true, |acc, ((f, _), v)| {
                Ok::<_, PluginError>(
                    acc && int_at(object, &format!("/status/{f}"))?.unwrap_or(0) == *v,
                )
            })?;
    if unchanged {
        return Ok(object.clone());
    }
    let mut out = object.clone();
    let status = status_mut(&mut out)?;
    put_int(status, "observedGeneration", observed, false);
    for ((f, always), v) in summed.iter().zip(sums) {
        put_int(status, f, v, *always);
    }
    Ok(out)
}

/// Whether a member's wrapped status reports the latest spec: its controller observed the
/// member copy's generation, and the copy carries the template's generation.
fn member_current(s: &Value, template_generation: i64) -> Result<bool, PluginError> {
    let n = |f: &str| int_at(s, &format!("/{f}")).map(Option::unwrap_or_default);
    Ok(n("observedGeneration")? >= n("generation")?
        && n("resourceTemplateGeneration")? >= template_generation)
}

pub(super) fn aggregate_status(
    object: &Value,
    items: &[AggregatedStatusItem],
) -> Result<Value, PluginError> {
    match gvk(object) {
        ("apps/v1", "Deployment") => {
            let mut out = sum_workload(
                object,
                items,
                &[
                    ("replicas", false),
                    ("readyReplicas", false),
                    ("updatedReplicas", false),
                    ("availableReplicas", false),
                    ("unavailableReplicas", false),
                ],
                member_current,
            )?;
            let targets: BTreeSet<&str> = items.iter().map(|i| i.cluster_name.as_str()).collect();
            if let Some(wanted) = deployment_conditions(object, &targets, items) {
                let current = object.pointer("/status/conditions");
                let conditions = merge_conditions(current, &wanted, &now());
                if current != Some(&conditions) {
                    status_mut(&mut out)?.insert("conditions".into(), conditions);
                }
            }
            Ok(out)
        }
        ("apps/v1", "ReplicaSet") => sum_workload(
            object,
            items,
            &[
                ("replicas", true),
                ("readyReplicas", false),
                ("availableReplicas", false),
            ],
            member_current,
        ),
        // Karmada compares the member's template generation with the member's own generation
        // here (not the template's); kept as it is.
        ("apps/v1", "StatefulSet") => sum_workload(
            object,
            items,
            &[
                ("availableReplicas", true),
                ("currentReplicas", false),
                ("readyReplicas", false),
                ("replicas", true),
                ("updatedReplicas", false),
            ],
            |s, _| {
                let n = |f: &str| int_at(s, &format!("/{f}")).map(Option::unwrap_or_default);
                Ok(n("observedGeneration")? >= n("generation")?
                    && n("resourceTemplateGeneration")? >= n("generation")?)
            },
        ),
        ("apps/v1", "DaemonSet") => sum_workload(
            object,
            items,
            &[
                ("currentNumberScheduled", true),
                ("desiredNumberScheduled", true),
                ("numberAvailable", false),
                ("numberMisscheduled", true),
                ("numberReady", true),
                ("updatedNumberScheduled", false),
                ("numberUnavailable", false),
            ],
            member_current,
        ),
        ("v1", "Service") => {
            if str_at(object, "/spec/type") != "LoadBalancer" {
                return Ok(object.clone());
            }
            replace_status(object, load_balancer_status(items)?)
        }
        ("networking.k8s.io/v1", "Ingress") => replace_status(object, load_balancer_status(items)?),
        ("batch/v1", "Job") => aggregate_job(object, items),
        ("batch/v1", "CronJob") => aggregate_cron_job(object, items),
        ("v1", "Pod") => aggregate_pod(object, items),
        ("v1", "PersistentVolume") => {
            let phase = worst_phase(
                items,
                "Pending",
                &["Failed", "Pending", "Available", "Bound", "Released"],
            );
            replace_status(object, phase_status(phase))
        }
        ("v1", "PersistentVolumeClaim") => {
            let mut phase = "Bound".to_owned();
            for (_, s) in reported(items) {
                let p = str_at(s, "/phase");
                if p == "Lost" {
                    phase = "Lost".into();
                    break;
                }
                if p != "Bound" {
                    phase = p.to_owned();
                }
            }
            replace_status(object, phase_status(Some(phase.as_str())))
        }
        ("policy/v1", "PodDisruptionBudget") => {
            let fields = [
                "disruptionsAllowed",
                "currentHealthy",
                "desiredHealthy",
                "expectedPods",
            ];
            let mut sums = [0i64; 4];
            let mut disrupted = Map::new();
            for (cluster, s) in reported(items) {
                for (i, f) in fields.iter().enumerate() {
                    sums[i] = sums[i].saturating_add(member_int(cluster, s, f)?);
                }
                if let Some(pods) = s.get("disruptedPods").and_then(Value::as_object) {
                    for (pod, t) in pods {
                        disrupted.insert(format!("{cluster}/{pod}"), t.clone());
                    }
                }
            }
            let mut status = Map::new();
            if !disrupted.is_empty() {
                status.insert("disruptedPods".into(), Value::Object(disrupted));
            }
            for (f, v) in fields.iter().zip(sums) {
                status.insert((*f).to_owned(), Value::from(v));
            }
            replace_status(object, status)
        }
        ("autoscaling/v2", "HorizontalPodAutoscaler") => {
            let (mut current, mut desired) = (0i64, 0i64);
            for (cluster, s) in reported(items) {
                current = current.saturating_add(member_int(cluster, s, "currentReplicas")?);
                desired = desired.saturating_add(member_int(cluster, s, "desiredReplicas")?);
            }
            let mut status = Map::new();
            put_int(&mut status, "currentReplicas", current, false);
            put_int(&mut status, "desiredReplicas", desired, true);
            replace_status(object, status)
        }
        (api_version, kind) => Err(fail(format!(
            "AggregateStatus is not implemented for {api_version} {kind}"
        ))),
    }
}

/// `object` with its whole status replaced by `status` (unchanged when equal).
fn replace_status(object: &Value, status: Map<String, Value>) -> Result<Value, PluginError> {
    let status = Value::Object(status);
    let empty = Value::Object(Map::new());
    if object.get("status").unwrap_or(&empty) == &status {
        return Ok(object.clone());
    }
    let mut out = object.clone();
    out.as_object_mut()
        .ok_or_else(|| fail("the object is not a JSON object"))?
        .insert("status".into(), status);
    Ok(out)
}

fn phase_status(phase: Option<&str>) -> Map<String, Value> {
    let mut m = Map::new();
    if let Some(p) = phase.filter(|p| !p.is_empty()) {
        m.insert("phase".into(), Value::from(p));
    }
    m
}

/// The first phase of `order` any member is in (a member without status counts as `missing`).
fn worst_phase<'a>(
    items: &[AggregatedStatusItem],
    missing: &str,
    order: &[&'a str],
) -> Option<&'a str> {
    let phases: BTreeSet<&str> = items
        .iter()
        .map(|i| i.status.as_ref().map_or(missing, |s| str_at(s, "/phase")))
        .collect();
    order.iter().copied().find(|p| phases.contains(p))
}

/// One load-balancer ingress being merged: host name, IP, IP mode, its other fields, its ports.
type Ingress = (
    String,
    String,
    Option<String>,
    Map<String, Value>,
    Vec<Value>,
);

/// The members' load-balancer ingresses, deduplicated (ports merged per address) and sorted as
/// Karmada's `DedupeAndSort*LoadBalancerIngress`: host names first and in order, then IPs, then
/// IP modes (none last); ports by number, protocol, error (none first).
fn load_balancer_status(items: &[AggregatedStatusItem]) -> Result<Map<String, Value>, PluginError> {
    let mut merged: Vec<Ingress> = Vec::new();
    for (_, s) in reported(items) {
        for ing in array_at(s, "/loadBalancer/ingress") {
            let Some(fields) = ing.as_object() else {
                return Err(fail("status.loadBalancer.ingress: expected objects"));
            };
            let host = str_at(ing, "/hostname").to_owned();
            let ip = str_at(ing, "/ip").to_owned();
            let mode = ing.get("ipMode").and_then(Value::as_str).map(str::to_owned);
            let ports = array_at(ing, "/ports");
            let mut rest = fields.clone();
            rest.remove("ports");
            match merged
                .iter_mut()
                .find(|(h, i, m, _, _)| *h == host && *i == ip && *m == mode)
            {
                Some(entry) => {
                    entry.3 = rest;
                    for p in ports {
                        if !entry.4.contains(p) {
                            entry.4.push(p.clone());
                        }
                    }
                }
                None => {
                    let mut unique: Vec<Value> = Vec::new();
                    for p in ports {
                        if !unique.contains(p) {
                            unique.push(p.clone());
                        }
                    }
                    merged.push((host, ip, mode, rest, unique));
                }
            }
        }
    }
    for entry in &mut merged {
        entry.4.sort_by(|a, b| {
            let key = |p: &Value| {
                (
                    p.get("port").and_then(Value::as_i64).unwrap_or(0),
                    str_at(p, "/protocol").to_owned(),
                    p.get("error").and_then(Value::as_str).map(str::to_owned),
                )
            };
            key(a).cmp(&key(b))
        });
    }
    merged.sort_by(|a, b| {
        let host = |h: &str| (h.is_empty(), h.to_owned());
        (host(&a.0), &a.1, a.2.is_none(), &a.2).cmp(&(host(&b.0), &b.1, b.2.is_none(), &b.2))
    });
    let ingress: Vec<Value> = merged
        .into_iter()
        .map(|(_, _, _, mut rest, ports)| {
            if !ports.is_empty() {
                rest.insert("ports".into(), Value::Array(ports));
            }
            Value::Object(rest)
        })
        .collect();
    let mut lb = Map::new();
    if !ingress.is_empty() {
        lb.insert("ingress".into(), Value::Array(ingress));
    }
    let mut status = Map::new();
    status.insert("loadBalancer".into(), Value::Object(lb));
    Ok(status)
}

/// The Complete/Failed condition type of a finished Job status, if any.
fn job_finished(status: &Value) -> Option<&str> {
    array_at(status, "/conditions").iter().find_map(|c| {
        let t = str_at(c, "/type");
        ((t == "Complete" || t == "Failed") && str_at(c, "/status") == "True").then_some(t)
    })
}

/// Karmada's `ParsingJobStatus`: counts summed; `Failed` when a member's Job failed, `Complete`
/// (and `SuccessCriteriaMet` when every member met it) when all completed; the earliest start
/// and the latest completion once every member reports one.
fn aggregate_job(object: &Value, items: &[AggregatedStatusItem]) -> Result<Value, PluginError> {
    let empty = Value::Object(Map::new());
    let own = object.get("status").unwrap_or(&empty);
    if job_finished(own).is_some() {
        return Ok(object.clone());
    }
    let (mut active, mut succeeded, mut failed) = (0i64, 0i64, 0i64);
    let mut failed_in = Vec::new();
    let (mut complete, mut criteria_met, mut started, mut completed) = (0, 0, 0, 0);
    let mut start: Option<String> = None;
    let mut completion: Option<String> = None;
    for (cluster, s) in reported(items) {
        active = active.saturating_add(member_int(cluster, s, "active")?);
        succeeded = succeeded.saturating_add(member_int(cluster, s, "succeeded")?);
        failed = failed.saturating_add(member_int(cluster, s, "failed")?);
        match job_finished(s) {
            Some("Complete") => complete += 1,
            Some(_) => failed_in.push(cluster),
            None => {}
        }
        if array_at(s, "/conditions")
            .iter()
            .any(|c| str_at(c, "/type") == "SuccessCriteriaMet" && str_at(c, "/status") == "True")
        {
            criteria_met += 1;
        }
        // RFC 3339 UTC times order as strings.
        let member_start = s.get("startTime").and_then(Value::as_str);
        if member_start.is_some() {
            started += 1;
        }
        // As Karmada's loop: the first start seen, or any earlier one.
        if start.is_none() || member_start.is_some_and(|t| Some(t) < start.as_deref()) {
            start = member_start.map(str::to_owned);
        }
        if let Some(t) = s.get("completionTime").and_then(Value::as_str) {
            completed += 1;
            if completion.as_deref().is_none_or(|c| c < t) {
                completion = Some(t.to_owned());
            }
        }
    }
    let now = now();
    let condition = |type_: &str, reason: &str, message: String| {
        json!({"type": type_, "status": "True", "lastProbeTime": now, "lastTransitionTime": now,
               "reason": reason, "message": message})
    };
    let mut conditions = Vec::new();
    if !failed_in.is_empty() {
        conditions.push(condition(
            "Failed",
            "JobFailed",
            format!(
                "Job executed failed in member clusters {}",
                failed_in.join(",")
            ),
        ));
    }
    if complete == items.len() && complete > 0 {
        conditions.push(condition("Complete", "Completed", "Job completed".into()));
        if criteria_met == items.len() {
            conditions.push(condition(
                "SuccessCriteriaMet",
                "CompletionsReached",
                "All member clusters have met success criteria".into(),
            ));
        }
    }
    let mut status = Map::new();
    if !conditions.is_empty() {
        status.insert("conditions".into(), Value::Array(conditions));
    }
    let start_time = match own.get("startTime").filter(|v| !v.is_null()) {
        Some(t) => Some(t.clone()),
        None if started == items.len() && started > 0 => start.map(Value::from),
        None => None,
    };
    if let Some(t) = start_time {
        status.insert("startTime".into(), t);
    }
    if let Some(t) = completion.filter(|_| completed == items.len()) {
        status.insert("completionTime".into(), Value::from(t));
    }
    put_int(&mut status, "active", active, false);
    put_int(&mut status, "succeeded", succeeded, false);
    put_int(&mut status, "failed", failed, false);
    replace_status(object, status)
}

/// CronJob: the members' active Jobs listed together, the latest schedule and success times.
fn aggregate_cron_job(
    object: &Value,
    items: &[AggregatedStatusItem],
) -> Result<Value, PluginError> {
    let mut active: Vec<Value> = Vec::new();
    let mut last: [Option<String>; 2] = [None, None];
    for (_, s) in reported(items) {
        active.extend(array_at(s, "/active").iter().cloned());
        for (i, f) in ["lastScheduleTime", "lastSuccessfulTime"]
            .iter()
            .enumerate()
        {
            if let Some(t) = s.get(*f).and_then(Value::as_str)
                && last[i].as_deref().is_none_or(|l| l < t)
            {
                last[i] = Some(t.to_owned());
            }
        }
    }
    let mut wanted = Map::new();
    if !active.is_empty() {
        wanted.insert("active".into(), Value::Array(active));
    }
    for (i, f) in ["lastScheduleTime", "lastSuccessfulTime"]
        .iter()
        .enumerate()
    {
        if let Some(t) = &last[i] {
            wanted.insert((*f).to_owned(), Value::from(t.as_str()));
        }
    }
    let empty = Map::new();
    let own = object
        .get("status")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let fields = ["active", "lastScheduleTime", "lastSuccessfulTime"];
    if fields.iter().all(|f| own.get(*f) == wanted.get(*f)) {
        return Ok(object.clone());
    }
    let mut out = object.clone();
    let status = status_mut(&mut out)?;
    for f in fields {
        match wanted.remove(f) {
            Some(v) => status.insert(f.to_owned(), v),
            None => status.remove(f),
        };
    }
    Ok(out)
}

/// Pod: the worst phase (Failed, Pending, Running, Succeeded; a member without status counts as
/// Pending) and every member's container readiness and state.
fn aggregate_pod(object: &Value, items: &[AggregatedStatusItem]) -> Result<Value, PluginError> {
    if items.is_empty() {
        return Ok(object.clone());
    }
    let summary = |c: &Value| {
        json!({"name": "", "state": c.get("state").cloned().unwrap_or_else(|| json!({})),
               "lastState": {}, "ready": c.get("ready").and_then(Value::as_bool).unwrap_or(false),
               "restartCount": 0, "image": "", "imageID": ""})
    };
    let mut containers = Vec::new();
    let mut init = Vec::new();
    for (_, s) in reported(items) {
        containers.extend(array_at(s, "/containerStatuses").iter().map(summary));
        init.extend(array_at(s, "/initContainerStatuses").iter().map(summary));
    }
    let mut status = phase_status(worst_phase(
        items,
        "Pending",
        &["Failed", "Pending", "Running", "Succeeded"],
    ));
    if !init.is_empty() {
        status.insert("initContainerStatuses".into(), Value::Array(init));
    }
    if !containers.is_empty() {
        status.insert("containerStatuses".into(), Value::Array(containers));
    }
    replace_status(object, status)
}

/// `value` (an int or a `"N%"` string) scaled against `total`, as apimachinery's
/// `GetScaledValueFromIntOrPercent`; `None` when it is neither.
fn scaled(value: &Value, total: i64, round_up: bool) -> Option<i64> {
    if let Some(n) = value.as_i64() {
        return Some(n);
    }
    let percent: i64 = value.as_str()?.strip_suffix('%')?.parse().ok()?;
    let product = percent.saturating_mul(total);
    Some(if round_up {
        product.saturating_add(99).div_euclid(100)
    } else {
        product.div_euclid(100)
    })
}

/// How many of a Deployment's desired replicas may be unavailable while it still counts as
/// available: kube's `deploymentutil.MaxUnavailable` (0 for `Recreate` and for no replicas;
/// rolling updates default both `maxSurge` and `maxUnavailable` to 25%, surge rounded up and
/// unavailability down, and at least one of them must allow a step).
pub fn max_unavailable(deployment: &Value) -> i64 {
    let desired = deployment
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let strategy = deployment.pointer("/spec/strategy");
    let kind = strategy
        .and_then(|s| s.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("RollingUpdate");
    if kind != "RollingUpdate" || desired <= 0 {
        return 0;
    }
    let default = Value::from("25%");
    let rolling = strategy.and_then(|s| s.get("rollingUpdate"));
    let field = |f: &str| rolling.and_then(|r| r.get(f)).unwrap_or(&default);
    let surge = scaled(field("maxSurge"), desired, true).unwrap_or(0);
    let mut unavailable = scaled(field("maxUnavailable"), desired, false).unwrap_or(0);
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    unavailable.clamp(0, desired)
}

/// The member status condition of `type_`, if any.
fn member_condition<'a>(status: &'a Value, type_: &str) -> Option<&'a Value> {
    status
        .get("conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
}

fn text<'a>(v: &'a Value, field: &str) -> &'a str {
    v.get(field).and_then(Value::as_str).unwrap_or("")
}

/// Whether a member's Deployment has finished rolling out: its own `Progressing` condition says
/// `NewReplicaSetAvailable`, or, for a member that reports no such condition (the reflected
/// status carries none), its controller has observed it and every replica is updated and
/// available.
fn member_complete(status: &Value) -> bool {
    if let Some(c) = member_condition(status, "Progressing") {
        return text(c, "status") == "True" && text(c, "reason") == "NewReplicaSetAvailable";
    }
    let n = |f: &str| status.get(f).and_then(Value::as_i64).unwrap_or(0);
    status.get("observedGeneration").is_some()
        && n("replicas") == n("updatedReplicas")
        && n("replicas") == n("availableReplicas")
        && n("unavailableReplicas") == 0
}

/// A Deployment condition: type, status, reason, message.
pub type Summary = (&'static str, &'static str, String, String);

/// The `Available` and `Progressing` conditions of a Deployment template from its members'
/// status, or `None` while no member reports any. A Flotilla addition to Karmada's aggregation.
///
/// Karmada's default interpreter sums the replica counts and leaves the template's conditions
/// alone, so `kubectl wait --for=condition=Available` would never return. These summarise the
/// members as kube's deployment controller would a single Deployment:
/// - `Available` is True (`MinimumReplicasAvailable`) when the summed `availableReplicas` reach
///   the template's `spec.replicas` less [`max_unavailable`], else False
///   (`MinimumReplicasUnavailable`).
/// - `Progressing` is False with the member's reason when a member reports its own
///   `Progressing` False (such as `ProgressDeadlineExceeded`); True with `NewReplicaSetAvailable`
///   once every target cluster reports a finished rollout; True with `ReplicaSetUpdated` until
///   then.
pub fn deployment_conditions(
    template: &Value,
    targets: &BTreeSet<&str>,
    items: &[AggregatedStatusItem],
) -> Option<[Summary; 2]> {
    let reporting: Vec<(&str, &Value)> = reported(items).filter(|(_, s)| s.is_object()).collect();
    if reporting.is_empty() {
        return None;
    }
    let desired = template
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let available: i64 = reporting
        .iter()
        .filter_map(|(_, s)| s.get("availableReplicas").and_then(Value::as_i64))
        .sum();
    let availability = if available >= desired - max_unavailable(template) {
        (
            "Available",
            "True",
            "MinimumReplicasAvailable".to_owned(),
            "Deployment has minimum availability.".to_owned(),
        )
    } else {
        (
            "Available",
            "False",
            "MinimumReplicasUnavailable".to_owned(),
            "Deployment does not have minimum availability.".to_owned(),
        )
    };
    let stalled = reporting.iter().find_map(|(cluster, s)| {
        let c = member_condition(s, "Progressing")?;
        (text(c, "status") == "False").then_some((*cluster, c))
    });
    let complete = !targets.is_empty()
        && targets.iter().all(|t| {
            reporting
                .iter()
                .any(|(cluster, s)| cluster == t && member_complete(s))
        });
    let progress = match stalled {
        Some((cluster, c)) => (
            "Progressing",
            "False",
            match text(c, "reason") {
                "" => "ProgressDeadlineExceeded".to_owned(),
                r => r.to_owned(),
            },
            format!("member cluster {cluster}: {}", text(c, "message")),
        ),
        None if complete => (
            "Progressing",
            "True",
            "NewReplicaSetAvailable".to_owned(),
            "Deployment has successfully progressed in every member cluster.".to_owned(),
        ),
        None => (
            "Progressing",
            "True",
            "ReplicaSetUpdated".to_owned(),
            "Deployment is progressing in its member clusters.".to_owned(),
        ),
    };
    Some([availability, progress])
}

/// `current` conditions with `wanted` put in: an unchanged condition is kept as it is (times
/// included); a changed one gets `now` as its update time, and as its transition time when its
/// status changed. Conditions of other types are kept.
pub fn merge_conditions(current: Option<&Value>, wanted: &[Summary], now: &str) -> Value {
    let mut out: Vec<Value> = current
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (type_, status, reason, message) in wanted {
        let old = out.iter().position(|c| text(c, "type") == *type_);
        let same = |c: &Value| {
            text(c, "status") == *status
                && text(c, "reason") == reason.as_str()
                && text(c, "message") == message.as_str()
        };
        if old.is_some_and(|i| same(&out[i])) {
            continue;
        }
        let transition = match old.map(|i| &out[i]) {
            Some(c) if text(c, "status") == *status => c
                .get("lastTransitionTime")
                .cloned()
                .unwrap_or_else(|| Value::from(now)),
            _ => Value::from(now),
        };
        let cond = json!({
            "type": type_, "status": status, "reason": reason, "message": message,
            "lastUpdateTime": now, "lastTransitionTime": transition,
        });
        match old {
            Some(i) => out[i] = cond,
            None => out.push(cond),
        }
    }
    Value::Array(out)
}
