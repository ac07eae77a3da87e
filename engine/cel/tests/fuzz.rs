//! Fuzz-style test of the CEL front end: thousands of seeded random and mutated expressions go
//! through compile (scan, parse, check) and evaluation on a tokio worker's 2 MiB stack. Every
//! expression must be answered with a value or an error, never a panic or a stack overflow.

use std::panic::{AssertUnwindSafe, catch_unwind};

use flotilla_api::cluster::Cluster;
use flotilla_cel::{Engine, ExpressionEngine, ExpressionKind};
use serde_json::json;

use fastrand::Rng;

const SEEDS: [&str; 10] = [
    "object.spec.replicas * 2 + 1",
    "cluster.metadata.name.startsWith('eu') && clusterLabels['tier'] == 'gold'",
    "object.spec.template.spec.containers.map(c, c.image).exists(i, i.contains(':'))",
    "quantity(cluster.status.resourceSummary.allocatable.cpu).isGreaterThan(quantity('4'))",
    "has(object.metadata.labels) ? object.metadata.labels.size() : 0",
    "[1, 2, 3].all(x, x > 0) || {'a': 1}.exists(k, k == 'a')",
    "'a.b.c' + \"(((\" + '''x\ny''' + r'\\d+' + b'\\x41'.string()",
    "cluster.?spec.?region.orValue('none') in ['eu-west', 'us-east']",
    "int(1.5e3) / 7 % 3 - -2",
    "semver('1.2.3').isGreaterThan(semver('1.0.0')) // comment + + +",
];

const TOKENS: [&str; 40] = [
    "1", "2u", "1.5", "-", "+", "*", "/", "%", "==", "!=", "<", "<=", "&&", "||", "!", "?", ":",
    " in ", ".", ".?", "(", ")", "[", "]", "{", "}", ",", "'s'", "\"", "'", "r'", "b'", "\\",
    "cluster", "object", "size", "x", "has", "all(x, ", "\n",
];

fn random_expression(rng: &mut Rng) -> String {
    (0..1 + rng.usize(..40))
        .map(|_| TOKENS[rng.usize(..TOKENS.len())])
        .collect()
}

fn mutate(rng: &mut Rng, source: &str) -> String {
    let mut s: Vec<char> = source.chars().collect();
    for _ in 0..1 + rng.usize(..4) {
        let at = rng.usize(..s.len() + 1);
        match rng.usize(..5) {
            0 if !s.is_empty() => {
                let end = (at + 1 + rng.usize(..8)).min(s.len());
                s.drain(at.min(end)..end);
            }
            1 => {
                // A long chain: the shape that used to overflow the stack.
                const PIECES: [&str; 9] = ["+1", ".a", " in x", "-", "!", "(", "[", "size(", "?1:"];
                let piece = PIECES[rng.usize(..PIECES.len())];
                let n = [10, 100, 400, 2_000][rng.usize(..4)];
                s.splice(at..at, piece.repeat(n).chars());
            }
            2 if !s.is_empty() => {
                let i = at.min(s.len() - 1);
                s[i] = char::from(32 + rng.usize(..95) as u8);
            }
            _ => {
                let t = TOKENS[rng.usize(..TOKENS.len())];
                s.splice(at..at, t.chars());
            }
        }
    }
    s.into_iter().collect()
}

fn run(cases: usize) -> (Vec<usize>, usize) {
    let engine = Engine::default();
    let cluster: Cluster = serde_json::from_value(json!({
        "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
        "metadata": {"name": "eu-1", "labels": {"tier": "gold"}},
        "spec": {"region": "eu-west"},
        "status": {"resourceSummary": {"allocatable": {"cpu": "16"}}}
    }))
    .expect("cluster");
    let object = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}}});
    let mut rng = Rng::with_seed(0x0ce1_f022_0000_0001);
    let mut panics = Vec::new();
    let mut compiled = 0;
    for case in 0..cases {
        let source = if rng.usize(..3) == 0 {
            random_expression(&mut rng)
        } else {
            let seed = SEEDS[rng.usize(..SEEDS.len())];
            mutate(&mut rng, seed)
        };
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let ok = engine.check(ExpressionKind::Value, &source).is_ok();
            let bound = engine.bind(Some(&object)).expect("bind");
            let _ = bound.evaluate(ExpressionKind::Value, &source, &cluster);
            ok
        }));
        match outcome {
            Ok(ok) => compiled += usize::from(ok),
            Err(_) => panics.push(case),
        }
    }
    (panics, compiled)
}

#[test]
fn thousands_of_random_and_mutated_expressions_never_panic_or_overflow_a_worker_stack() {
    let cases = 2_000;
    let (panics, compiled) = std::thread::Builder::new()
        .stack_size(2 * 1024 * 1024)
        .spawn(move || run(cases))
        .expect("spawn")
        .join()
        .expect("the fuzz thread itself does not panic");
    assert_eq!(panics, Vec::<usize>::new(), "cases that panicked");
    // Not every mutation is fatal: some expressions still compile, most do not.
    assert!(
        compiled > 50 && compiled < cases,
        "{compiled} of {cases} compiled"
    );
}
