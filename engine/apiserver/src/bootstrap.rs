//! kube-apiserver's bootstrap RBAC policy, stored as ordinary objects at startup
//! ([`reconcile`]): the user-facing ClusterRoles `cluster-admin`, `admin`, `edit` and `view`
//! (the last three aggregated, admin ⊃ edit ⊃ view, from `system:aggregate-to-*`), Karmada's
//! `karmada-view` / `karmada-edit` (its `admin-clusterrole-aggregation.yaml`, so Karmada's
//! namespaced kinds are in view, edit and admin), `system:discovery`, `system:basic-user` and
//! `system:public-info-viewer` with their bindings, and the ClusterRoleBinding `cluster-admin` of
//! group `system:masters`.
//!
//! As kube-apiserver's policy reconciliation: a missing object is created; an existing one
//! annotated `rbac.authorization.k8s.io/autoupdate: "true"` gets the labels, annotations, rules,
//! aggregation selectors and subjects it lacks (nothing is removed, what a user added stays); one
//! whose annotation is anything else is left alone. A binding whose `roleRef` differs is left
//! alone too (kube-apiserver recreates it).

use serde_json::{Value, json};

use crate::store::{Op, Precondition, Store, StoreError};

const RBAC: &str = "rbac.authorization.k8s.io";
const AUTOUPDATE: &str = "rbac.authorization.k8s.io/autoupdate";
const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "delete", "deletecollection", "patch", "update"];
const READ_WRITE: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

fn rule(verbs: &[&str], group: &str, resources: &[&str]) -> Value {
    json!({"verbs": verbs, "apiGroups": [group], "resources": resources})
}

fn url_rule(verbs: &[&str], urls: &[&str]) -> Value {
    json!({"verbs": verbs, "nonResourceURLs": urls})
}

fn cluster_role(name: &str, labels: &[(&str, &str)], rules: Vec<Value>) -> Value {
    let mut all = serde_json::Map::new();
    all.insert("kubernetes.io/bootstrapping".into(), json!("rbac-defaults"));
    for (k, v) in labels {
        all.insert((*k).into(), json!(v));
    }
    json!({
        "apiVersion": format!("{RBAC}/v1"),
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": all, "annotations": {AUTOUPDATE: "true"}},
        "rules": rules,
    })
}

fn aggregated(name: &str, labels: &[(&str, &str)], selects: &str) -> Value {
    let mut role = cluster_role(name, labels, Vec::new());
    role["aggregationRule"] = json!({"clusterRoleSelectors": [
        {"matchLabels": {format!("{RBAC}/aggregate-to-{selects}"): "true"}}
    ]});
    role
}

fn binding(name: &str, role: &str, groups: &[&str]) -> Value {
    let subjects: Vec<Value> = groups
        .iter()
        .map(|g| json!({"apiGroup": RBAC, "kind": "Group", "name": g}))
        .collect();
    json!({
        "apiVersion": format!("{RBAC}/v1"),
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name,
            "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
            "annotations": {AUTOUPDATE: "true"}},
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role},
        "subjects": subjects,
    })
}

const TO_VIEW: (&str, &str) = ("rbac.authorization.k8s.io/aggregate-to-view", "true");
const TO_EDIT: (&str, &str) = ("rbac.authorization.k8s.io/aggregate-to-edit", "true");
const TO_ADMIN: (&str, &str) = ("rbac.authorization.k8s.io/aggregate-to-admin", "true");

