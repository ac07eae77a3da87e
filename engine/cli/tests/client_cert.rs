//! `flotilla up --client-ca-file`: kubectl with a client-certificate kubeconfig is the
//! certificate's CN, in the groups of its O fields, and RBAC restricts it; a certificate from
//! another CA is kube-apiserver's 401. Certificates are made with the openssl CLI (it writes
//! several O fields, as kubeadm's do). Skips, with a printed reason, only when kubectl or openssl
//! is not on PATH.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        text(&out.stderr)
    );
}

/// A CA `name` (`<name>.crt`, `<name>.key`) in `dir`.
fn make_ca(dir: &Path, name: &str) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.crt"),
            "-subj",
            &format!("/CN={name}"),
            "-days",
            "2",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
        ],
    );
}

/// A client certificate `user` (`<user>.crt`, `<user>.key`) for `subject`, signed by CA `ca`.
fn make_client(dir: &Path, ca: &str, user: &str, subject: &str, serial: u32) {
    std::fs::write(
        dir.join("client.ext"),
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n",
    )
    .expect("write");
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &format!("{user}.key"),
            "-out",
            &format!("{user}.csr"),
            "-subj",
            subject,
        ],
    );
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &format!("{user}.csr"),
            "-CA",
            &format!("{ca}.crt"),
            "-CAkey",
            &format!("{ca}.key"),
            "-set_serial",
            &serial.to_string(),
            "-days",
            "1",
            "-extfile",
            "client.ext",
            "-out",
            &format!("{user}.crt"),
        ],
    );
}

/// The value of `key:` in the admin kubeconfig.
fn kubeconfig_value(kubeconfig: &str, key: &str) -> String {
    kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{key}: ")))
        .unwrap_or_else(|| panic!("{key} in the kubeconfig"))
        .to_owned()
}

/// A kubeconfig for the server of the admin kubeconfig `admin`, authenticating with
/// `<user>.crt` and no token.
fn cert_kubeconfig(dir: &Path, admin: &Path, user: &str) -> PathBuf {
    let admin = std::fs::read_to_string(admin).expect("admin kubeconfig");
    let server = kubeconfig_value(&admin, "server");
    let ca = kubeconfig_value(&admin, "certificate-authority-data");
    let path = dir.join(format!("{user}.kubeconfig"));
    let cert = dir.join(format!("{user}.crt"));
    let key = dir.join(format!("{user}.key"));
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: flotilla\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: {user}\n  user:\n    client-certificate: {}\n    client-key: {}\ncontexts:\n- name: {user}\n  context:\n    cluster: flotilla\n    user: {user}\n    namespace: default\ncurrent-context: {user}\n",
            cert.display(),
            key.display()
        ),
    )
    .expect("write kubeconfig");
    path
}

fn kubectl(bin: &Path, dir: &Path, kubeconfig: &Path, args: &[&str]) -> Output {
    Command::new(bin)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(dir.join("kube-cache"))
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .expect("kubectl runs")
}

