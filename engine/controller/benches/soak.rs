//! Soak: minutes of churn against the whole control plane in one process, then an account of
//! every object. Run as a benchmark, never in CI.
//!
//! The setup is `propagation`'s (the embedded server over a store on disk, simulated members and
//! every controller with `flotilla up`'s defaults). The members are split into teams of 4; each
//! team has a PropagationPolicy dividing its Deployments over the team with equal static weights
//! and tolerating `not-ready`/`unreachable` for a few seconds, so a member that goes away is
//! failed over from.
//!
//! Churn, for `FLOTILLA_BENCH_MINUTES`: `FLOTILLA_BENCH_OPS` operations a second, each one of
//! create a Deployment (while fewer than `FLOTILLA_BENCH_POOL` exist), scale one (1–8 replicas)
//! or delete one (while more than half the pool exist); every `FLOTILLA_BENCH_FLIP_SECS` one
//! member's `Ready` goes `Unknown` for half that time, then back to `True`. Every minute a line
//! reports RSS, reconciles and the objects stored.
//!
//! Then the members are all Ready again, the churn stops, and once the controllers are idle the
//! bench accounts for everything: one ResourceBinding per Deployment and none for a deleted one;
//! per binding, exactly one Work per target cluster, carrying the binding's current replicas, and
//! no other Work; per member, exactly the copies its Works describe. Anything else is printed
//! and the bench exits non-zero. RSS is reported per minute and compared between the first and
//! the last third of the churn.
//!
//! Knobs: `FLOTILLA_BENCH_MINUTES` (30), `FLOTILLA_BENCH_MEMBERS` (20), `FLOTILLA_BENCH_POOL`
//! (400), `FLOTILLA_BENCH_OPS` (20), `FLOTILLA_BENCH_FLIP_SECS` (60), `FLOTILLA_BENCH_SEED` (1).

/// The `flotilla` binary's allocator, so the control plane here allocates as it does there.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use flotilla_api::labels;
use flotilla_controller::api_resource;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

const TEAM: usize = 4;

/// A small deterministic generator (xorshift64*), so a run can be repeated.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n.max(1) as u64).unwrap_or(0)
    }
}

fn main() {
    let minutes: u64 = common::knob("FLOTILLA_BENCH_MINUTES", 30);
    let members: usize = common::knob("FLOTILLA_BENCH_MEMBERS", 20);
    let pool: usize = common::knob("FLOTILLA_BENCH_POOL", 400);
    let ops: u64 = common::knob("FLOTILLA_BENCH_OPS", 20);
    let flip_secs: u64 = common::knob("FLOTILLA_BENCH_FLIP_SECS", 60);
    let seed: u64 = common::knob("FLOTILLA_BENCH_SEED", 1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    println!(
        "soak: {minutes} min of churn, {members} members, pool of {pool} Deployments, {ops} ops/s, a member flips every {flip_secs} s, seed {seed}; load average {}",
        common::loadavg()
    );
    let ok = rt.block_on(run(Knobs {
        duration: Duration::from_secs(minutes * 60),
        members,
        pool,
        ops,
        flip: Duration::from_secs(flip_secs.max(2)),
        seed,
    }));
    println!("done; load average {}", common::loadavg());
    if !ok {
        std::process::exit(1);
    }
}

struct Knobs {
    duration: Duration,
    members: usize,
    pool: usize,
    ops: u64,
    flip: Duration,
    seed: u64,
}

fn dynamic(client: &Client, api_version: &str, kind: &str, ns: Option<&str>) -> Api<DynamicObject> {
    let res = api_resource(api_version, kind);
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &res),
        None => Api::all_with(client.clone(), &res),
    }
}

async fn set_ready(control: &Client, cluster: &str, status: &str) {
    let patch = json!({"status": {"conditions": [{"type": "Ready", "status": status,
        "reason": "Soak", "message": "set by the soak benchmark"}]}});
    if let Err(e) = dynamic(control, "cluster.karmada.io/v1alpha1", "Cluster", None)
        .patch_status(cluster, &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        println!("  cluster {cluster}: setting Ready={status} failed: {e}");
    }
}

