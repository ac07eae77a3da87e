//! Golden tests for the Karmada override engine: every `tests/golden/overrides/*.yaml` case is
//! run through `karmada_overrides`, the patch is replayed with `apply`, and the final object and
//! the provenance annotations (or the error) are compared with the case's `expect` block.
//!
//! `FLOTILLA_BLESS=1 cargo test -p flotilla-core --test overrides_golden` rewrites every
//! `expect` block from the actual output instead (review the diff before committing!).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use flotilla_api::cluster::Cluster;
use flotilla_api::policy::OverridePolicy;
use flotilla_core::overrides::{OverridePolicies, applied_annotations, apply, karmada_overrides};
use serde_json::Value;

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden/overrides")
}

/// The outcome of one case, in the shape of its `expect` block.
fn run_case(input: &Value) -> Result<Value, String> {
    let object = input.get("object").cloned().ok_or("input.object missing")?;
    let cluster: Cluster = serde_json::from_value(
        input
            .get("cluster")
            .cloned()
            .ok_or("input.cluster missing")?,
    )
    .map_err(|e| e.to_string())?;
    let list = |key: &str| -> Result<Vec<OverridePolicy>, String> {
        match input.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(v) => serde_json::from_value(v.clone()).map_err(|e| format!("{key}: {e}")),
        }
    };
    let policies = OverridePolicies {
        cluster: list("clusterOverridePolicies")?,
        namespaced: list("overridePolicies")?,
    };
    let expect = match karmada_overrides(&object, &cluster, &policies) {
        Ok(patch) => {
            let final_object = apply(&object, &patch).map_err(|e| format!("apply failed: {e}"))?;
            let annotations: BTreeMap<String, String> =
                applied_annotations(&patch.applied).into_iter().collect();
            serde_json::json!({ "object": final_object, "annotations": annotations })
        }
        Err(e) => serde_json::json!({ "error": e.to_string() }),
    };
    Ok(expect)
}

fn rewrite_expect(path: &Path, text: &str, actual: &Value) {
    let head = match text.find("\nexpect:") {
        Some(i) => &text[..=i],
        None => text,
    };
    let mut wrapper = serde_yaml::Mapping::new();
    let expect: serde_yaml::Value = serde_yaml::to_value(actual).expect("to yaml");
    wrapper.insert("expect".into(), expect);
    let body = serde_yaml::to_string(&wrapper).expect("serialise");
    let mut out = head.to_string();
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&body);
    std::fs::write(path, out).expect("write golden file");
}

#[test]
fn overrides_golden() {
    let bless = std::env::var("FLOTILLA_BLESS").is_ok_and(|v| v == "1");
    let mut files: Vec<PathBuf> = std::fs::read_dir(golden_dir())
        .expect("golden dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 25,
        "expected at least 25 golden cases, found {}",
        files.len()
    );
    let mut failures = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).expect("read");
        let case: Value =
            serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let name = case
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_string();
        assert!(
            case.get("description").is_some_and(Value::is_string),
            "{}: description missing",
            path.display()
        );
        let actual = match run_case(case.get("input").unwrap_or(&Value::Null)) {
            Ok(v) => v,
            Err(e) => {
                failures.push(format!("{name}: harness error: {e}"));
                continue;
            }
        };
        if bless {
            rewrite_expect(path, &text, &actual);
            continue;
        }
        let expect = case.get("expect").cloned().unwrap_or(Value::Null);
        if let Some(want) = expect.get("error").and_then(Value::as_str) {
            match actual.get("error").and_then(Value::as_str) {
                Some(got) if got.contains(want) => {}
                Some(got) => {
                    failures.push(format!("{name}: error {got:?} does not contain {want:?}"))
                }
                None => failures.push(format!(
                    "{name}: expected error containing {want:?}, got success {actual}"
                )),
            }
            continue;
        }
        if actual.get("error").is_some() {
            failures.push(format!("{name}: unexpected error {}", actual["error"]));
            continue;
        }
        if expect.get("object") != actual.get("object") {
            failures.push(format!(
                "{name}: object mismatch\n  want: {}\n  got:  {}",
                expect.get("object").unwrap_or(&Value::Null),
                actual["object"]
            ));
        }
        let want_ann = expect
            .get("annotations")
            .cloned()
            .unwrap_or(Value::Object(Default::default()));
        if want_ann != actual["annotations"] {
            failures.push(format!(
                "{name}: annotations mismatch\n  want: {want_ann}\n  got:  {}",
                actual["annotations"]
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} golden case(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
