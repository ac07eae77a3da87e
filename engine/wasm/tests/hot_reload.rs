//! Hot reload: a plugin file replaced while another thread schedules continuously. Zero failed
//! cycles, no cycle mixing versions, the new version in use within a second of the change; a
//! broken file keeps the previous version and reports why.

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use flotilla_core::framework::Profile;
use flotilla_core::pipeline::{Options, Snapshot};
use flotilla_core::scheduler::schedule;
use flotilla_wasm::{Registry, WasmFactory, profiles_from_file};

/// A module with a filter and an assigner that reveal their version together: v1's filter rejects
/// cluster index 2 (`c`) and its assigner picks the first row; v2's filter rejects index 0 (`a`)
/// and its assigner picks the second row. Over clusters a, b, c: v1 places on `a`, v2 on `c`, and
/// any mix of versions places on `b`.
fn module(version: u32) -> String {
    let (rejected, row) = if version == 1 { (2, 0) } else { (0, 1) };
    let reasons = format!(r#"{{"reasons":["rejected by v{version}"]}}"#);
    let assigned = format!(r#"{{"assigned":[[{row},3]]}}"#);
    format!(
        r#"(module
  (import "flotilla:host/v1" "set_result" (func $set_result (param i32 i32)))
  (import "flotilla:host/v1" "set_rows" (func $set_rows (param i32 i32)))
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 65536))
  (data (i32.const 0) "{reasons_esc}")
  (data (i32.const 512) "{assigned_esc}")
  (func (export "flotilla_abi_version") (result i32) (i32.const 1))
  (func (export "flotilla_alloc") (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $heap))
    (global.set $heap (i32.and (i32.add (i32.add (local.get $p) (local.get $n)) (i32.const 7)) (i32.const -8)))
    (if (i32.gt_u (global.get $heap) (i32.mul (memory.size) (i32.const 65536)))
      (then (drop (memory.grow (i32.add (i32.shr_u (global.get $heap) (i32.const 16)) (i32.const 1))))))
    (local.get $p))
  (func (export "flotilla_dealloc") (param $p i32) (param $n i32)
    (if (i32.eq (i32.and (i32.add (i32.add (local.get $p) (local.get $n)) (i32.const 7)) (i32.const -8)) (global.get $heap))
      (then (global.set $heap (local.get $p)))))
  (func (export "flotilla_clusters_v1") (param i32 i32) (result i32) (i32.const 0))
  (func (export "flotilla_filter_v1") (param i32 i32) (param $rows i32) (param $n i32) (result i32)
    (local $i i32)
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
      (i32.store8 (i32.add (i32.const 1024) (local.get $i))
        (i32.eq (i32.load (i32.add (local.get $rows) (i32.shl (local.get $i) (i32.const 2)))) (i32.const {rejected})))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next)))
    (call $set_rows (i32.const 1024) (local.get $n))
    (call $set_result (i32.const 0) (i32.const {reasons_len}))
    (i32.const 0))
  (func (export "flotilla_assign_v1") (param i32 i32 i32 i32) (result i32)
    (call $set_result (i32.const 512) (i32.const {assigned_len}))
    (i32.const 0)))
"#,
        reasons_esc = reasons.replace('"', "\\\""),
        assigned_esc = assigned.replace('"', "\\\""),
        reasons_len = reasons.len(),
        assigned_len = assigned.len(),
    )
}

/// Replace `path` atomically (write + rename), as deployment tools do.
fn replace(path: &Path, contents: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, contents).expect("write");
    std::fs::rename(&tmp, path).expect("rename");
}

