//! The profile rules a plugin author meets: `validate --profile` builds profiles and warns about
//! ones no policy uses; `profile default` prints the default profile (which, loaded back, changes
//! nothing); a plain list replaces a point's built-ins and `{add: [...]}` extends them, and
//! `explain` says which; CEL scores are checked against 0..100 when constant, and CEL syntax
//! errors name the column and the offending token.

use std::path::{Path, PathBuf};
use std::process::Output;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn run(dir: &Path, args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run flotilla")
}

fn ok(dir: &Path, args: &[&str]) -> (String, String) {
    let o = run(dir, args);
    assert!(o.status.success(), "{args:?}:\n{}", text(&o.stderr));
    (text(&o.stdout), text(&o.stderr))
}

fn failed(dir: &Path, args: &[&str]) -> String {
    let o = run(dir, args);
    assert!(
        !o.status.success(),
        "{args:?} succeeded:\n{}",
        text(&o.stdout)
    );
    text(&o.stderr)
}

/// A generated project's scenario: three clusters, east (most room) wins a one-cluster spread;
/// edge is labelled example.com/preferred.
fn scenario(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("profile-rules-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir");
    ok(
        &dir,
        &["plugin", "new", "--lang", "c", "--point", "score", "p"],
    );
    dir.join("p")
}

fn profile(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: flotilla.dev/v1alpha1\nkind: SchedulerProfile\nmetadata: {{name: {name}}}\nspec:\n{spec}"
    )
}

