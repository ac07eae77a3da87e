//! Fuzz-style test of the offline loader: thousands of seeded mutations of manifests and policies
//! (YAML and JSON) go through `parse_documents` and the policies' defaulting and validation.
//! Every input must be answered with documents or an error, never a panic.

use std::panic::{AssertUnwindSafe, catch_unwind};

use flotilla_core::manifest::{Document, parse_documents};

use fastrand::Rng;

const SEEDS: [&str; 4] = [
    "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata:\n  name: web\n  namespace: default\nspec:\n  resourceSelectors:\n  - apiVersion: apps/v1\n    kind: Deployment\n    name: web\n  placement:\n    clusterAffinity:\n      clusterNames: [m1, m2]\n    replicaScheduling:\n      replicaSchedulingType: Divided\n      replicaDivisionPreference: Weighted\n      weightPreference:\n        staticWeightList:\n        - targetCluster: {clusterNames: [m1]}\n          weight: 2\n",
    "apiVersion: policy.karmada.io/v1alpha1\nkind: OverridePolicy\nmetadata: {name: o, namespace: default}\nspec:\n  overrideRules:\n  - targetCluster: {clusterNames: [m1]}\n    overriders:\n      plaintext:\n      - {path: /spec/replicas, operator: replace, value: 3}\n      imageOverrider:\n      - {component: Registry, operator: replace, value: r.example}\n",
    "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: default\n  labels: {app: web}\nspec:\n  replicas: 2\n  template:\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.27\n---\napiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {name: m1}\nspec: {syncMode: Push}\n",
    r#"{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v"}}]}"#,
];

/// Fragments that exercise YAML's corners: anchors, aliases, tags, merge keys, flow and block
/// collections, multi-document markers, odd scalars.
const FRAGMENTS: [&str; 24] = [
    "&a ", "*a", "<<: *a\n", "!!str ", "!custom ", "{", "}", "[", "]", ": ", "- ", "---\n",
    "...\n", "\"", "'", "\\", "\t", "\n  ", "~", "1e999", "-0x1F", "? ", "|\n  x\n", "#",
];

fn mutate(rng: &mut Rng, text: &str) -> String {
    let mut s: Vec<char> = text.chars().collect();
    for _ in 0..1 + rng.usize(..4) {
        let at = rng.usize(..s.len() + 1);
        match rng.usize(..6) {
            0 if !s.is_empty() => {
                let end = (at + 1 + rng.usize(..12)).min(s.len());
                s.drain(at.min(end)..end);
            }
            1 => {
                let f = FRAGMENTS[rng.usize(..FRAGMENTS.len())];
                s.splice(at..at, f.chars());
            }
            2 if !s.is_empty() => {
                // Duplicate a line: duplicate keys are the common result.
                let start = s[..at.min(s.len())]
                    .iter()
                    .rposition(|&c| c == '\n')
                    .map_or(0, |i| i + 1);
                let end = s[start..]
                    .iter()
                    .position(|&c| c == '\n')
                    .map_or(s.len(), |i| start + i + 1);
                let line: Vec<char> = s[start..end].to_vec();
                s.splice(end..end, line);
            }
            3 => {
                // Deep nesting.
                let n = 1 + rng.usize(..300);
                let open = if rng.usize(..2) == 0 { '[' } else { '{' };
                let nested: String = std::iter::repeat_n(open, n).collect();
                s.splice(at..at, nested.chars());
            }
            4 if !s.is_empty() => {
                let i = at.min(s.len() - 1);
                s[i] = char::from(32 + rng.usize(..95) as u8);
            }
            _ => {
                let f = FRAGMENTS[rng.usize(..FRAGMENTS.len())];
                s.splice(at..at, f.chars());
            }
        }
    }
    s.into_iter().collect()
}

/// The offline path of `flotilla validate`: load, default, validate.
fn load_and_validate(text: &str) -> usize {
    let Ok(docs) = parse_documents("fuzz.yaml", text) else {
        return 0;
    };
    let mut findings = 0;
    for d in docs {
        match d {
            Document::Propagation(mut p) => {
                flotilla_core::validate::default_propagation_policy(&mut p);
                findings += flotilla_core::validate::validate_propagation_policy(&p).len();
            }
            Document::Override(mut o) => {
                flotilla_core::overrides::set_defaults(&mut o);
                findings += flotilla_core::overrides::validate(&o).len();
            }
            Document::Cluster(mut c) => flotilla_core::validate::default_cluster(&mut c),
            _ => {}
        }
    }
    findings
}

#[test]
fn thousands_of_mutated_manifests_and_policies_never_panic_the_loader() {
    let mut rng = Rng::with_seed(0x00f1_0711_1a10_ad00);
    let mut panics = Vec::new();
    let mut loaded = 0;
    let cases = 3_000;
    for case in 0..cases {
        let seed = SEEDS[rng.usize(..SEEDS.len())];
        let mut text = mutate(&mut rng, seed);
        if rng.usize(..4) == 0 {
            text = mutate(&mut rng, &text);
        }
        match catch_unwind(AssertUnwindSafe(|| load_and_validate(&text))) {
            Ok(_) => {
                loaded += usize::from(parse_documents("f", &text).is_ok());
            }
            Err(_) => panics.push(case),
        }
    }
    assert_eq!(panics, Vec::<usize>::new(), "cases that panicked");
    // The mutations are not all fatal: some inputs still load, others are refused.
    assert!(loaded > 100 && loaded < cases, "{loaded} of {cases} loaded");
}
