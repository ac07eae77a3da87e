//! Several identities and RBAC, through kubectl 1.27 and 1.33: a user of the static token file,
//! bound by a RoleBinding to a Role that may read ConfigMaps in one namespace, against the admin.

mod common;

use std::path::PathBuf;

use common::TestServer;
use serde_json::Value;

const ALICE_TOKEN: &str = "alice-0123456789abcdef";

fn kubectls() -> Vec<PathBuf> {
    let found: Vec<PathBuf> = [27, 33]
        .into_iter()
        .filter_map(common::kubectl_release)
        .collect();
    if found.is_empty() {
        eprintln!("skipping: neither kubectl.1.27 nor kubectl.1.33 exists on this machine");
    }
    found
}

fn server() -> TestServer {
    TestServer::start_with(|config, dir| {
        let file = dir.join("tokens.csv");
        std::fs::write(
            &file,
            format!("{ALICE_TOKEN},alice,1001,\"team-a-devs,qa\"\nbob-token,bob,1002\n"),
        )
        .expect("write token file");
        config.token_auth_file = Some(file);
    })
}

const POLICY: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: cm-reader, namespace: team-a}
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice-reads-cm, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: cm-reader}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: team-a}
data: {color: blue}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: secret-settings, namespace: default}
data: {color: red}
"#;

const RBAC_EDITOR: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: rbac-editor, namespace: team-a}
rules:
- apiGroups: [rbac.authorization.k8s.io]
  resources: [roles, rolebindings]
  verbs: [create, get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice-edits-rbac, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: rbac-editor}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: cluster-wide-all}
rules:
- apiGroups: ["*"]
  resources: ["*"]
  verbs: ["*"]
"#;