/// The ClusterRoles of the bootstrap policy (Kubernetes' `bootstrappolicy` as of v1.33, and
/// Karmada's aggregation roles).
pub fn cluster_roles() -> Vec<Value> {
    let karmada_kinds: &[(&str, &[&str])] = &[
        (
            "autoscaling.karmada.io",
            &[
                "cronfederatedhpas",
                "cronfederatedhpas/status",
                "federatedhpas",
                "federatedhpas/status",
            ],
        ),
        (
            "multicluster.x-k8s.io",
            &[
                "serviceexports",
                "serviceexports/status",
                "serviceimports",
                "serviceimports/status",
            ],
        ),
        (
            "networking.karmada.io",
            &[
                "multiclusteringresses",
                "multiclusteringresses/status",
                "multiclusterservices",
                "multiclusterservices/status",
            ],
        ),
        (
            "policy.karmada.io",
            &["overridepolicies", "propagationpolicies"],
        ),
        (
            "work.karmada.io",
            &[
                "resourcebindings",
                "resourcebindings/status",
                "works",
                "works/status",
            ],
        ),
    ];
    let karmada = |verbs: &[&str]| -> Vec<Value> {
        karmada_kinds
            .iter()
            .map(|(g, r)| rule(verbs, g, r))
            .collect()
    };
    vec![
        cluster_role(
            "cluster-admin",
            &[],
            vec![rule(&["*"], "*", &["*"]), url_rule(&["*"], &["*"])],
        ),
        aggregated("admin", &[], "admin"),
        aggregated("edit", &[TO_ADMIN], "edit"),
        aggregated("view", &[TO_EDIT], "view"),
        cluster_role(
            "system:aggregate-to-admin",
            &[TO_ADMIN],
            vec![
                rule(
                    &["create"],
                    "authorization.k8s.io",
                    &["localsubjectaccessreviews"],
                ),
                rule(READ_WRITE, RBAC, &["rolebindings", "roles"]),
            ],
        ),
        cluster_role(
            "system:aggregate-to-edit",
            &[TO_ADMIN, TO_EDIT],
            vec![
                rule(
                    READ,
                    "",
                    &[
                        "pods/attach",
                        "pods/exec",
                        "pods/portforward",
                        "pods/proxy",
                        "secrets",
                        "services/proxy",
                    ],
                ),
                rule(&["impersonate"], "", &["serviceaccounts"]),
                rule(
                    WRITE,
                    "",
                    &[
                        "pods",
                        "pods/attach",
                        "pods/exec",
                        "pods/portforward",
                        "pods/proxy",
                    ],
                ),
                rule(&["create"], "", &["pods/eviction"]),
                rule(
                    WRITE,
                    "",
                    &[
                        "configmaps",
                        "events",
                        "persistentvolumeclaims",
                        "replicationcontrollers",
                        "replicationcontrollers/scale",
                        "secrets",
                        "serviceaccounts",
                        "services",
                        "services/proxy",
                    ],
                ),
                rule(&["create"], "", &["serviceaccounts/token"]),
                rule(
                    WRITE,
                    "apps",
                    &[
                        "daemonsets",
                        "deployments",
                        "deployments/rollback",
                        "deployments/scale",
                        "replicasets",
                        "replicasets/scale",
                        "statefulsets",
                        "statefulsets/scale",
                    ],
                ),
                rule(WRITE, "autoscaling", &["horizontalpodautoscalers"]),
                rule(WRITE, "batch", &["cronjobs", "jobs"]),
                rule(
                    WRITE,
                    "extensions",
                    &[
                        "daemonsets",
                        "deployments",
                        "deployments/rollback",
                        "deployments/scale",
                        "ingresses",
                        "networkpolicies",
                        "replicasets",
                        "replicasets/scale",
                        "replicationcontrollers/scale",
                    ],
                ),
                rule(WRITE, "policy", &["poddisruptionbudgets"]),
                rule(
                    WRITE,
                    "networking.k8s.io",
                    &["ingresses", "networkpolicies"],
                ),
                rule(READ_WRITE, "coordination.k8s.io", &["leases"]),
            ],
        ),
        cluster_role(
            "system:aggregate-to-view",
            &[TO_ADMIN, TO_EDIT, TO_VIEW],
            vec![
                rule(
                    READ,
                    "",
                    &[
                        "configmaps",
                        "endpoints",
                        "persistentvolumeclaims",
                        "persistentvolumeclaims/status",
                        "pods",
                        "replicationcontrollers",
                        "replicationcontrollers/scale",
                        "serviceaccounts",
                        "services",
                        "services/status",
                    ],
                ),
                rule(
                    READ,
                    "",
                    &[
                        "bindings",
                        "events",
                        "limitranges",
                        "namespaces/status",
                        "pods/log",
                        "pods/status",
                        "replicationcontrollers/status",
                        "resourcequotas",
                        "resourcequotas/status",
                    ],
                ),
                rule(READ, "", &["namespaces"]),
                rule(READ, "discovery.k8s.io", &["endpointslices"]),
                rule(
                    READ,
                    "apps",
                    &[
                        "controllerrevisions",
                        "daemonsets",
                        "daemonsets/status",
                        "deployments",
                        "deployments/scale",
                        "deployments/status",
                        "replicasets",
                        "replicasets/scale",
                        "replicasets/status",
                        "statefulsets",
                        "statefulsets/scale",
                        "statefulsets/status",
                    ],
                ),
                rule(
                    READ,
                    "autoscaling",
                    &[
                        "horizontalpodautoscalers",
                        "horizontalpodautoscalers/status",
                    ],
                ),
                rule(
                    READ,
                    "batch",
                    &["cronjobs", "cronjobs/status", "jobs", "jobs/status"],
                ),
                rule(
                    READ,
                    "extensions",
                    &[
                        "daemonsets",
                        "daemonsets/status",
                        "deployments",
                        "deployments/scale",
                        "deployments/status",
                        "ingresses",
                        "ingresses/status",
                        "networkpolicies",
                        "replicasets",
                        "replicasets/scale",
                        "replicasets/status",
                        "replicationcontrollers/scale",
                    ],
                ),
                rule(
                    READ,
                    "policy",
                    &["poddisruptionbudgets", "poddisruptionbudgets/status"],
                ),
                rule(
                    READ,
                    "networking.k8s.io",
                    &["ingresses", "ingresses/status", "networkpolicies"],
                ),
            ],
        ),
        cluster_role("karmada-view", &[TO_VIEW], karmada(READ)),
        cluster_role("karmada-edit", &[TO_EDIT], karmada(WRITE)),
        cluster_role(
            "system:discovery",
            &[],
            vec![url_rule(
                &["get"],
                &[
                    "/api",
                    "/api/*",
                    "/apis",
                    "/apis/*",
                    "/healthz",
                    "/livez",
                    "/openapi",
                    "/openapi/*",
                    "/readyz",
                    "/version",
                    "/version/",
                ],
            )],
        ),
        cluster_role(
            "system:basic-user",
            &[],
            vec![
                rule(
                    &["create"],
                    "authorization.k8s.io",
                    &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                ),
                rule(
                    &["create"],
                    "authentication.k8s.io",
                    &["selfsubjectreviews"],
                ),
            ],
        ),
        cluster_role(
            "system:public-info-viewer",
            &[],
            vec![url_rule(
                &["get"],
                &["/healthz", "/livez", "/readyz", "/version", "/version/"],
            )],
        ),
    ]
}

