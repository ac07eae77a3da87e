//! Backend parity: the built-in `ClusterAffinity` filter and `StaticWeight` assigner, built as Wasm
//! through the Rust SDK (plugins/wasm), give the same verdicts and the same scheduling results as
//! the native built-ins on every golden case (tests/golden/schedule).

mod common;
#[path = "common/guests.rs"]
mod guests;

use std::path::Path;
use std::sync::Arc;

use flotilla_api::cluster::Cluster;
use flotilla_api::policy::Placement;
use flotilla_api::work::{ResourceBindingSpec, ResourceBindingStatus};
use flotilla_core::framework::{BindingContext, FilterInput, FilterPlugin, Profile, Slot};
use flotilla_core::pipeline::{Options, Snapshot};
use flotilla_core::profile::{ExtensionPoint, PluginSpec, WasmSource};
use flotilla_core::scheduler::schedule;
use flotilla_wasm::{WasmFactory, WasmPlugin};

#[derive(serde::Deserialize)]
struct Case {
    name: String,
    #[serde(default)]
    plugin: Option<String>,
    input: Input,
}

#[derive(serde::Deserialize)]
struct Input {
    binding: ResourceBindingSpec,
    #[serde(default)]
    status: ResourceBindingStatus,
    clusters: Vec<Cluster>,
}

fn load(dir: &Path, file: &str, name: &str, point: ExtensionPoint) -> Arc<WasmPlugin> {
    let path = dir.join(file);
    let spec = PluginSpec {
        name: name.into(),
        wasm: Some(WasmSource {
            path: path.display().to_string(),
            sha256: None,
            plugin: None,
        }),
        ..Default::default()
    };
    Arc::new(
        WasmFactory::new()
            .load(point, &spec, &path)
            .unwrap_or_else(|e| panic!("{file}: {e}")),
    )
}

/// The default profile with the two built-ins replaced by their Wasm builds.
pub fn wasm_profile(dir: &Path) -> (Profile, Arc<WasmPlugin>) {
    let filter = load(
        dir,
        "flotilla_wasm_cluster_affinity.wasm",
        "ClusterAffinity",
        ExtensionPoint::Filter,
    );
    let assign = load(
        dir,
        "flotilla_wasm_static_weight.wasm",
        "StaticWeight",
        ExtensionPoint::Assign,
    );
    let mut p = flotilla_plugins::default_profile();
    for slot in &mut p.filters {
        if slot.plugin.name() == "ClusterAffinity" {
            *slot = Slot::new(Arc::clone(&filter) as Arc<dyn FilterPlugin>);
        }
    }
    for slot in &mut p.assigners {
        if slot.plugin.name() == "StaticWeight" {
            *slot = Slot::new(Arc::clone(&assign) as _);
        }
    }
    (p, filter)
}

#[test]
fn wasm_builtins_match_native_on_the_golden_corpus() {
    let Some(dir) = guests::built() else { return };
    let (wasm, wasm_filter) = wasm_profile(&dir);
    let native = flotilla_plugins::default_profile();
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden/schedule");
    let mut paths: Vec<_> = std::fs::read_dir(&golden)
        .expect("golden dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    paths.sort();
    let (mut full, mut filters) = (0, 0);
    for path in paths
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
    {
        let case: Case =
            serde_yaml::from_str(&std::fs::read_to_string(path).expect("read")).expect("case");
        let file = path.file_name().unwrap_or_default().to_string_lossy();
        let i = &case.input;
        match case.plugin.as_deref() {
            None => {
                full += 1;
                let a = schedule(
                    &Snapshot::new(i.clusters.to_vec(), Arc::default(), Options::default()),
                    &native,
                    &i.binding,
                    &i.status,
                    None,
                    None,
                );
                let b = schedule(
                    &Snapshot::new(i.clusters.to_vec(), Arc::default(), Options::default()),
                    &wasm,
                    &i.binding,
                    &i.status,
                    None,
                    None,
                );
                assert_eq!(a, b, "{file} ({})", case.name);
            }
            Some("ClusterAffinity") => {
                filters += 1;
                let empty = Placement::default();
                let placement = i.binding.placement.as_ref().unwrap_or(&empty);
                let term = placement
                    .cluster_affinities
                    .iter()
                    .find(|t| t.affinity_name == i.status.scheduler_observing_affinity_name)
                    .or(placement.cluster_affinities.first());
                let ctx = BindingContext::new(&i.binding, placement, term);
                let clusters: Vec<&Cluster> = i.clusters.iter().collect();
                let (mut a, mut b) = (Vec::new(), Vec::new());
                flotilla_plugins::filter::ClusterAffinity
                    .filter(&FilterInput::new(&ctx, &clusters), &mut a)
                    .expect("native");
                wasm_filter
                    .filter(&FilterInput::new(&ctx, &clusters), &mut b)
                    .expect("wasm");
                assert_eq!(a, b, "{file} ({})", case.name);
            }
            Some(_) => {}
        }
    }
    eprintln!("parity: {full} full-profile cases, {filters} ClusterAffinity filter cases");
    assert!(
        full >= 20 && filters >= 1,
        "golden corpus too small: {full} / {filters}"
    );
}