#[test]
fn a_token_file_user_may_do_what_its_role_binding_grants_and_nothing_else() {
    for bin in kubectls() {
        let server = server();
        let policy = server.dir.path().join("policy.yaml");
        std::fs::write(&policy, POLICY).expect("write policy");
        common::kubectl_ok(&bin, &server, &["apply", "-f", policy.to_str().unwrap()]);

        let alice = |args: &[&str]| {
            let mut all = args.to_vec();
            all.extend(["--token", ALICE_TOKEN]);
            common::run_kubectl(&bin, &server, &all)
        };
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();

        let out = alice(&["auth", "whoami", "-o", "json"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let review: Value = serde_json::from_slice(&out.stdout).expect("json");
        let info = &review["status"]["userInfo"];
        assert_eq!(info["username"], "alice");
        assert_eq!(info["uid"], "1001");
        assert_eq!(
            info["groups"],
            serde_json::json!(["team-a-devs", "qa", "system:authenticated"])
        );
        let out = alice(&["auth", "whoami"]);
        let table = text(&out.stdout);
        assert!(
            table.contains("alice") && table.contains("team-a-devs"),
            "{table}"
        );

        for (args, want) in [
            (&["list", "configmaps", "-n", "team-a"][..], "yes"),
            (&["get", "configmaps/settings", "-n", "team-a"], "yes"),
            (&["create", "deployments", "-n", "team-a"], "no"),
            (&["list", "configmaps", "-n", "default"], "no"),
            (&["delete", "configmaps", "-n", "team-a"], "no"),
            (&["get", "/version"], "yes"),
        ] {
            let mut all = vec!["auth", "can-i"];
            all.extend_from_slice(args);
            let out = alice(&all);
            assert_eq!(text(&out.stdout).trim(), want, "can-i {args:?}");
            assert_eq!(out.status.success(), want == "yes", "can-i {args:?}");
        }
        let out = alice(&["auth", "can-i", "--list", "-n", "team-a"]);
        let rules = text(&out.stdout);
        assert!(
            rules
                .lines()
                .any(|l| l.starts_with("configmaps ") && l.contains("[get list]")),
            "{rules}"
        );
        assert!(!rules.contains("*.*"), "{rules}");

        let out = alice(&["get", "cm", "-n", "team-a", "-o", "name"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(text(&out.stdout).contains("configmap/settings"));
        let out = alice(&[
            "get",
            "cm",
            "settings",
            "-n",
            "team-a",
            "-o",
            "jsonpath={.data.color}",
        ]);
        assert_eq!(text(&out.stdout), "blue", "{}", text(&out.stderr));

        let out = alice(&["get", "cm", "-n", "default"]);
        assert!(!out.status.success());
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains(
                "Error from server (Forbidden): configmaps is forbidden: User \"alice\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""
            ),
            "{stderr}"
        );
        let out = alice(&["create", "configmap", "mine", "-n", "team-a"]);
        assert!(!out.status.success());
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains("User \"alice\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"team-a\""),
            "{stderr}"
        );
        let out = alice(&["get", "cm", "secret-settings", "-n", "default"]);
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains(
                "configmaps \"secret-settings\" is forbidden: User \"alice\" cannot get resource"
            ),
            "{stderr}"
        );

        // Another user of the file, bound to nothing: discovery and the self-reviews only.
        let bob = |args: &[&str]| {
            let mut all = args.to_vec();
            all.extend(["--token", "bob-token"]);
            common::run_kubectl(&bin, &server, &all)
        };
        let out = bob(&["auth", "can-i", "list", "configmaps", "-n", "team-a"]);
        assert_eq!(text(&out.stdout).trim(), "no");
        let out = bob(&["api-resources", "-o", "name"]);
        assert!(out.status.success(), "{}", text(&out.stderr));

        // The admin keeps every permission.
        let out = common::kubectl_ok(&bin, &server, &["get", "cm", "-n", "default", "-o", "name"]);
        assert!(out.contains("configmap/secret-settings"), "{out}");
        let out = common::kubectl_ok(
            &bin,
            &server,
            &["auth", "can-i", "create", "deployments", "-n", "team-a"],
        );
        assert_eq!(out.trim(), "yes");
        let out = common::kubectl_ok(&bin, &server, &["auth", "whoami", "-o", "json"]);
        assert!(out.contains("flotilla-admin"), "{out}");

        // The admin may act as alice (`--as`); alice may not act as anyone.
        let out = common::kubectl_ok(
            &bin,
            &server,
            &[
                "auth",
                "can-i",
                "list",
                "configmaps",
                "-n",
                "team-a",
                "--as",
                "alice",
            ],
        );
        assert_eq!(out.trim(), "yes");
        let out = common::run_kubectl(
            &bin,
            &server,
            &["get", "cm", "-n", "default", "--as", "alice"],
        );
        assert!(!out.status.success());
        assert!(
            text(&out.stderr).contains("configmaps is forbidden: User \"alice\" cannot list"),
            "{}",
            text(&out.stderr)
        );
        let out = common::kubectl_ok(
            &bin,
            &server,
            &[
                "auth",
                "whoami",
                "-o",
                "json",
                "--as",
                "carol",
                "--as-group",
                "auditors",
            ],
        );
        let review: Value = serde_json::from_str(&out).expect("json");
        assert_eq!(review["status"]["userInfo"]["username"], "carol");
        assert_eq!(
            review["status"]["userInfo"]["groups"],
            serde_json::json!(["auditors", "system:authenticated"])
        );
        let out = alice(&["get", "cm", "-n", "default", "--as", "flotilla-admin"]);
        assert!(!out.status.success());
        assert!(
            text(&out.stderr).contains("users \"flotilla-admin\" is forbidden: User \"alice\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"),
            "{}",
            text(&out.stderr)
        );

        // Simulated members (`/clusters/<name>`) are authorized as the same requests; only the
        // admin brings a member into being.
        let ghost = format!("{}/clusters/ghost", server.url);
        let out = alice(&["get", "cm", "-n", "team-a", "--server", &ghost]);
        assert!(!out.status.success());
        assert!(
            text(&out.stderr).contains("(NotFound)"),
            "{}",
            text(&out.stderr)
        );
        let member = format!("{}/clusters/member1", server.url);
        common::kubectl_ok(
            &bin,
            &server,
            &["create", "namespace", "team-a", "--server", &member],
        );
        common::kubectl_ok(
            &bin,
            &server,
            &[
                "create",
                "configmap",
                "in-member",
                "-n",
                "team-a",
                "--server",
                &member,
            ],
        );
        let out = alice(&[
            "get", "cm", "-n", "team-a", "-o", "name", "--server", &member,
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(text(&out.stdout).contains("configmap/in-member"));
        let out = alice(&["get", "cm", "-n", "default", "--server", &member]);
        assert!(
            text(&out.stderr).contains("configmaps is forbidden: User \"alice\""),
            "{}",
            text(&out.stderr)
        );

        // RBAC writers cannot grant what they do not hold (escalation check), and a binding's
        // roleRef cannot change.
        let editor = server.dir.path().join("editor.yaml");
        std::fs::write(&editor, RBAC_EDITOR).expect("write");
        common::kubectl_ok(&bin, &server, &["apply", "-f", editor.to_str().unwrap()]);
        let out = alice(&[
            "create",
            "role",
            "sneaky",
            "--verb=get",
            "--resource=secrets",
            "-n",
            "team-a",
        ]);
        assert!(!out.status.success());
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains(
                "roles.rbac.authorization.k8s.io \"sneaky\" is forbidden: user \"alice\""
            ) && stderr.contains("is attempting to grant RBAC permissions not currently held")
                && stderr.contains("Resources:[\"secrets\"]"),
            "{stderr}"
        );
        let out = alice(&[
            "create",
            "role",
            "cm-getter",
            "--verb=get",
            "--resource=configmaps",
            "-n",
            "team-a",
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let out = alice(&[
            "create",
            "rolebinding",
            "all",
            "--clusterrole=cluster-wide-all",
            "--user=alice",
            "-n",
            "team-a",
        ]);
        assert!(!out.status.success());
        assert!(
            text(&out.stderr).contains("not currently held"),
            "{}",
            text(&out.stderr)
        );
        let out = alice(&[
            "create",
            "rolebinding",
            "qa-reads",
            "--role=cm-getter",
            "--group=qa",
            "-n",
            "team-a",
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let out = common::run_kubectl(
            &bin,
            &server,
            &[
                "patch",
                "rolebinding",
                "qa-reads",
                "-n",
                "team-a",
                "--type=merge",
                "-p",
                r#"{"roleRef":{"name":"cm-reader"}}"#,
            ],
        );
        assert!(!out.status.success());
        assert!(
            text(&out.stderr).contains("cannot change roleRef"),
            "{}",
            text(&out.stderr)
        );

        // A revoked binding applies to the next request.
        common::kubectl_ok(
            &bin,
            &server,
            &["delete", "rolebinding", "alice-reads-cm", "-n", "team-a"],
        );
        let out = alice(&["get", "cm", "-n", "team-a"]);
        assert!(!out.status.success());
        assert!(
            text(&out.stderr).contains("(Forbidden)"),
            "{}",
            text(&out.stderr)
        );
    }
}

#[test]
fn a_bad_token_file_stops_the_server_naming_file_and_line_but_not_the_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("tokens.csv");
    std::fs::write(&file, "tok-1,alice,1\ntok-1,bob,2\n").expect("write");
    let mut config = flotilla_apiserver::Config::new(dir.path().join("data"));
    config.token_auth_file = Some(file);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let err = rt
        .block_on(flotilla_apiserver::start(config, std::future::pending()))
        .expect_err("a duplicate token is refused");
    let msg = err.to_string();
    assert!(
        msg.contains("tokens.csv:2: the token of line 1 again"),
        "{msg}"
    );
    assert!(!msg.contains("tok-1"), "{msg}");
}

const SERVICE_ACCOUNT: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: team-b}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: robot, namespace: team-b}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: cm-reader, namespace: team-b}
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: robot-reads-cm, namespace: team-b}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: cm-reader}
subjects:
- {kind: ServiceAccount, name: robot, namespace: team-b}
"#;

