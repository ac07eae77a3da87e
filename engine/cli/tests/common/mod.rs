//! Shared by the CLI's integration tests that run `flotilla up` as a child process.

#![allow(dead_code, reason = "each test binary uses a different part")]

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A child process killed (SIGKILL) when dropped.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `flotilla up --port 0 <args>` with its data and kubeconfig in `dir`; returns once it prints
/// that it is ready, with the kubeconfig it wrote. Its log goes to stderr (`quiet`: nowhere).
pub fn up(dir: &Path, args: &[&str], quiet: bool) -> (Proc, PathBuf) {
    let kubeconfig = dir.join("kubeconfig");
    let mut child = Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .args(["up", "--port", "0"])
        .args(args)
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .stderr(if quiet {
            Stdio::null()
        } else {
            Stdio::inherit()
        })
        .spawn()
        .expect("start flotilla up");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.starts_with("ready in") {
                let _ = tx.send(());
            }
        }
    });
    let proc = Proc(child);
    rx.recv_timeout(Duration::from_secs(90))
        .expect("flotilla up became ready");
    (proc, kubeconfig)
}
