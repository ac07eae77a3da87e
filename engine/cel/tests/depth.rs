//! Deep expressions: chains of operators, members and `in` (and deep brackets) are refused with
//! their position before parsing when too deep, and otherwise compile and evaluate, on a tokio
//! worker's 2 MiB stack as on an 8 MiB main-thread-sized one, without overflowing the stack.

use std::hint::black_box;

use flotilla_api::cluster::Cluster;
use flotilla_cel::{Engine, ExpressionEngine, ExpressionErrorKind, ExpressionKind, Limits};
use serde_json::{Value, json};

/// A tokio worker thread's default stack.
const WORKER_STACK: usize = 2 * 1024 * 1024;
/// A main thread's usual stack (`ulimit -s` 8 MiB).
const MAIN_STACK: usize = 8 * 1024 * 1024;

fn cluster() -> Cluster {
    serde_json::from_value(json!({
        "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
        "metadata": {"name": "eu-1"}
    }))
    .expect("cluster")
}

/// `first` then `n - 1` times `sep term`.
fn chain(first: &str, sep: &str, term: &str, n: usize) -> String {
    let mut s = first.to_owned();
    for _ in 1..n {
        s.push_str(sep);
        s.push_str(term);
    }
    s
}

/// The attack shapes at `n` terms.
fn shapes(n: usize) -> Vec<String> {
    vec![
        chain("1", " + ", "1", n),
        chain("1", "+", "1", n),
        chain("cluster", ".", "a", n),
        chain("1", " in ", "1", n),
        chain("1", " in ", "[1]", n),
        chain("true", " && ", "true", n),
        chain("1", " < ", "2", n),
        chain("true ? 1", " : true ? 1", "", n) + " : 2",
        format!("{}1", "-".repeat(n)),
        format!("{}true", "!".repeat(n)),
        format!("{}1{}", "(".repeat(n), ")".repeat(n)),
        format!("{}[1]{}", "size(".repeat(n), ")".repeat(n)),
    ]
}

fn on_stack<T: Send + 'static>(size: usize, f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(size)
        .spawn(f)
        .expect("spawn")
        .join()
        .expect("no panic")
}

fn evaluate(engine: &Engine, source: &str) -> Result<Value, flotilla_cel::ExpressionError> {
    engine
        .bind(None)?
        .evaluate(ExpressionKind::Value, source, &cluster())
}

/// Every shape at 100, 400, 2,000 and 10,000 terms: each compiles or is refused, and every
/// refusal of a chain longer than the limit says which limit, with a column for the depth (the
/// size limit has none). Run with the default size limit and with one 100 times larger, so that
/// the depth limit alone must stop the longest chains.
fn every_size_answers() -> usize {
    let mut large = Limits::default();
    large.max_expression_bytes *= 100;
    [Engine::default(), Engine::new(large)]
        .iter()
        .map(answers)
        .sum()
}

fn answers(engine: &Engine) -> usize {
    let mut refused = 0;
    for n in [100, 400, 2_000, 10_000] {
        for source in shapes(n) {
            let checked = engine.check(ExpressionKind::Value, &source);
            let evaluated = evaluate(engine, &source);
            if n >= 400 {
                let e = checked.expect_err("longer than the depth limit");
                assert_eq!(e.kind, ExpressionErrorKind::Syntax, "{n}: {e}");
                let by_size = e.message.contains("bytes, more than the limit");
                let by_depth = e.column.is_some()
                    && (e.message.contains("deeper than the limit of 250")
                        || e.message.contains("nests deeper than 64"));
                assert!(by_size || by_depth, "{n}: {e}");
                assert!(evaluated.is_err());
                refused += 1;
            }
        }
    }
    refused
}

#[test]
fn long_chains_are_refused_not_overflowing_a_tokio_worker_stack() {
    assert_eq!(on_stack(WORKER_STACK, every_size_answers), 2 * 3 * 12);
}

#[test]
fn long_chains_are_refused_not_overflowing_a_main_thread_stack() {
    assert_eq!(on_stack(MAIN_STACK, every_size_answers), 2 * 3 * 12);
}

#[test]
fn a_chain_of_400_terms_is_refused_at_the_term_past_the_limit() {
    let engine = Engine::default();
    let e = engine
        .check(ExpressionKind::Value, &chain("1", "+", "1", 400))
        .expect_err("too deep");
    // `1+1+…`: the 251st `+` (column 2·251) passes the limit of 250.
    assert_eq!(e.column, Some(502), "{e}");
    assert!(e.message.starts_with("column 502:"), "{e}");
    assert!(e.message.contains("limit of 250"), "{e}");
}

/// Recurses until less than `left` bytes of stack remain, then runs `f`: a caller already deep
/// in its stack.
fn deep_caller<T>(left: usize, f: &mut dyn FnMut() -> T) -> T {
    let frame = black_box([0u8; 1024]);
    if stacker::remaining_stack().is_none_or(|r| r < left) {
        return f();
    }
    let out = deep_caller(left, f);
    black_box(&frame);
    out
}

#[test]
fn the_deepest_accepted_expressions_compile_and_evaluate_on_a_nearly_full_worker_stack() {
    let limit = Limits::default().max_depth;
    let got = on_stack(WORKER_STACK, move || {
        // Exactly at the limit: 250 operators, 250 members, 62 groups of 4 levels each.
        let cases = [
            (chain("1", "+", "1", limit + 1), json!(limit + 1)),
            (chain("2", "*", "1", limit + 1), json!(2)),
            (chain("true", " && ", "true", limit + 1), json!(true)),
            (
                format!("{}1{}", "(".repeat(limit / 4), ")".repeat(limit / 4)),
                json!(1),
            ),
            (
                format!("{}1{}", "[".repeat(limit / 4), "]".repeat(limit / 4)),
                (0..limit / 4).fold(json!(1), |v, _| json!([v])),
            ),
        ];
        let engine = Engine::default();
        let mut answers = Vec::new();
        deep_caller(200 * 1024, &mut || {
            for (source, want) in &cases {
                let got = evaluate(&engine, source).unwrap_or_else(|e| panic!("{e}"));
                answers.push(got == *want);
            }
            // A member chain at the limit compiles; `cluster` has no such keys at run time.
            let members = chain("cluster", ".", "a", limit + 1);
            answers.push(engine.check(ExpressionKind::Value, &members).is_ok());
            answers.push(evaluate(&engine, &members).is_err());
        });
        answers
    });
    assert_eq!(got, vec![true; 7]);
}
