//! Every binary installs a tracing subscriber: `RUST_LOG` sets the level, `--log-format json`
//! writes one JSON object per line on standard error.

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Starts `flotilla <args> up` with `RUST_LOG=<filter>`, waits until it is ready, stops it, and
/// returns its standard error lines.
fn up_stderr(global: &[&str], filter: &str) -> Vec<String> {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let mut child = Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .args(global)
        .args(["up", "--port", "0", "--members", "0"])
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .arg("--kubeconfig")
        .arg(dir.path().join("kubeconfig"))
        .env("RUST_LOG", filter)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("flotilla up starts");
    let stdout = child.stdout.take().expect("stdout");
    let stderr = child.stderr.take().expect("stderr");
    let (ready_tx, ready_rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.starts_with("ready in") {
                let _ = ready_tx.send(());
            }
        }
    });
    let (lines_tx, lines_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let lines: Vec<String> = BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .collect();
        let _ = lines_tx.send(lines);
    });
    let ready = ready_rx.recv_timeout(Duration::from_secs(90));
    // SIGTERM, so the shutdown path logs too.
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let exited = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        matches!(child.try_wait(), Ok(Some(_)))
    });
    if !exited {
        let _ = child.kill();
        let _ = child.wait();
    }
    ready.expect("flotilla up became ready");
    lines_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("stderr closed")
}

#[test]
fn json_log_format_writes_one_json_object_per_line_with_the_ready_and_stop_events() {
    let lines = up_stderr(&["--log-format", "json"], "info");
    let events: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let messages: Vec<&str> = events
        .iter()
        .filter_map(|e| e["fields"]["message"].as_str())
        .collect();
    assert!(messages.contains(&"control plane ready"), "{messages:?}");
    assert!(
        messages.iter().any(|m| m.starts_with("signal received")),
        "{messages:?}"
    );
    let ready = events
        .iter()
        .find(|e| e["fields"]["message"] == "control plane ready")
        .expect("ready event");
    assert_eq!(ready["level"], "INFO");
    assert!(
        ready["fields"]["url"]
            .as_str()
            .is_some_and(|u| u.starts_with("https://"))
    );
}

#[test]
fn rust_log_sets_the_level_and_an_invalid_filter_is_reported_not_silenced() {
    let debug = up_stderr(&[], "debug");
    assert!(
        debug.iter().any(|l| l.contains("DEBUG")),
        "no debug lines: {debug:?}"
    );

    let warn = up_stderr(&[], "warn");
    assert!(
        !warn.iter().any(|l| l.contains(" INFO ")),
        "info lines at warn: {warn:?}"
    );

    let invalid = up_stderr(&[], "flotilla=notalevel");
    assert!(
        invalid
            .iter()
            .any(|l| l.contains("RUST_LOG is not a valid filter")),
        "{invalid:?}"
    );
    assert!(
        invalid.iter().any(|l| l.contains("control plane ready")),
        "{invalid:?}"
    );
}