fn setup() -> (PathBuf, Registry<Vec<Profile>>) {
    let dir = std::env::temp_dir().join(format!("flotilla-hot-reload-{}-{:?}", std::process::id(), std::thread::current().id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    replace(&dir.join("plugin.wat"), &module(1));
    std::fs::write(
        dir.join("profile.yaml"),
        "apiVersion: flotilla.dev/v1alpha1\nkind: SchedulerProfile\nmetadata: {name: hot}\nspec:\n  filters:\n  - {name: versioned, wasm: {path: plugin.wat}}\n  assigners:\n  - {name: versioned, wasm: {path: plugin.wat}}\n",
    )
    .expect("profile");
    let path = dir.join("profile.yaml");
    let registry = Registry::load(move |read| {
        let wasm = WasmFactory::new();
        profiles_from_file(&path, &flotilla_plugins::default_profile(), &[&flotilla_plugins::BuiltinFactory, &wasm], read)
    })
    .expect("first load");
    (dir, registry)
}

#[test]
fn plugin_swapped_while_scheduling_continuously() {
    let (dir, registry) = setup();
    let registry = Arc::new(registry);
    registry.watch(Duration::from_millis(20));
    let cl = clusters(&["a", "b", "c"]);
    let (spec, status) = binding();
    let stop = Arc::new(AtomicBool::new(false));
    // (when, placed on) per cycle.
    let seen: Arc<Mutex<Vec<(Instant, String)>>> = Arc::default();
    let worker = {
        let (registry, stop, seen) = (Arc::clone(&registry), Arc::clone(&stop), Arc::clone(&seen));
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let set = registry.current(); // pinned for the whole cycle
                let r = schedule(&Snapshot::new((&cl).to_vec(), Arc::default(), Options::default()), &set.value[0], &spec, &status, None, None);
                let placed = match r.outcome {
                    Ok(t) if t.len() == 1 => t[0].name.clone(),
                    other => format!("failed: {other:?} {:?}", r.ignored_faults),
                };
                seen.lock().unwrap().push((Instant::now(), placed));
            }
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    let changed = Instant::now();
    replace(&dir.join("plugin.wat"), &module(2));
    let deadline = changed + Duration::from_secs(3);
    while Instant::now() < deadline && !seen.lock().unwrap().iter().any(|(_, p)| p == "c") {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    worker.join().expect("scheduler thread");

    let seen = seen.lock().unwrap();
    let v1 = seen.iter().filter(|(_, p)| p == "a").count();
    let v2 = seen.iter().filter(|(_, p)| p == "c").count();
    let other: Vec<_> = seen.iter().filter(|(_, p)| p != "a" && p != "c").map(|(_, p)| p.clone()).collect();
    assert!(other.is_empty(), "failed or mixed cycles: {:?}", &other[..other.len().min(5)]);
    assert!(v1 > 0 && v2 > 0, "v1 cycles {v1}, v2 cycles {v2}");
    let first_v2 = seen.iter().position(|(_, p)| p == "c").expect("v2 in use");
    assert!(seen[first_v2..].iter().all(|(_, p)| p == "c"), "v1 used after v2");
    let latency = seen[first_v2].0.duration_since(changed);
    eprintln!("{} cycles ({v1} on v1, {v2} on v2); v2 in use {latency:?} after the file changed", seen.len());
    assert!(latency <= Duration::from_secs(1), "v2 in use only after {latency:?}");
    assert_eq!(registry.current().version, 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn failed_reload_keeps_the_previous_version_and_reports_why() {
    let (dir, registry) = setup();
    replace(&dir.join("plugin.wat"), "(module (import \"env\" \"abort\" (func)))");
    let err = registry.reload_if_changed().expect_err("broken module must not load");
    assert!(err.contains("env.abort"), "{err}");
    assert_eq!(registry.last_error().as_deref(), Some(err.as_str()));
    assert_eq!(registry.current().version, 1);
    let cl = clusters(&["a", "b", "c"]);
    let (spec, status) = binding();
    let r = schedule(&Snapshot::new((&cl).to_vec(), Arc::default(), Options::default()), &registry.current().value[0], &spec, &status, None, None);
    assert_eq!(r.outcome.expect("v1 still in force")[0].name, "a");
    // Fixing the file recovers.
    replace(&dir.join("plugin.wat"), &module(2));
    assert_eq!(registry.reload_if_changed(), Ok(true));
    assert_eq!(registry.last_error(), None);
    let r = schedule(&Snapshot::new((&cl).to_vec(), Arc::default(), Options::default()), &registry.current().value[0], &spec, &status, None, None);
    assert_eq!(r.outcome.expect("v2")[0].name, "c");
    let _ = std::fs::remove_dir_all(&dir);
}