/// The ClusterRoleBindings of the bootstrap policy.
pub fn cluster_role_bindings() -> Vec<Value> {
    vec![
        binding("cluster-admin", "cluster-admin", &["system:masters"]),
        binding(
            "system:discovery",
            "system:discovery",
            &["system:authenticated"],
        ),
        binding(
            "system:basic-user",
            "system:basic-user",
            &["system:authenticated"],
        ),
        binding(
            "system:public-info-viewer",
            "system:public-info-viewer",
            &["system:authenticated", "system:unauthenticated"],
        ),
    ]
}

/// What [`reconcile`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Reconciled {
    /// Objects created (`clusterroles/<name>`, `clusterrolebindings/<name>`).
    pub created: Vec<String>,
    /// Objects that got what they lacked.
    pub updated: Vec<String>,
    /// Objects left alone because their autoupdate annotation is not `"true"`.
    pub skipped: Vec<String>,
}

/// Append to array `into[field]` the items of `from[field]` it lacks.
fn union_array(into: &mut Value, from: &Value, field: &str) -> bool {
    let Some(add) = from[field].as_array() else {
        return false;
    };
    if !into[field].is_array() {
        into[field] = json!([]);
    }
    let Some(have) = into[field].as_array_mut() else {
        return false;
    };
    let mut changed = false;
    for item in add {
        if !have.contains(item) {
            have.push(item.clone());
            changed = true;
        }
    }
    changed
}

/// Add to map `into.metadata[field]` the keys of `from.metadata[field]` it lacks.
fn union_map(into: &mut Value, from: &Value, field: &str) -> bool {
    let Some(add) = from["metadata"][field].as_object() else {
        return false;
    };
    if !into["metadata"][field].is_object() {
        into["metadata"][field] = json!({});
    }
    let Some(have) = into["metadata"][field].as_object_mut() else {
        return false;
    };
    let mut changed = false;
    for (k, v) in add {
        if !have.contains_key(k) {
            have.insert(k.clone(), v.clone());
            changed = true;
        }
    }
    changed
}

/// The reconciled form of `existing` given the policy's `expected`, when it changes.
fn merged(existing: &Value, expected: &Value) -> Option<Value> {
    let mut out = existing.clone();
    let mut changed = union_map(&mut out, expected, "labels");
    changed |= union_map(&mut out, expected, "annotations");
    match expected["kind"].as_str() {
        Some("ClusterRole") => {
            changed |= union_array(&mut out, expected, "rules");
            if !expected["aggregationRule"].is_null() {
                if !out["aggregationRule"].is_object() {
                    out["aggregationRule"] = json!({});
                }
                changed |= union_array(
                    &mut out["aggregationRule"],
                    &expected["aggregationRule"],
                    "clusterRoleSelectors",
                );
            }
        }
        _ => {
            if out["roleRef"] != expected["roleRef"] {
                return None;
            }
            changed |= union_array(&mut out, expected, "subjects");
        }
    }
    changed.then_some(out)
}