#[test]
fn kubectl_create_token_issues_service_account_tokens_that_rbac_authorizes_until_the_account_goes()
{
    for bin in kubectls() {
        let server = TestServer::start_with(|config, _| config.tls = true);
        let file = server.dir.path().join("sa.yaml");
        std::fs::write(&file, SERVICE_ACCOUNT).expect("write");
        common::kubectl_ok(&bin, &server, &["apply", "-f", file.to_str().unwrap()]);
        let token = common::kubectl_ok(
            &bin,
            &server,
            &[
                "create",
                "token",
                "robot",
                "-n",
                "team-b",
                "--duration",
                "20m",
            ],
        );
        let token = token.trim().to_owned();
        assert_eq!(token.split('.').count(), 3, "{token}");
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let robot = |args: &[&str]| {
            let mut all = args.to_vec();
            all.extend(["--token", token.as_str()]);
            common::run_kubectl(&bin, &server, &all)
        };
        let out = robot(&["auth", "whoami", "-o", "json"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let review: Value = serde_json::from_slice(&out.stdout).expect("json");
        let info = &review["status"]["userInfo"];
        assert_eq!(info["username"], "system:serviceaccount:team-b:robot");
        assert_eq!(
            info["groups"],
            serde_json::json!([
                "system:serviceaccounts",
                "system:serviceaccounts:team-b",
                "system:authenticated"
            ])
        );
        let out = robot(&["get", "cm", "-n", "team-b", "-o", "name"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let out = robot(&["get", "cm", "-n", "default"]);
        assert!(
            text(&out.stderr).contains(
                "User \"system:serviceaccount:team-b:robot\" cannot list resource \"configmaps\""
            ),
            "{}",
            text(&out.stderr)
        );
        // Lifetimes kube-apiserver refuses are refused here too.
        let out = common::run_kubectl(
            &bin,
            &server,
            &[
                "create",
                "token",
                "robot",
                "-n",
                "team-b",
                "--duration",
                "5m",
            ],
        );
        assert!(!out.status.success());
        assert!(
            text(&out.stderr).contains("may not specify a duration less than 10 minutes"),
            "{}",
            text(&out.stderr)
        );
        let out = common::run_kubectl(
            &bin,
            &server,
            &["create", "token", "nobody", "-n", "team-b"],
        );
        assert!(text(&out.stderr).contains("NotFound") || text(&out.stderr).contains("not found"));
        // Deleting the ServiceAccount (and making another of the same name) revokes the token.
        common::kubectl_ok(&bin, &server, &["delete", "sa", "robot", "-n", "team-b"]);
        common::kubectl_ok(&bin, &server, &["create", "sa", "robot", "-n", "team-b"]);
        let out = robot(&["get", "cm", "-n", "team-b"]);
        assert!(!out.status.success());
        assert!(
            text(&out.stderr).contains("Unauthorized"),
            "{}",
            text(&out.stderr)
        );
    }
}
