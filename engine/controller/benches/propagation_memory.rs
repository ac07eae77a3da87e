//! Memory with many templates over 100 simulated members: process RSS, store size on disk and
//! time to converge.
//!
//! The setup is `propagation`'s (the embedded server, 100 simulated members and every controller
//! in one process with `flotilla up`'s defaults). Policies:
//!
//! - `divided` (default): the members are split into teams of 4, each team with one
//!   PropagationPolicy dividing a Deployment's 4 replicas over its 4 members with equal static
//!   weights; templates are labelled round-robin over the teams. Each template makes one
//!   ResourceBinding, 4 Works and 4 member Deployments.
//! - `duplicated`: one policy Duplicated to every member: 1 binding, 100 Works and 100 member
//!   Deployments per template.
//!
//! Templates are applied `FLOTILLA_BENCH_CONCURRENCY` at a time. Converged = every Work of every
//! template seen `Applied=True` by the bench's Work watch; then the bench waits for every member
//! copy to be Healthy (1 s simulated ready delay) and for the controllers to be idle, and reports
//! RSS (`VmRSS`, `VmHWM`) and the store's size on disk.
//!
//! Knobs: `FLOTILLA_BENCH_TEMPLATES` (10000), `FLOTILLA_BENCH_POLICY` (`divided`),
//! `FLOTILLA_BENCH_MEMBERS` (100), `FLOTILLA_BENCH_CONCURRENCY` (32),
//! `FLOTILLA_BENCH_DEADLINE_SECS` (540).

/// The `flotilla` binary's allocator, so the control plane here allocates as it does there.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::Tracker;

const TEAM: usize = 4;

fn main() {
    let (rss_exe, _) = common::rss_mib();
    let templates: usize = common::knob("FLOTILLA_BENCH_TEMPLATES", 10_000);
    let policy: String = common::knob("FLOTILLA_BENCH_POLICY", "divided".to_owned());
    let members: usize = common::knob("FLOTILLA_BENCH_MEMBERS", 100);
    let concurrency: usize = common::knob("FLOTILLA_BENCH_CONCURRENCY", 32);
    let deadline_secs: u64 = common::knob("FLOTILLA_BENCH_DEADLINE_SECS", 540);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    println!(
        "memory bench: {templates} Deployments, policy {policy}, {members} members, {concurrency} applies in flight; load average {}",
        common::loadavg()
    );
    println!("  RSS at process start: {rss_exe:.1} MiB");
    rt.block_on(run(
        templates,
        &policy,
        members,
        concurrency,
        Duration::from_secs(deadline_secs),
    ));
    println!("done; load average {}", common::loadavg());
}