/// Create the bootstrap policy's objects in `cluster` (the root keyspace) where missing, and
/// complete the auto-updated ones ([module docs](self)). A concurrent writer wins: its version
/// stays, and the next start reconciles again.
///
/// # Errors
/// The store cannot be read or written.
pub async fn reconcile(store: &Store, cluster: &str) -> Result<Reconciled, StoreError> {
    let mut done = Reconciled::default();
    let objects = cluster_roles()
        .into_iter()
        .map(|o| ("clusterroles", o))
        .chain(
            cluster_role_bindings()
                .into_iter()
                .map(|o| ("clusterrolebindings", o)),
        );
    for (plural, mut expected) in objects {
        let name = expected["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let key = format!("/{cluster}/{RBAC}/{plural}/{name}");
        let what = format!("{plural}/{name}");
        let (op, pre) = match store.get(&key)? {
            None => {
                expected["metadata"]["uid"] = json!(uuid::Uuid::new_v4().to_string());
                expected["metadata"]["creationTimestamp"] = json!(crate::time::now_rfc3339());
                done.created.push(what);
                (Op::Put(expected), Precondition::Absent)
            }
            Some((rev, existing)) => {
                if existing["metadata"]["annotations"][AUTOUPDATE] != "true" {
                    done.skipped.push(what);
                    continue;
                }
                let Some(out) = merged(&existing, &expected) else {
                    continue;
                };
                done.updated.push(what);
                (Op::Put(out), Precondition::ModRev(rev))
            }
        };
        match store.write(key, op, pre).await {
            Ok(_) | Err(StoreError::Conflict { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_policy_is_created_once_completed_when_autoupdated_and_otherwise_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let first = reconcile(&store, "@").await.unwrap();
        assert_eq!(
            first.created.len(),
            cluster_roles().len() + cluster_role_bindings().len()
        );
        assert!(first.created.contains(&"clusterroles/view".to_owned()));
        assert!(
            first
                .created
                .contains(&"clusterrolebindings/cluster-admin".to_owned())
        );
        let again = reconcile(&store, "@").await.unwrap();
        assert_eq!(again, Reconciled::default());

        // A user's extra rule stays and a lost one comes back; a role whose annotation is
        // "false" is not touched.
        let key = |p: &str, n: &str| format!("/@/{RBAC}/{p}/{n}");
        let (rev, mut view) = store
            .get(&key("clusterroles", "system:aggregate-to-view"))
            .unwrap()
            .unwrap();
        let extra = rule(&["get"], "example.com", &["widgets"]);
        let lost = view["rules"][0].clone();
        view["rules"] = json!([extra]);
        store
            .write(
                key("clusterroles", "system:aggregate-to-view"),
                Op::Put(view),
                Precondition::ModRev(rev),
            )
            .await
            .unwrap();
        let (rev, mut edit) = store
            .get(&key("clusterroles", "system:aggregate-to-edit"))
            .unwrap()
            .unwrap();
        edit["metadata"]["annotations"][AUTOUPDATE] = json!("false");
        edit["rules"] = json!([]);
        store
            .write(
                key("clusterroles", "system:aggregate-to-edit"),
                Op::Put(edit),
                Precondition::ModRev(rev),
            )
            .await
            .unwrap();
        let (rev, mut masters) = store
            .get(&key("clusterrolebindings", "cluster-admin"))
            .unwrap()
            .unwrap();
        masters["subjects"] = json!([{"apiGroup": RBAC, "kind": "User", "name": "root"}]);
        store
            .write(
                key("clusterrolebindings", "cluster-admin"),
                Op::Put(masters),
                Precondition::ModRev(rev),
            )
            .await
            .unwrap();
        let third = reconcile(&store, "@").await.unwrap();
        assert_eq!(
            third.updated,
            [
                "clusterroles/system:aggregate-to-view",
                "clusterrolebindings/cluster-admin"
            ]
        );
        assert_eq!(third.skipped, ["clusterroles/system:aggregate-to-edit"]);
        let view = store
            .get(&key("clusterroles", "system:aggregate-to-view"))
            .unwrap()
            .unwrap()
            .1;
        let rules = view["rules"].as_array().unwrap();
        assert_eq!(rules[0], extra);
        assert!(rules.contains(&lost));
        let edit = store
            .get(&key("clusterroles", "system:aggregate-to-edit"))
            .unwrap()
            .unwrap()
            .1;
        assert_eq!(edit["rules"], json!([]));
        let masters = store
            .get(&key("clusterrolebindings", "cluster-admin"))
            .unwrap()
            .unwrap()
            .1;
        assert_eq!(masters["subjects"].as_array().unwrap().len(), 2);
    }
}