#[test]
fn client_certificates_authenticate_their_cn_and_organizations_and_rbac_restricts_them() {
    let (Some(bin), Some(_)) = (on_path("kubectl"), on_path("openssl")) else {
        eprintln!("skipping: kubectl or openssl not on PATH");
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    make_ca(dir, "team-ca");
    make_ca(dir, "other-ca");
    make_client(dir, "team-ca", "alice", "/O=devs/O=qa/CN=alice", 2);
    make_client(dir, "team-ca", "bob", "/CN=bob", 3);
    make_client(
        dir,
        "other-ca",
        "mallory",
        "/O=system:masters/CN=mallory",
        4,
    );
    let ca_file = dir.join("team-ca.crt");
    let (_up, admin) = common::up(
        dir,
        &[
            "--members",
            "0",
            "--no-controllers",
            "--client-ca-file",
            ca_file.to_str().unwrap(),
        ],
        true,
    );
    let as_admin = |args: &[&str]| {
        let out = kubectl(&bin, dir, &admin, args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        text(&out.stdout)
    };
    let alice = cert_kubeconfig(dir, &admin, "alice");
    let bob = cert_kubeconfig(dir, &admin, "bob");
    let mallory = cert_kubeconfig(dir, &admin, "mallory");

    // whoami: the CN, the O fields as groups.
    let out = kubectl(&bin, dir, &alice, &["auth", "whoami", "-o", "json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let review: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(review["status"]["userInfo"]["username"], "alice");
    assert_eq!(
        review["status"]["userInfo"]["groups"],
        serde_json::json!(["devs", "qa", "system:authenticated"])
    );
    let out = kubectl(
        &bin,
        dir,
        &bob,
        &[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ],
    );
    assert_eq!(text(&out.stdout), "bob", "{}", text(&out.stderr));

    // No RBAC: 403 worded as kube-apiserver words it.
    let out = kubectl(&bin, dir, &bob, &["get", "secrets"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains(
            "secrets is forbidden: User \"bob\" cannot list resource \"secrets\" in API group \"\" in the namespace \"default\""
        ),
        "{}",
        text(&out.stderr)
    );
    // A binding of alice's group (an O field) lets her read secrets; bob still may not.
    as_admin(&[
        "create",
        "role",
        "secret-reader",
        "--verb=get,list",
        "--resource=secrets",
    ]);
    as_admin(&[
        "create",
        "rolebinding",
        "devs-read-secrets",
        "--role=secret-reader",
        "--group=devs",
    ]);
    let out = kubectl(&bin, dir, &alice, &["get", "secrets"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = kubectl(&bin, dir, &bob, &["get", "secrets"]);
    assert!(!out.status.success());

    // Another CA's certificate (claiming system:masters) is 401, whatever it claims.
    let out = kubectl(&bin, dir, &mallory, &["get", "secrets"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("Unauthorized"),
        "{}",
        text(&out.stderr)
    );
    // ... with kube-apiserver's Status body.
    let server = kubeconfig_value(&std::fs::read_to_string(&admin).unwrap(), "server");
    std::fs::write(
        dir.join("server-ca.crt"),
        as_admin(&[
            "config",
            "view",
            "--raw",
            "-o",
            "jsonpath={.clusters[0].cluster.certificate-authority-data}",
        ]),
    )
    .expect("write");
    let decoded = Command::new("openssl")
        .current_dir(dir)
        .args([
            "base64",
            "-d",
            "-A",
            "-in",
            "server-ca.crt",
            "-out",
            "server-ca.pem",
        ])
        .output()
        .expect("openssl runs");
    assert!(decoded.status.success(), "{}", text(&decoded.stderr));
    if on_path("curl").is_some() {
        let out = Command::new("curl")
            .current_dir(dir)
            .args([
                "-sS",
                "--cacert",
                "server-ca.pem",
                "--cert",
                "mallory.crt",
                "--key",
                "mallory.key",
                "-w",
                "\n%{http_code}",
                &format!("{server}/api/v1/namespaces/default/secrets"),
            ])
            .output()
            .expect("curl runs");
        let body = text(&out.stdout);
        let (json, code) = body.rsplit_once('\n').expect("status code line");
        assert_eq!(code, "401", "{body}");
        let status: serde_json::Value = serde_json::from_str(json).expect("a Status");
        assert_eq!(
            status,
            serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "message": "Unauthorized", "reason": "Unauthorized", "code": 401})
        );
        // The team CA's certificate over the same path is answered (200).
        let out = Command::new("curl")
            .current_dir(dir)
            .args([
                "-sS",
                "-o",
                "/dev/null",
                "--cacert",
                "server-ca.pem",
                "--cert",
                "alice.crt",
                "--key",
                "alice.key",
                "-w",
                "%{http_code}",
                &format!("{server}/api/v1/namespaces/default/secrets"),
            ])
            .output()
            .expect("curl runs");
        assert_eq!(text(&out.stdout), "200", "{}", text(&out.stderr));
    }
    // The admin token still works beside certificates.
    assert!(as_admin(&["auth", "can-i", "create", "secrets"]).trim() == "yes");
}

#[test]
fn default_cluster_roles_view_edit_admin_grant_what_kubernetes_grants() {
    let (Some(bin), Some(_)) = (on_path("kubectl"), on_path("openssl")) else {
        eprintln!("skipping: kubectl or openssl not on PATH");
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    make_ca(dir, "team-ca");
    for (i, user) in ["viewer", "editor", "boss", "nobody"].iter().enumerate() {
        make_client(
            dir,
            "team-ca",
            user,
            &format!("/CN={user}"),
            u32::try_from(i).unwrap() + 10,
        );
    }
    let ca_file = dir.join("team-ca.crt");
    let (_up, admin) = common::up(
        dir,
        &[
            "--members",
            "0",
            "--no-controllers",
            "--client-ca-file",
            ca_file.to_str().unwrap(),
        ],
        true,
    );
    let as_admin = |args: &[&str]| {
        let out = kubectl(&bin, dir, &admin, args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        text(&out.stdout)
    };
    let users: std::collections::HashMap<&str, PathBuf> = ["viewer", "editor", "boss", "nobody"]
        .into_iter()
        .map(|u| (u, cert_kubeconfig(dir, &admin, u)))
        .collect();
    let run = |user: &str, args: &[&str]| kubectl(&bin, dir, &users[user], args);
    let ok = |user: &str, args: &[&str]| {
        let out = run(user, args);
        assert!(
            out.status.success(),
            "{user} {args:?}: {}",
            text(&out.stderr)
        );
        text(&out.stdout)
    };
    let forbidden = |user: &str, args: &[&str]| {
        let out = run(user, args);
        assert!(!out.status.success(), "{user} {args:?} was allowed");
        assert!(
            text(&out.stderr).contains(&format!("is forbidden: User \"{user}\" cannot")),
            "{user} {args:?}: {}",
            text(&out.stderr)
        );
    };
    let can_i = |user: &str, args: &[&str]| {
        let mut all = vec!["auth", "can-i"];
        all.extend(args);
        text(&run(user, &all).stdout).trim().to_owned()
    };

    // The bootstrap policy is stored: kubectl lists it like any ClusterRole.
    let roles = as_admin(&["get", "clusterroles", "-o", "name"]);
    for role in [
        "cluster-admin",
        "admin",
        "edit",
        "view",
        "system:discovery",
        "system:basic-user",
        "karmada-view",
        "karmada-edit",
    ] {
        assert!(
            roles
                .lines()
                .any(|l| l == format!("clusterrole.rbac.authorization.k8s.io/{role}")),
            "{role} in {roles}"
        );
    }
    let masters = as_admin(&[
        "get",
        "clusterrolebinding",
        "cluster-admin",
        "-o",
        "jsonpath={.subjects[0].kind}/{.subjects[0].name} {.metadata.annotations}",
    ]);
    assert!(masters.starts_with("Group/system:masters "), "{masters}");
    assert!(
        masters.contains("\"rbac.authorization.k8s.io/autoupdate\":\"true\""),
        "{masters}"
    );

    as_admin(&["create", "namespace", "team-a"]);
    for (user, role) in [("viewer", "view"), ("editor", "edit"), ("boss", "admin")] {
        as_admin(&[
            "create",
            "rolebinding",
            &format!("{user}-{role}"),
            &format!("--clusterrole={role}"),
            &format!("--user={user}"),
            "-n",
            "team-a",
        ]);
    }
    as_admin(&[
        "create",
        "deployment",
        "web",
        "--image=nginx",
        "-n",
        "team-a",
    ]);
    as_admin(&[
        "create",
        "secret",
        "generic",
        "token",
        "--from-literal=k=v",
        "-n",
        "team-a",
    ]);

    // view: read workloads in its namespace, no writes, no secrets, nothing elsewhere.
    assert!(
        ok(
            "viewer",
            &["get", "deployments", "-n", "team-a", "-o", "name"]
        )
        .contains("deployment.apps/web")
    );
    ok("viewer", &["get", "deployment", "web", "-n", "team-a"]);
    forbidden(
        "viewer",
        &[
            "create",
            "deployment",
            "api",
            "--image=nginx",
            "-n",
            "team-a",
        ],
    );
    forbidden("viewer", &["get", "secrets", "-n", "team-a"]);
    forbidden("viewer", &["get", "deployments", "-n", "default"]);
    assert_eq!(
        can_i(
            "viewer",
            &[
                "list",
                "propagationpolicies.policy.karmada.io",
                "-n",
                "team-a"
            ]
        ),
        "yes"
    );
    assert_eq!(
        can_i(
            "viewer",
            &[
                "create",
                "propagationpolicies.policy.karmada.io",
                "-n",
                "team-a"
            ]
        ),
        "no"
    );
    let list = ok("viewer", &["auth", "can-i", "--list", "-n", "team-a"]);
    let line = |resource: &str| {
        list.lines()
            .find(|l| l.split_whitespace().next() == Some(resource))
            .unwrap_or_else(|| panic!("{resource} in\n{list}"))
            .to_owned()
    };
    assert!(
        line("deployments.apps").ends_with("[get list watch]"),
        "{list}"
    );
    assert!(
        line("selfsubjectreviews.authentication.k8s.io").ends_with("[create]"),
        "{list}"
    );
    assert!(!list.lines().any(|l| l.starts_with("secrets ")), "{list}");

    // edit: writes workloads and reads secrets, but grants nothing.
    ok(
        "editor",
        &[
            "create",
            "deployment",
            "api",
            "--image=nginx",
            "-n",
            "team-a",
        ],
    );
    ok("editor", &["get", "secrets", "-n", "team-a"]);
    forbidden(
        "editor",
        &[
            "create",
            "rolebinding",
            "x",
            "--clusterrole=view",
            "--user=nobody",
            "-n",
            "team-a",
        ],
    );
    // admin: edit and view (Karmada's kinds through edit) plus roles and bindings.
    assert_eq!(
        can_i(
            "boss",
            &[
                "create",
                "propagationpolicies.policy.karmada.io",
                "-n",
                "team-a"
            ]
        ),
        "yes"
    );
    assert_eq!(
        can_i("boss", &["delete", "deployments", "-n", "team-a"]),
        "yes"
    );
    ok(
        "boss",
        &[
            "create",
            "rolebinding",
            "nobody-view",
            "--clusterrole=view",
            "--user=nobody",
            "-n",
            "team-a",
        ],
    );
    assert_eq!(can_i("boss", &["create", "namespaces"]), "no");

    // Any authenticated user: whoami and can-i, nothing else by default.
    assert_eq!(
        ok(
            "nobody",
            &[
                "auth",
                "whoami",
                "-o",
                "jsonpath={.status.userInfo.username}"
            ]
        ),
        "nobody"
    );
    assert_eq!(can_i("nobody", &["list", "pods", "-n", "default"]), "no");
    assert_eq!(can_i("nobody", &["list", "pods", "-n", "team-a"]), "yes");
}
