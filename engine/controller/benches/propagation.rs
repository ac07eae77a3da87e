//! Apply → Works Applied on 100 simulated members: latency per template, and burst throughput.
//!
//! Everything runs in one process, as `flotilla up --members 100` does: the embedded API server
//! over a durable store in a temp dir, 100 simulated members, every controller with `flotilla up`'s
//! defaults (member ready delay 1 s, resync 5 min). Requests go through the server's router in
//! process (no sockets). Each case starts from a fresh server.
//!
//! Latency cases: one PropagationPolicy (label selector) is applied first; then Deployments are
//! applied one at a time. A sample is the time from the template's apply request returning to the
//! bench's Work watch having seen every one of that template's Works with `Applied=True`. The
//! next template is applied once the previous one is Healthy on every member (after the 1 s
//! simulated ready delay) and the controllers have been idle for 200 ms, so samples do not overlap.
//!
//! - `duplicated`: Duplicated to all 100 members (100 Works per template);
//! - `divided`: 200 replicas Divided with equal static weights over all 100 members (100 Works of
//!   2 replicas each).
//!
//! Burst: teams of 4 members each with a policy dividing 4 replicas over its 4 members; 1,000
//! Deployments (round-robin over the teams) applied concurrently; time until all 4,000 Works are
//! Applied.
//!
//! Knobs: `FLOTILLA_BENCH_MEMBERS` (100), `FLOTILLA_BENCH_SAMPLES` (200), `FLOTILLA_BENCH_BURST`
//! (1000), `FLOTILLA_BENCH_CASES` (`duplicated,divided,burst`), `FLOTILLA_BENCH_TIMEOUT_SECS` (120).

/// The `flotilla` binary's allocator, so the control plane here allocates as it does there.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod common;

use std::time::{Duration, Instant};

use common::{Env, Tracker};

fn main() {
    let members: usize = common::knob("FLOTILLA_BENCH_MEMBERS", 100);
    let samples: usize = common::knob("FLOTILLA_BENCH_SAMPLES", 200);
    let burst: usize = common::knob("FLOTILLA_BENCH_BURST", 1000);
    let cases: String = common::knob(
        "FLOTILLA_BENCH_CASES",
        "duplicated,divided,burst".to_owned(),
    );
    let timeout = Duration::from_secs(common::knob("FLOTILLA_BENCH_TIMEOUT_SECS", 120));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    println!(
        "propagation bench: {members} simulated members, {samples} samples per latency case, burst of {burst}; load average {}",
        common::loadavg()
    );
    for case in cases.split(',').map(str::trim).filter(|c| !c.is_empty()) {
        rt.block_on(async {
            match case {
                "duplicated" => latency(members, samples, timeout, Case::Duplicated).await,
                "divided" => latency(members, samples, timeout, Case::Divided).await,
                "burst" => burst_case(members, burst, timeout).await,
                other => eprintln!("unknown case {other:?}"),
            }
        });
    }
    println!("done; load average {}", common::loadavg());
}

#[derive(Clone, Copy, Debug)]
enum Case {
    Duplicated,
    Divided,
}

async fn start(members: usize) -> Env {
    let t = Instant::now();
    let env = common::start(members).await;
    println!(
        "  started server + {members} members + controllers in {:.2} s",
        t.elapsed().as_secs_f64()
    );
    env
}