#[allow(clippy::too_many_lines)]
async fn run(k: Knobs) -> bool {
    let env = common::start(k.members).await;
    let (rss_base, _) = common::rss_mib();
    println!("  started; RSS with idle members and controllers: {rss_base:.1} MiB");
    let teams = (k.members / TEAM).max(1);
    for t in 0..teams {
        let team = format!("t{t:02}");
        let mut placement = common::divided_over(&common::team_members(t, TEAM));
        placement["clusterTolerations"] = json!([
            {"key": "cluster.karmada.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 3},
            {"key": "cluster.karmada.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 3},
        ]);
        common::apply(
            &env.control,
            &common::policy(&format!("team-{team}"), "team", &team, placement),
        )
        .await;
    }
    common::quiesce(&env, Duration::from_millis(300), Duration::from_secs(10)).await;

    let deployments = dynamic(&env.control, "apps/v1", "Deployment", Some("default"));
    // name → replicas, as the bench last wrote them.
    let mut live: BTreeMap<String, i64> = BTreeMap::new();
    let mut next_id = 0usize;
    let mut rng = Rng(k.seed.max(1));
    let (mut creates, mut scales, mut deletes, mut flips, mut failed) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    let t0 = Instant::now();
    let end = t0 + k.duration;
    let period = Duration::from_micros(1_000_000 / k.ops.max(1));
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut next_report = t0 + Duration::from_secs(60);
    let mut next_flip = t0 + k.flip;
    let mut down: Option<(String, Instant)> = None;
    let mut rss_samples: Vec<(f64, f64)> = Vec::new();
    let mut last = (common::reconciles(&env), common::reconcile_seconds(&env));
    while Instant::now() < end {
        tick.tick().await;
        let now = Instant::now();
        if let Some((m, until)) = &down
            && now >= *until
        {
            set_ready(&env.control, m, "True").await;
            down = None;
        }
        if now >= next_flip {
            next_flip += k.flip;
            if down.is_none() {
                let m = format!("member{}", rng.below(k.members) + 1);
                set_ready(&env.control, &m, "Unknown").await;
                flips += 1;
                down = Some((m, now + k.flip / 2));
            }
        }
        let roll = rng.below(10);
        let res = if live.len() < k.pool / 2 || (roll < 4 && live.len() < k.pool) {
            let name = format!("soak-{next_id:06}");
            next_id += 1;
            let replicas = i64::try_from(rng.below(8) + 1).unwrap_or(1);
            let team = format!("t{:02}", next_id % teams);
            let d = common::deployment(&name, replicas, &[("team", team.as_str())]);
            let r = deployments
                .patch(
                    &name,
                    &PatchParams::apply("soak").force(),
                    &Patch::Apply(&d),
                )
                .await
                .map(drop);
            if r.is_ok() {
                live.insert(name, replicas);
                creates += 1;
            }
            r
        } else if roll < 8 {
            let i = rng.below(live.len());
            let name = live.keys().nth(i).cloned().unwrap_or_default();
            let replicas = i64::try_from(rng.below(8) + 1).unwrap_or(1);
            let r = deployments
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"replicas": replicas}})),
                )
                .await
                .map(drop);
            if r.is_ok() {
                live.insert(name, replicas);
                scales += 1;
            }
            r
        } else {
            let i = rng.below(live.len());
            let name = live.keys().nth(i).cloned().unwrap_or_default();
            let r = deployments
                .delete(&name, &DeleteParams::default())
                .await
                .map(drop);
            if r.is_ok() {
                live.remove(&name);
                deletes += 1;
            }
            r
        };
        if let Err(e) = res {
            failed += 1;
            if failed <= 10 {
                println!("  operation failed: {e}");
            }
        }
        if now >= next_report {
            next_report += Duration::from_secs(60);
            let (rss, hwm) = common::rss_mib();
            let minute = t0.elapsed().as_secs_f64() / 60.0;
            rss_samples.push((minute, rss));
            let (bindings, works) = (
                count(&env.control, "work.karmada.io/v1alpha2", "ResourceBinding").await,
                count(&env.control, "work.karmada.io/v1alpha1", "Work").await,
            );
            println!(
                "  {minute:>5.1} min: {} Deployments, {bindings} bindings, {works} Works; ops {creates} create / {scales} scale / {deletes} delete / {failed} failed, {flips} flips; RSS {rss:.0} MiB (VmHWM {hwm:.0}); store {:.0} MiB at revision {}; load {}",
                live.len(),
                mib(common::disk_bytes(env.dir.path())),
                env.store.current_rev(),
                common::loadavg(),
            );
            println!(
                "           reconciles in the minute: {}",
                common::activity(&env, &last.0, &last.1)
            );
            last = (common::reconciles(&env), common::reconcile_seconds(&env));
        }
    }
    if let Some((m, _)) = down.take() {
        set_ready(&env.control, &m, "True").await;
    }
    println!(
        "  churn over after {:.1} min: {creates} creates, {scales} scales, {deletes} deletes ({failed} failed), {flips} member flips; {} Deployments remain",
        t0.elapsed().as_secs_f64() / 60.0,
        live.len()
    );
    let settle = Instant::now();
    let idle = common::quiesce(&env, Duration::from_secs(5), Duration::from_secs(600)).await;
    println!(
        "  controllers idle for 5 s: {idle}, {:.1} s after the churn",
        settle.elapsed().as_secs_f64()
    );
    let (rss, hwm) = common::rss_mib();
    println!("  RSS after settling {rss:.1} MiB (VmHWM {hwm:.1} MiB)");
    if rss_samples.len() >= 3 {
        let third = rss_samples.len() / 3;
        let mean = |s: &[(f64, f64)]| s.iter().map(|p| p.1).sum::<f64>() / s.len() as f64;
        let (first, last) = (
            mean(&rss_samples[..third]),
            mean(&rss_samples[rss_samples.len() - third..]),
        );
        println!(
            "  RSS over the churn: first third {first:.0} MiB, last third {last:.0} MiB ({:+.1} %)",
            (last / first - 1.0) * 100.0
        );
    }
    // Quiet for 5 s more: nothing is left to do.
    let before = common::reconciles(&env);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let churn: u64 = common::reconciles(&env)
        .iter()
        .zip(&before)
        .map(|(a, b)| a - b)
        .sum();
    println!("  reconciles in 5 s of idle after settling: {churn}");
    let ok = account(&env, &live).await;
    println!(
        "  account: {}",
        if ok {
            "every object accounted for"
        } else {
            "MISMATCH"
        }
    );
    ok && churn == 0
}

