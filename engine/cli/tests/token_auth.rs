//! `flotilla up --token-auth-file`: a user of the file is who `kubectl auth whoami` says, and may
//! do only what RBAC grants; the admin kubeconfig keeps every permission. Skips, with a printed
//! reason, only when no kubectl is on PATH.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

fn kubectl() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
}

fn run(bin: &Path, dir: &Path, args: &[&str]) -> Output {
    std::process::Command::new(bin)
        .arg("--kubeconfig")
        .arg(dir.join("kubeconfig"))
        .arg("--cache-dir")
        .arg(dir.join("kube-cache"))
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .expect("kubectl runs")
}

#[test]
fn token_file_users_are_authenticated_and_restricted_by_rbac() {
    let Some(bin) = kubectl() else {
        eprintln!("skipping: no kubectl on PATH");
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, "viewer-token-42,viewer,7,\"viewers\"\n").expect("write");
    let (_up, _) = common::up(
        dir.path(),
        &[
            "--members",
            "0",
            "--no-controllers",
            "--token-auth-file",
            tokens.to_str().unwrap(),
        ],
        true,
    );
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let admin = |args: &[&str]| {
        let out = run(&bin, dir.path(), args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        text(&out.stdout)
    };
    let viewer = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--token", "viewer-token-42"]);
        run(&bin, dir.path(), &all)
    };

    let out = viewer(&[
        "auth",
        "whoami",
        "-o",
        "jsonpath={.status.userInfo.username}",
    ]);
    assert_eq!(text(&out.stdout), "viewer", "{}", text(&out.stderr));
    let out = viewer(&["get", "namespaces"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains(
            "namespaces is forbidden: User \"viewer\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope"
        ),
        "{}",
        text(&out.stderr)
    );

    // A ClusterRoleBinding of the group lets every member list namespaces.
    admin(&[
        "create",
        "clusterrole",
        "ns-reader",
        "--verb=get,list",
        "--resource=namespaces",
    ]);
    admin(&[
        "create",
        "clusterrolebinding",
        "viewers-read-ns",
        "--clusterrole=ns-reader",
        "--group=viewers",
    ]);
    let out = viewer(&["get", "namespaces", "-o", "name"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("namespace/default"));
    let out = viewer(&["create", "namespace", "nope"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("(Forbidden)"),
        "{}",
        text(&out.stderr)
    );
    assert!(admin(&["auth", "can-i", "create", "namespaces"]).trim() == "yes");
}