fn placements(table: &str) -> Vec<String> {
    table
        .lines()
        .map(str::trim)
        .filter(|l| l.contains("replicas=") && !l.starts_with("work"))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

const NOW: &str = "2025-01-01T00:00:00Z";

fn plan(dir: &Path, profile: Option<&str>) -> Vec<String> {
    let mut args = vec!["plan", "-f", "scenario/", "-o", "table", "--now", NOW];
    if let Some(p) = profile {
        args.extend(["--profile", p]);
    }
    placements(&ok(dir, &args).0)
}

/// A CEL score of 100 for the preferred cluster, in a list that extends or replaces the built-ins.
const CEL_SCORE: &str = "name: pref\n      cel: {expression: 'has(cluster.metadata.labels) && \"example.com/preferred\" in cluster.metadata.labels ? 100 : 0'}";

#[test]
fn the_printed_default_profile_changes_nothing() {
    let dir = scenario("default");
    let (printed, _) = ok(&dir, &["profile", "default"]);
    for name in [
        "APIEnablement",
        "TaintToleration",
        "ClusterAffinity",
        "SpreadConstraint",
        "ClusterEviction",
        "ClusterLocality",
        "Duplicated",
        "StaticWeight",
        "DynamicWeight",
        "Aggregated",
        "OverridePolicy",
    ] {
        assert!(
            printed.contains(&format!("- name: {name}\n")),
            "{name}: {printed}"
        );
    }
    std::fs::write(dir.join("default.yaml"), &printed).expect("write");
    assert_eq!(plan(&dir, Some("default.yaml")), plan(&dir, None));
    assert_eq!(plan(&dir, None), ["east replicas=6"]);
}

#[test]
fn add_extends_a_plain_list_replaces_and_explain_says_which() {
    let dir = scenario("modes");
    std::fs::write(
        dir.join("add.yaml"),
        profile(
            "default-scheduler",
            &format!("  scores:\n    add:\n    - {CEL_SCORE}\n"),
        ),
    )
    .expect("write");
    std::fs::write(
        dir.join("replace.yaml"),
        profile(
            "default-scheduler",
            &format!("  scores:\n    - {CEL_SCORE}\n"),
        ),
    )
    .expect("write");
    assert_eq!(plan(&dir, Some("add.yaml")), ["edge replicas=6"]);
    assert_eq!(plan(&dir, Some("replace.yaml")), ["edge replicas=6"]);

    let explain = |p: &str| {
        ok(
            &dir,
            &[
                "explain",
                "-f",
                "scenario/",
                "--profile",
                p,
                "--resource",
                "deployment/default/web",
                "--now",
                NOW,
            ],
        )
        .0
    };
    let added = explain("add.yaml");
    assert!(
        added.contains(
            "spec.scores: extends the built-ins (ClusterLocality, ClusterAffinity) with [pref]"
        ),
        "{added}"
    );
    // Both built-in scorers still run.
    assert!(added.contains("ClusterLocality"), "{added}");
    let replaced = explain("replace.yaml");
    assert!(
        replaced.contains("spec.scores: replaces the built-ins with [pref]; drops ClusterLocality, ClusterAffinity (use scores: {add: [...]} to keep them)"),
        "{replaced}"
    );

    // Errors in an added entry name the add list; neither a list nor {add} is refused clearly.
    std::fs::write(
        dir.join("bad.yaml"),
        profile(
            "default-scheduler",
            "  scores:\n    add:\n    - name: NoSuchScore\n",
        ),
    )
    .expect("write");
    let e = failed(
        &dir,
        &["validate", "-f", "scenario/", "--profile", "bad.yaml"],
    );
    assert!(
        e.contains("spec.scores.add[0]: unknown plugin \"NoSuchScore\""),
        "{e}"
    );
    std::fs::write(
        dir.join("shape.yaml"),
        profile("default-scheduler", "  scores: {append: []}\n"),
    )
    .expect("write");
    let e = failed(
        &dir,
        &["validate", "-f", "scenario/", "--profile", "shape.yaml"],
    );
    assert!(e.contains("unknown field `append`"), "{e}");
    std::fs::write(
        dir.join("scalar.yaml"),
        profile("default-scheduler", "  scores: 3\n"),
    )
    .expect("write");
    let e = failed(
        &dir,
        &["validate", "-f", "scenario/", "--profile", "scalar.yaml"],
    );
    assert!(
        e.contains("a list of plugins (replaces the built-ins) or {add: [...]} (extends them)"),
        "{e}"
    );
}

#[test]
fn validate_profile_warns_about_profiles_no_policy_uses() {
    let dir = scenario("unused");
    std::fs::write(
        dir.join("named.yaml"),
        profile("gpu", &format!("  scores:\n    add:\n    - {CEL_SCORE}\n")),
    )
    .expect("write");
    let (out, err) = ok(
        &dir,
        &["validate", "-f", "scenario/", "--profile", "named.yaml"],
    );
    assert!(out.contains("profile gpu: valid"), "{out}");
    assert!(
        err.contains("warning: profile gpu is not used by any policy of the input: policies without spec.schedulerName use default-scheduler"),
        "{err}"
    );
    // A default-scheduler profile is used by the policy without schedulerName: no warning.
    std::fs::write(
        dir.join("default.yaml"),
        profile(
            "default-scheduler",
            &format!("  scores:\n    add:\n    - {CEL_SCORE}\n"),
        ),
    )
    .expect("write");
    let (_, err) = ok(
        &dir,
        &["validate", "-f", "scenario/", "--profile", "default.yaml"],
    );
    assert!(!err.contains("warning"), "{err}");
    // A policy naming the profile uses it.
    let w = std::fs::read_to_string(dir.join("scenario/workload.yaml")).expect("workload");
    std::fs::write(
        dir.join("scenario/workload.yaml"),
        w.replace("  placement:\n", "  schedulerName: gpu\n  placement:\n"),
    )
    .expect("write");
    let (_, err) = ok(
        &dir,
        &["validate", "-f", "scenario/", "--profile", "named.yaml"],
    );
    assert!(!err.contains("warning"), "{err}");
    // Built as plan builds it: a profile that does not build fails validation.
    std::fs::write(
        dir.join("broken.yaml"),
        profile(
            "gpu",
            "  filters:\n    add:\n    - name: w\n      wasm: {path: missing.wasm}\n",
        ),
    )
    .expect("write");
    let e = failed(
        &dir,
        &["validate", "-f", "scenario/", "--profile", "broken.yaml"],
    );
    assert!(e.contains("spec.filters.add[0] (w)"), "{e}");
}

#[test]
fn cel_scores_outside_0_to_100_and_syntax_errors_are_refused_with_position() {
    let dir = scenario("cel");
    let score = |expr: &str| {
        profile(
            "default-scheduler",
            &format!("  scores:\n    add:\n    - name: s\n      cel: {{expression: '{expr}'}}\n"),
        )
    };
    for (expr, want) in [
        ("5000", "cel.expression: score 5000 is outside 0..100"),
        ("-1", "cel.expression: score -1 is outside 0..100"),
        (
            "1 +* 2",
            "column 4: syntax error: extraneous input '*' expecting",
        ),
        (
            "\"abc",
            "column 1: syntax error: token recognition error at: '\"abc'",
        ),
        (
            "cluster.metadata.name == \"a\" ? 100 : 0)",
            "syntax error: extraneous input ')' expecting <EOF>",
        ),
    ] {
        std::fs::write(dir.join("cel.yaml"), score(expr)).expect("write");
        let e = failed(
            &dir,
            &["validate", "-f", "scenario/", "--profile", "cel.yaml"],
        );
        assert!(e.contains(want), "{expr}: {e}");
        assert!(
            !e.contains("Syntax error"),
            "{expr}: the parser's prefix repeated: {e}"
        );
    }
    // In range, constant or not: valid.
    for expr in ["100", "0", "cluster.metadata.name == \"edge\" ? 5000 : 0"] {
        std::fs::write(dir.join("cel.yaml"), score(expr)).expect("write");
        ok(
            &dir,
            &["validate", "-f", "scenario/", "--profile", "cel.yaml"],
        );
    }
    // Not constant: clamped at run time (edge's 5000 counts as 100, the others' 0).
    assert_eq!(plan(&dir, Some("cel.yaml")), ["edge replicas=6"]);
}