async fn count(client: &Client, api_version: &str, kind: &str) -> usize {
    dynamic(client, api_version, kind, None)
        .list_metadata(&ListParams::default())
        .await
        .map_or(0, |l| l.items.len())
}

/// Check every binding, Work and member copy against `live` (Deployment → replicas); print what
/// does not match.
async fn account(env: &common::Env, live: &BTreeMap<String, i64>) -> bool {
    let mut problems: Vec<String> = Vec::new();
    let control = &env.control;
    let templates: BTreeSet<String> = dynamic(control, "apps/v1", "Deployment", Some("default"))
        .list_metadata(&ListParams::default())
        .await
        .expect("list Deployments")
        .items
        .into_iter()
        .filter_map(|d| d.metadata.name)
        .collect();
    let expected: BTreeSet<String> = live.keys().cloned().collect();
    if templates != expected {
        problems.push(format!(
            "templates: {} stored, {} expected ({} missing, {} extra)",
            templates.len(),
            expected.len(),
            expected.difference(&templates).count(),
            templates.difference(&expected).count()
        ));
    }
    // binding name → (template, target clusters with replicas)
    let bindings = dynamic(control, "work.karmada.io/v1alpha2", "ResourceBinding", None)
        .list(&ListParams::default())
        .await
        .expect("list bindings")
        .items;
    let mut targets: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    for b in &bindings {
        let name = b.metadata.name.clone().unwrap_or_default();
        let template = b
            .data
            .pointer("/spec/resource/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if b.metadata.deletion_timestamp.is_some() {
            problems.push(format!("binding {name} still deleting"));
        }
        let tasks = b
            .data
            .pointer("/spec/gracefulEvictionTasks")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        if tasks > 0 {
            problems.push(format!(
                "binding {name}: {tasks} eviction task(s) still pending"
            ));
        }
        let Some(&replicas) = live.get(&template) else {
            problems.push(format!("binding {name} for a deleted template {template}"));
            continue;
        };
        let clusters: BTreeMap<String, i64> = b
            .data
            .pointer("/spec/clusters")
            .and_then(Value::as_array)
            .map(|cs| {
                cs.iter()
                    .map(|c| {
                        (
                            c["name"].as_str().unwrap_or_default().to_owned(),
                            c["replicas"].as_i64().unwrap_or(0),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let sum: i64 = clusters.values().sum();
        if sum != replicas {
            problems.push(format!(
                "binding {name}: {sum} replicas scheduled, the template has {replicas}"
            ));
        }
        targets.insert(name, clusters);
    }
    for t in live.keys() {
        if !targets.contains_key(&common::binding_of(t)) {
            problems.push(format!("template {t} has no binding"));
        }
    }
    // Works: one per target, with the target's replicas in its manifest.
    let works = dynamic(control, "work.karmada.io/v1alpha1", "Work", None)
        .list(&ListParams::default())
        .await
        .expect("list Works")
        .items;
    // cluster → Deployment name → replicas the Work carries
    let mut per_member: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    let mut seen: BTreeSet<(String, String)> = BTreeSet::new();
    for w in &works {
        let ns = w.metadata.namespace.clone().unwrap_or_default();
        let wname = w.metadata.name.clone().unwrap_or_default();
        let cluster = ns.strip_prefix("karmada-es-").unwrap_or(&ns).to_owned();
        let binding = w
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(labels::RB_NAME))
            .cloned()
            .unwrap_or_default();
        if w.metadata.deletion_timestamp.is_some() {
            problems.push(format!("Work {ns}/{wname} still deleting"));
        }
        let Some(want) = targets.get(&binding).and_then(|t| t.get(&cluster)) else {
            problems.push(format!(
                "Work {ns}/{wname} for binding {binding:?}, which does not target {cluster}"
            ));
            continue;
        };
        let manifest = w.data.pointer("/spec/workload/manifests/0");
        let replicas = manifest
            .and_then(|m| m.pointer("/spec/replicas"))
            .and_then(Value::as_i64)
            .unwrap_or(-1);
        if replicas != *want {
            problems.push(format!(
                "Work {ns}/{wname}: {replicas} replicas, its binding gives {cluster} {want}"
            ));
        }
        if !seen.insert((binding.clone(), cluster.clone())) {
            problems.push(format!("binding {binding} has two Works on {cluster}"));
        }
        let dname = manifest
            .and_then(|m| m.pointer("/metadata/name"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        per_member
            .entry(cluster)
            .or_default()
            .insert(dname, replicas);
    }
    for (b, clusters) in &targets {
        for c in clusters.keys() {
            if !seen.contains(&(b.clone(), c.clone())) {
                problems.push(format!("binding {b} targets {c} without a Work there"));
            }
        }
    }
    // Member copies: exactly what the member's Works describe.
    for (name, client) in env.running.context.members.iter() {
        let copies: BTreeMap<String, i64> =
            dynamic(client, "apps/v1", "Deployment", Some("default"))
                .list(&ListParams::default())
                .await
                .expect("list member Deployments")
                .items
                .into_iter()
                .map(|d| {
                    (
                        d.metadata.name.unwrap_or_default(),
                        d.data
                            .pointer("/spec/replicas")
                            .and_then(Value::as_i64)
                            .unwrap_or(-1),
                    )
                })
                .collect();
        let want = per_member.get(name).cloned().unwrap_or_default();
        if copies != want {
            let missing = want.keys().filter(|k| !copies.contains_key(*k)).count();
            let extra = copies.keys().filter(|k| !want.contains_key(*k)).count();
            let differ = want
                .iter()
                .filter(|(k, v)| copies.get(*k).is_some_and(|c| c != *v))
                .count();
            problems.push(format!(
                "member {name}: {} copies, {} Works ({missing} missing, {extra} extra, {differ} with other replicas)",
                copies.len(),
                want.len()
            ));
        }
    }
    println!(
        "  accounted: {} templates, {} bindings, {} Works, {} member copies",
        templates.len(),
        bindings.len(),
        works.len(),
        per_member.values().map(BTreeMap::len).sum::<usize>()
    );
    for p in problems.iter().take(40) {
        println!("  ! {p}");
    }
    if problems.len() > 40 {
        println!("  ! … {} more", problems.len() - 40);
    }
    problems.is_empty()
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}