async fn latency(members: usize, samples: usize, timeout: Duration, case: Case) {
    println!("\n== latency: {case:?} over {members} members ==");
    let env = start(members).await;
    let tracker = Tracker::spawn(&env.control, true);
    let (label, placement, replicas) = match case {
        Case::Duplicated => ("duplicated", common::duplicated_to_all(), 1),
        Case::Divided => (
            "divided",
            common::divided_over_all(),
            2 * i64::try_from(members).expect("members"),
        ),
    };
    common::apply(
        &env.control,
        &common::policy(&format!("bench-{label}"), "bench", label, placement),
    )
    .await;
    common::quiesce(&env, Duration::from_millis(200), Duration::from_secs(10)).await;
    let cpu0 = common::cpu_seconds();
    let (r0, s0) = (common::reconciles(&env), common::reconcile_seconds(&env));
    let c0 = common::counters(&env);
    let mut applied = Vec::new();
    let mut healthy = Vec::new();
    let mut stages: Vec<[f64; 7]> = Vec::new();
    let started = Instant::now();
    for i in 0..samples {
        let name = format!("{label}-{i:04}");
        let rb = common::binding_of(&name);
        let waiters = tracker.register(&rb, members);
        common::apply(
            &env.control,
            &common::deployment(&name, replicas, &[("bench", label)]),
        )
        .await;
        let t0 = Instant::now();
        tracker.started(&rb, t0);
        match tokio::time::timeout(timeout, waiters.applied).await {
            Ok(Ok(at)) => applied.push(at.duration_since(t0).as_secs_f64() * 1e3),
            _ => {
                let (w, a) = tracker.counts(&rb);
                println!(
                    "  sample {i}: timed out after {timeout:?} with {w} Works seen, {a} Applied; {}",
                    common::activity(&env, &r0, &s0)
                );
                return;
            }
        }
        if let Ok(Ok(at)) = tokio::time::timeout(timeout, waiters.healthy).await {
            healthy.push(at.duration_since(t0).as_secs_f64() * 1e3);
        }
        stages.push(tracker.stages(&rb).millis());
        tracker.forget(&rb);
        common::quiesce(&env, Duration::from_millis(200), Duration::from_secs(30)).await;
        if (i + 1) % 50 == 0 {
            let last: Vec<f64> = applied[applied.len() - 50..].to_vec();
            println!(
                "  {:>4} samples, last 50: {}",
                i + 1,
                common::summary(&last)
            );
        }
    }
    let wall = started.elapsed().as_secs_f64();
    println!(
        "  {}",
        common::amplification(&env, &c0, applied.len(), applied.len() * members)
    );
    println!(
        "  apply → all {members} Works Applied (ms):  {}",
        common::summary(&applied)
    );
    println!(
        "  apply → all {members} Works Healthy (ms):  {}  (includes the {} ms simulated ready delay)",
        common::summary(&healthy),
        common::READY_DELAY.as_millis()
    );
    println!("  stages, ms after the apply returned (as seen by the bench's watches):");
    for (k, n) in common::STAGE_NAMES.iter().enumerate() {
        let v: Vec<f64> = stages.iter().map(|s| s[k]).collect();
        println!("    {n:<20} {}", common::summary(&v));
    }
    let first: Vec<f64> = applied.iter().take(20).copied().collect();
    let last: Vec<f64> = applied.iter().rev().take(20).copied().collect();
    println!(
        "  first 20 samples: {}\n  last 20 samples:  {}",
        common::summary(&first),
        common::summary(&last)
    );
    println!(
        "  controller activity over the run: {}",
        common::activity(&env, &r0, &s0)
    );
    println!(
        "  wall {wall:.1} s, process CPU {:.1} s, RSS {:.0} MiB, load average {}",
        common::cpu_seconds() - cpu0,
        common::rss_mib().0,
        common::loadavg()
    );
}

async fn burst_case(members: usize, n: usize, timeout: Duration) {
    const TEAM: usize = 4;
    let teams = (members / TEAM).max(1);
    println!(
        "\n== burst: {n} Deployments applied concurrently, each divided (4 replicas) over its team's {TEAM} members, {teams} teams =="
    );
    let env = start(members).await;
    let tracker = Tracker::spawn(&env.control, false);
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
    common::quiesce(&env, Duration::from_millis(200), Duration::from_secs(10)).await;
    let names: Vec<String> = (0..n).map(|i| format!("burst-{i:05}")).collect();
    for name in &names {
        drop(tracker.register(&common::binding_of(name), TEAM));
    }
    let cpu0 = common::cpu_seconds();
    let (r0, s0) = (common::reconciles(&env), common::reconcile_seconds(&env));
    let c0 = common::counters(&env);
    let t0 = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for (i, name) in names.iter().enumerate() {
        let control = env.control.clone();
        let team = format!("t{:02}", i % teams);
        let d = common::deployment(name, i64::try_from(TEAM).expect("team"), &[("team", &team)]);
        tasks.spawn(async move { common::apply(&control, &d).await });
    }
    while tasks.join_next().await.is_some() {}
    let applied_at = t0.elapsed();
    println!(
        "  all {n} applies returned after {:.2} s",
        applied_at.as_secs_f64()
    );
    let deadline = t0 + timeout;
    let mut next_report = Instant::now() + Duration::from_secs(10);
    loop {
        let done = tracker
            .bindings_done
            .load(std::sync::atomic::Ordering::Relaxed) as usize;
        if done >= n {
            break;
        }
        if Instant::now() > deadline {
            println!(
                "  timed out: {done}/{n} templates fully Applied; {}",
                common::activity(&env, &r0, &s0)
            );
            return;
        }
        if Instant::now() > next_report {
            println!(
                "  {:>5.1} s: {done}/{n} templates fully Applied",
                t0.elapsed().as_secs_f64()
            );
            next_report += Duration::from_secs(10);
        }
        let _ = tokio::time::timeout(Duration::from_millis(100), tracker.progress.notified()).await;
    }
    let all = t0.elapsed().as_secs_f64();
    let works = n * TEAM;
    println!(
        "  first apply → all {works} Works Applied: {all:.2} s = {:.0} templates/s, {:.0} Works/s",
        n as f64 / all,
        works as f64 / all
    );
    println!(
        "  controller activity: {}",
        common::activity(&env, &r0, &s0)
    );
    println!("  {}", common::amplification(&env, &c0, n, works));
    println!(
        "  process CPU {:.1} s, RSS {:.0} MiB, load average {}",
        common::cpu_seconds() - cpu0,
        common::rss_mib().0,
        common::loadavg()
    );
}