async fn run(n: usize, policy: &str, members: usize, concurrency: usize, deadline: Duration) {
    let t_start = Instant::now();
    let env = common::start(members).await;
    let (rss_base, _) = common::rss_mib();
    println!(
        "  started in {:.2} s; RSS with {members} idle members and controllers: {rss_base:.1} MiB; store {:.1} MiB",
        t_start.elapsed().as_secs_f64(),
        mib(common::disk_bytes(env.dir.path()))
    );
    let tracker = Tracker::spawn(&env.control, false);

    type LabelOf = Box<dyn Fn(usize) -> (String, String) + Send + Sync>;
    let (per_template, label_of): (usize, LabelOf) = match policy {
        "duplicated" => {
            common::apply(
                &env.control,
                &common::policy("all", "bench", "all", common::duplicated_to_all()),
            )
            .await;
            (
                members,
                Box::new(|_| ("bench".to_owned(), "all".to_owned())),
            )
        }
        _ => {
            let teams = (members / TEAM).max(1);
            for t in 0..teams {
                let team = format!("t{t:02}");
                common::apply(
                    &env.control,
                    &common::policy(
                        &format!("team-{team}"),
                        "team",
                        &team,
                        common::divided_over(&common::team_members(t, TEAM)),
                    ),
                )
                .await;
            }
            (
                TEAM,
                Box::new(move |i| ("team".to_owned(), format!("t{:02}", i % teams))),
            )
        }
    };
    let replicas = if policy == "duplicated" {
        1
    } else {
        i64::try_from(TEAM).expect("team")
    };
    common::quiesce(&env, Duration::from_millis(300), Duration::from_secs(10)).await;
    for i in 0..n {
        drop(tracker.register(&common::binding_of(&name(i)), per_template));
    }
    let works = n * per_template;
    println!(
        "  expecting {n} templates → {n} ResourceBindings, {works} Works, {works} member Deployments ({:.0} per member)",
        works as f64 / members as f64
    );

    let cpu0 = common::cpu_seconds();
    let (r0, s0) = (common::reconciles(&env), common::reconcile_seconds(&env));
    let c0 = common::counters(&env);
    let t0 = Instant::now();
    let end = t0 + deadline;
    let applied = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let feeder = {
        let control = env.control.clone();
        let applied = applied.clone();
        let sem = Arc::new(tokio::sync::Semaphore::new(concurrency));
        let label_of = Arc::new(label_of);
        tokio::spawn(async move {
            let mut tasks = tokio::task::JoinSet::new();
            for i in 0..n {
                let permit = sem.clone().acquire_owned().await.expect("semaphore");
                let (k, v) = label_of(i);
                let d = common::deployment(&name(i), replicas, &[(k.as_str(), v.as_str())]);
                let control = control.clone();
                let applied = applied.clone();
                tasks.spawn(async move {
                    common::apply(&control, &d).await;
                    applied.fetch_add(1, Ordering::Relaxed);
                    drop(permit);
                });
                while tasks.try_join_next().is_some() {}
            }
            while tasks.join_next().await.is_some() {}
        })
    };

    let mut last = (
        Instant::now(),
        common::reconciles(&env),
        common::reconcile_seconds(&env),
        common::cpu_seconds(),
    );
    let mut all_applied_at = None;
    let mut converged_at = None;
    let mut feeder = Some(feeder);
    let mut applies_done_at = None;
    while Instant::now() < end {
        // Wake at the next report, or when the stage being waited for completes.
        let waiting_for_healthy = all_applied_at.is_some();
        let _ = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                tracker.progress.notified().await;
                let counter = if waiting_for_healthy {
                    &tracker.bindings_healthy
                } else {
                    &tracker.bindings_done
                };
                if counter.load(Ordering::Relaxed) as usize >= n {
                    break;
                }
            }
        })
        .await;
        if applies_done_at.is_none()
            && feeder
                .as_ref()
                .is_some_and(tokio::task::JoinHandle::is_finished)
        {
            feeder = None;
            applies_done_at = Some(t0.elapsed());
        }
        let done = tracker.bindings_done.load(Ordering::Relaxed) as usize;
        let healthy = tracker.bindings_healthy.load(Ordering::Relaxed) as usize;
        let (rss, _) = common::rss_mib();
        let cpu = common::cpu_seconds();
        println!(
            "  {:>6.1} s: applied {}/{n}, Works Applied {}/{works}, templates fully Applied {done}, fully Healthy {healthy}; RSS {rss:.0} MiB; CPU {:.0}% over the last {:.0} s; load {}",
            t0.elapsed().as_secs_f64(),
            applied.load(Ordering::Relaxed),
            tracker.applied_works.load(Ordering::Relaxed),
            (cpu - last.3) / last.0.elapsed().as_secs_f64() * 100.0,
            last.0.elapsed().as_secs_f64(),
            common::loadavg(),
        );
        println!(
            "           reconciles in the interval: {}",
            common::activity(&env, &last.1, &last.2)
        );
        last = (
            Instant::now(),
            common::reconciles(&env),
            common::reconcile_seconds(&env),
            cpu,
        );
        if done >= n && all_applied_at.is_none() {
            all_applied_at = Some(t0.elapsed());
        }
        if healthy >= n {
            converged_at = Some(t0.elapsed());
            break;
        }
    }
    let Some(all_applied) = all_applied_at else {
        println!(
            "  NOT converged within {deadline:?}: {}/{works} Works Applied",
            tracker.applied_works.load(Ordering::Relaxed)
        );
        println!(
            "  controller activity: {}",
            common::activity(&env, &r0, &s0)
        );
        report_memory(&env);
        return;
    };
    println!(
        "  all applies returned after {:.1} s",
        applies_done_at.map_or(f64::NAN, |d| d.as_secs_f64())
    );
    println!(
        "  first apply → all {works} Works Applied: {:.1} s ({:.0} Works/s)",
        all_applied.as_secs_f64(),
        works as f64 / all_applied.as_secs_f64()
    );
    match converged_at {
        Some(c) => println!(
            "  first apply → every member copy Healthy: {:.1} s",
            c.as_secs_f64()
        ),
        None => println!("  member copies not all Healthy within the deadline"),
    }
    let cpu_conv = common::cpu_seconds() - cpu0;
    let idle = common::quiesce(&env, Duration::from_secs(2), Duration::from_secs(60)).await;
    println!("  controllers idle for 2 s: {idle}; process CPU until converged {cpu_conv:.1} s");
    println!(
        "  controller activity: {}",
        common::activity(&env, &r0, &s0)
    );
    println!("  {}", common::amplification(&env, &c0, n, works));
    report_memory(&env);
    let horizon = env
        .store
        .compact(common::RETAIN_REVISIONS)
        .await
        .unwrap_or(0);
    println!(
        "  after compacting to the newest {} revisions (horizon {horizon}, current {}): store {:.1} MiB",
        common::RETAIN_REVISIONS,
        env.store.current_rev(),
        mib(common::disk_bytes(env.dir.path()))
    );
}

fn report_memory(env: &common::Env) {
    let (rss, hwm) = common::rss_mib();
    println!(
        "  RSS {rss:.1} MiB (VmHWM {hwm:.1} MiB); store on disk {:.1} MiB at revision {}",
        mib(common::disk_bytes(env.dir.path())),
        env.store.current_rev()
    );
}

fn name(i: usize) -> String {
    format!("app-{i:05}")
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}
