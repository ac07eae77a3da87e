//! deploy/crds: the CustomResourceDefinitions of every kind Flotilla serves, generated here.
//!
//! The Karmada kinds' schemas come from the Rust types in flotilla-api (`schemars`, feature
//! `schema`), rewritten into Kubernetes structural schemas: everything inlined (no `$ref`), no
//! `nullable`/`additionalProperties: false`/`uniqueItems`, raw JSON as
//! `x-kubernetes-preserve-unknown-fields`, quantities as `x-kubernetes-int-or-string`, and the
//! defaults Karmada's CRDs declare. The `flotilla.dev` kinds' spec types live in flotilla-core
//! (which stays free of schema derives), so their schemas are written out below.
//!
//! `golden_crds_match_the_generator` fails when a file differs; `FLOTILLA_BLESS=1` rewrites them.
//! `the_embedded_server_accepts_every_crd` applies them with the real kubectl.

use std::path::{Path, PathBuf};

use flotilla_api::autoscaling;
use flotilla_api::cluster::{ClusterSpec, ClusterStatus};
use flotilla_api::policy::{OverrideSpec, PropagationSpec};
use flotilla_api::work::{ResourceBindingSpec, ResourceBindingStatus, WorkSpec};
use schemars::JsonSchema;
use serde_json::{Map, Value, json};

fn crds_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/crds")
}

/// The schema of `T`, inlined and structural.
fn schema<T: JsonSchema>() -> Value {
    let generator = schemars::generate::SchemaSettings::openapi3()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    let root = generator.into_root_schema_for::<T>();
    let mut v = serde_json::to_value(root).expect("schema is JSON");
    structural(&mut v);
    if let Some(m) = v.as_object_mut() {
        for k in ["title", "$defs", "definitions", "components"] {
            m.remove(k);
        }
    }
    v
}

/// Rewrite a JSON schema into a Kubernetes structural schema, in place.
fn structural(v: &mut Value) {
    // Any JSON (serde_json::Value): `true` or `{}`.
    let any = match v {
        Value::Bool(true) => true,
        Value::Object(m) => m.keys().all(|k| k == "description"),
        _ => false,
    };
    if any {
        let description = v.get("description").cloned();
        let mut m = Map::new();
        if let Some(d) = description {
            m.insert("description".into(), d);
        }
        m.insert("x-kubernetes-preserve-unknown-fields".into(), json!(true));
        *v = Value::Object(m);
        return;
    }
    let Value::Object(m) = v else { return };
    for k in [
        "nullable",
        "$schema",
        "title",
        "default",
        "uniqueItems",
        "examples",
    ] {
        m.remove(k);
    }
    // Doc comments that only name the Go type (`PropagationSpec`.) say nothing in a CRD.
    let names_type = m
        .get("description")
        .and_then(Value::as_str)
        .is_some_and(|d| {
            d.strip_prefix('`')
                .and_then(|d| d.strip_suffix("`."))
                .is_some_and(|t| t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.'))
        });
    if names_type {
        m.remove("description");
    }
    if m.get("additionalProperties") == Some(&json!(false)) {
        m.remove("additionalProperties");
    }
    if let Some(f) = m.get("format").and_then(Value::as_str)
        && !["int32", "int64", "double", "float", "byte", "date-time"].contains(&f)
    {
        m.remove("format");
    }
    // `type: [T, "null"]` → `type: T`.
    if let Some(Value::Array(types)) = m.get("type") {
        let kept: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
        if kept.len() == 1 {
            m.insert("type".into(), kept[0].clone());
        }
    }
    // `anyOf: [X, {type: null}]` (an Option) → X merged in.
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = m.get(key) {
            let kept: Vec<Value> = branches
                .iter()
                .filter(|b| {
                    b.get("type") != Some(&json!("null")) && **b != json!({"nullable": true})
                })
                .cloned()
                .collect();
            if kept.len() == 1 {
                m.remove(key);
                if let Value::Object(inner) = &kept[0] {
                    for (k, val) in inner {
                        m.entry(k.clone()).or_insert_with(|| val.clone());
                    }
                }
            } else if kept.len() != branches.len() {
                m.insert(key.into(), Value::Array(kept));
            }
        }
    }
    // `allOf: [X]` (a documented inline struct) → X merged in.
    if let Some(Value::Array(all)) = m.get("allOf")
        && all.len() == 1
    {
        let inner = all[0].clone();
        m.remove("allOf");
        if let Value::Object(inner) = inner {
            for (k, val) in inner {
                m.entry(k).or_insert(val);
            }
        }
    }
    for (k, child) in m.iter_mut() {
        match k.as_str() {
            "properties" => {
                if let Value::Object(props) = child {
                    props.values_mut().for_each(structural);
                }
            }
            "items" | "additionalProperties" => structural(child),
            "anyOf" | "oneOf" | "allOf" => {
                if let Value::Array(bs) = child {
                    bs.iter_mut().for_each(structural);
                }
            }
            _ => {}
        }
    }
    if m.contains_key("properties") && !m.contains_key("type") {
        m.insert("type".into(), json!("object"));
    }
}

/// Set `default` at `pointer` (a path through `properties`) of `schema`.
fn default_at(schema: &mut Value, path: &[&str], value: Value) {
    let mut at = schema;
    for p in path {
        at = at
            .pointer_mut(&format!("/properties/{p}"))
            .unwrap_or_else(|| panic!("no property {p} in {path:?}"));
    }
    at["default"] = value;
}

fn enum_at(schema: &mut Value, path: &[&str], values: &[&str]) {
    let mut at = schema;
    for p in path {
        at = at
            .pointer_mut(&format!("/properties/{p}"))
            .unwrap_or_else(|| panic!("no property {p} in {path:?}"));
    }
    at["enum"] = json!(values);
}

/// A CRD's description.
struct Kind {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
    short_names: &'static [&'static str],
    categories: &'static [&'static str],
    columns: Vec<Value>,
    spec: Value,
    /// `None`: no status subresource and no status field.
    status: Option<Value>,
    description: &'static str,
}

fn column(name: &str, ty: &str, path: &str) -> Value {
    json!({"name": name, "type": ty, "jsonPath": path})
}

fn age() -> Value {
    column("AGE", "date", ".metadata.creationTimestamp")
}

fn crd(k: &Kind) -> Value {
    let mut properties = Map::new();
    properties.insert("apiVersion".into(), json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."}));
    properties.insert("kind".into(), json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents."}));
    properties.insert("metadata".into(), json!({"type": "object"}));
    // A ResourceInterpreterWebhookConfiguration has no spec: its webhooks are top level.
    let top = if k.kind == "ResourceInterpreterWebhookConfiguration" {
        "webhooks"
    } else {
        "spec"
    };
    properties.insert(top.into(), k.spec.clone());
    if let Some(s) = &k.status {
        properties.insert("status".into(), s.clone());
    }
    let mut version = json!({
        "name": k.version,
        "served": true,
        "storage": true,
        "schema": {"openAPIV3Schema": {"description": k.description, "type": "object", "properties": properties, "required": [top]}},
    });
    if !k.columns.is_empty() {
        version["additionalPrinterColumns"] = json!(k.columns);
    }
    if k.status.is_some() {
        version["subresources"] = json!({"status": {}});
    }
    let singular = k.kind.to_lowercase();
    let mut names = json!({"kind": k.kind, "listKind": format!("{}List", k.kind), "plural": k.plural, "singular": singular});
    if !k.short_names.is_empty() {
        names["shortNames"] = json!(k.short_names);
    }
    if !k.categories.is_empty() {
        names["categories"] = json!(k.categories);
    }
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{}.{}", k.plural, k.group)},
        "spec": {
            "group": k.group,
            "names": names,
            "scope": if k.namespaced { "Namespaced" } else { "Cluster" },
            "versions": [version],
        },
    })
}

fn propagation_spec() -> Value {
    let mut s = schema::<PropagationSpec>();
    default_at(&mut s, &["conflictResolution"], json!("Abort"));
    enum_at(&mut s, &["conflictResolution"], &["Abort", "Overwrite"]);
    default_at(&mut s, &["preemption"], json!("Never"));
    enum_at(&mut s, &["preemption"], &["Always", "Never"]);
    default_at(&mut s, &["schedulerName"], json!("default-scheduler"));
    enum_at(&mut s, &["activationPreference"], &["", "Lazy"]);
    enum_at(
        &mut s,
        &["placement", "replicaScheduling", "replicaSchedulingType"],
        &["Duplicated", "Divided"],
    );
    enum_at(
        &mut s,
        &[
            "placement",
            "replicaScheduling",
            "replicaDivisionPreference",
        ],
        &["Aggregated", "Weighted"],
    );
    s
}

/// CronFederatedHPA rules: the bounds and defaults Karmada's CRD declares.
fn cron_federated_hpa_spec() -> Value {
    let mut s = schema::<autoscaling::CronFederatedHPASpec>();
    let rule = s
        .pointer_mut("/properties/rules/items")
        .expect("spec.rules items");
    default_at(rule, &["suspend"], json!(false));
    default_at(rule, &["successfulHistoryLimit"], json!(3));
    default_at(rule, &["failedHistoryLimit"], json!(3));
    let bounds = |v: &mut Value, k: &str, min: i64, max: i64| {
        let p = v
            .pointer_mut(&format!("/properties/{k}"))
            .unwrap_or_else(|| panic!("no property {k}"));
        p["minimum"] = json!(min);
        p["maximum"] = json!(max);
    };
    bounds(rule, "successfulHistoryLimit", 1, 32);
    bounds(rule, "failedHistoryLimit", 0, 32);
    let name = rule.pointer_mut("/properties/name").expect("rule name");
    name["minLength"] = json!(1);
    name["maxLength"] = json!(32);
    s
}

/// Work manifests are whole objects, embedded as Karmada's CRD declares them.
fn work_spec() -> Value {
    let mut s = schema::<WorkSpec>();
    let items = s
        .pointer_mut("/properties/workload/properties/manifests/items")
        .expect("spec.workload.manifests");
    *items = json!({"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true});
    s
}

fn plugin_limits() -> Value {
    json!({"type": "object", "description": "Per-call limits.", "properties": {
        "timeoutMs": {"type": "integer", "minimum": 0, "description": "Wall-clock budget per call, milliseconds."},
        "memoryMib": {"type": "integer", "minimum": 0, "description": "Linear memory cap, MiB."},
        "maxOutputBytes": {"type": "integer", "minimum": 0, "description": "Largest reply accepted, bytes."},
    }})
}

fn failure_policy() -> Value {
    json!({"type": "string", "enum": ["Fail", "Ignore"], "description": "What a plugin fault does: Fail (default) or Ignore."})
}

/// `flotilla_core::profile::ProfileSpec`.
fn profile_spec() -> Value {
    // Each point is either a list of plugins (replaces the built-ins) or {add: [...]} (extends
    // them): a structural schema cannot say "array or object", so the point keeps unknown
    // fields and admission checks every entry (name, backend, wasm, cel, config, limits).
    let list = |d: &str| json!({"x-kubernetes-preserve-unknown-fields": true, "description": format!("{d} A list of plugins (each {{name, weight, failurePolicy, wasm|cel, config, limits}}) replaces the default profile's plugins of the point; {{add: [...]}} keeps them and adds these.")});
    json!({"type": "object", "description": "Plugins per extension point; an absent list keeps the default profile's plugins, an empty list means none.", "properties": {
        "filters": list("Filter plugins, in order (added ones run after the built-ins)."),
        "scores": list("Score plugins (weights apply)."),
        "selects": list("Select plugins."),
        "assigners": list("Assign plugins, asked in order until one does not skip (added ones are asked before the built-ins)."),
        "overriders": list("Override plugins, in order."),
        "preemption": {"type": "object", "description": "Binding preemption's victim rules (feature gate BindingPreemption): CEL evaluated with object = {victim, preemptor} (the bindings) and cluster (the cluster preempted on), or a Wasm plugin choosing the victims; one or the other.", "properties": {
            "victimFilter": {"type": "string", "description": "A bool expression; false keeps the candidate from being evicted."},
            "victimScore": {"type": "string", "description": "A number expression; among candidates of the same priority the higher is evicted first."},
            "plugin": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "description": "A Wasm module exporting flotilla_victims_v1, as a profile entry ({name, failurePolicy, wasm, config, limits}): gets a cluster's candidates and replies which may be evicted, in which order within a priority."},
        }},
    }})
}

/// `flotilla_core::profile::WasmPluginSpec`.
fn wasm_plugin_spec() -> Value {
    json!({"type": "object", "required": ["module"], "properties": {
        "module": {"type": "object", "description": "Where the module's bytes come from: exactly one of path, base64 and image.", "properties": {
            "path": {"type": "string", "description": "A file on the control plane's host."},
            "base64": {"type": "string", "description": "The module inline, base64 (standard alphabet): binary Wasm, or WAT text with format: wat."},
            "format": {"type": "string", "enum": ["wasm", "wat"], "description": "What the bytes are: wasm (the default; bytes without the \\0asm header are refused as not a Wasm module) or wat (WebAssembly text)."},
            "image": {"type": "string", "description": "An OCI artifact holding the module (registry/repository:tag or @sha256:...): one layer of media type application/wasm. A tag is resolved to a digest when the object changes; status.imageDigest records it."},
            "imagePullSecret": {"type": "string", "description": "With image: a kubernetes.io/dockerconfigjson Secret in the controllers' namespace holding the registry's credentials."},
            "insecure": {"type": "boolean", "description": "With image: plain HTTP to the registry (always used for loopback registries)."},
        }},
        "sha256": {"type": "string", "pattern": "^(sha256:)?[0-9a-fA-F]{64}$", "description": "Expected sha256 of the module (hex, optionally sha256:-prefixed)."},
        "config": {"x-kubernetes-preserve-unknown-fields": true, "description": "The plugin's config (passed to its init)."},
        "failurePolicy": failure_policy(),
        "limits": plugin_limits(),
    }})
}

/// What the controllers write in a `WasmPlugin`'s `status`.
fn wasm_plugin_status() -> Value {
    let digest = |d: &str| json!({"type": "string", "description": d});
    json!({"type": "object", "description": "Observed state, written by the controllers.", "properties": {
        "observedGeneration": {"type": "integer", "format": "int64", "description": "The generation this status describes."},
        "imageDigest": digest("For spec.module.image: sha256 of the image manifest the reference resolved to."),
        "servingDigest": digest("sha256 of the module the served profiles run; after a failed load, the previous version's. Absent while no served profile uses the plugin."),
        "lastAttemptedDigest": digest("sha256 of the module the current spec names (the last one the controllers tried to load)."),
        "size": {"type": "integer", "format": "int64", "description": "Size in bytes of the attempted module."},
        "usedBy": {"type": "array", "description": "The profile entries naming this plugin, as PROFILE/POINT[INDEX].", "items": {"type": "string"}},
        "conditions": {"type": "array", "description": "Loaded: the attempted module is serving (Unknown while it compiles). LoadFailed: the attempted module did not load; the reason says why (NotWasm, DigestMismatch, InvalidSpec, ReadFailed, LoadFailed, ImageUnauthorized, PullSecretInvalid, ImageTooLarge, ImageMediaType, ...).", "items": {
            "type": "object", "required": ["type", "status"], "properties": {
                "type": {"type": "string", "description": "Loaded or LoadFailed."},
                "status": {"type": "string", "description": "True, False or Unknown."},
                "reason": {"type": "string", "description": "CamelCase reason."},
                "message": {"type": "string", "description": "Human-readable detail."},
                "lastTransitionTime": {"type": "string", "format": "date-time", "description": "When the status last changed."},
                "observedGeneration": {"type": "integer", "format": "int64", "description": "The generation the condition describes."},
            }}},
    }})
}

/// Karmada's `ResourceInterpreterCustomizationSpec`, each rule with Flotilla's `cel` and `wasm`
/// beside `luaScript`.
fn customization_spec() -> Value {
    let rule = |what: &str| {
        json!({"type": "object", "description": format!("How to {what}: exactly one of luaScript, cel, wasm."), "properties": {
            "luaScript": {"type": "string", "description": "A Lua 5.1 program defining the operation's function (Karmada's)."},
            "cel": {"type": "object", "description": "Named CEL expressions, one per output of the operation.", "additionalProperties": {"type": "string"}},
            "wasm": {"type": "object", "required": ["plugin"], "description": "A WasmPlugin implementing the operation.", "properties": {
                "plugin": {"type": "string", "description": "Name of the WasmPlugin."},
            }},
        }})
    };
    json!({"type": "object", "required": ["target"], "properties": {
        "target": {"type": "object", "required": ["apiVersion", "kind"], "description": "The kind customized.", "properties": {
            "apiVersion": {"type": "string", "description": "API version of the kind."},
            "kind": {"type": "string", "description": "The kind."},
        }},
        "customizations": {"type": "object", "description": "One optional rule per operation.", "properties": {
            "retention": rule("keep member-side fields when a member copy is updated (Retain)"),
            "replicaResource": rule("find the replicas and per-replica requirements (InterpretReplica)"),
            "componentResource": rule("find the components of a multi-template workload (InterpretComponent)"),
            "replicaRevision": rule("set the replicas a member receives (ReviseReplica)"),
            "statusReflection": rule("pick the status reported from a member copy (InterpretStatus)"),
            "statusAggregation": rule("fold the members' status into the template (AggregateStatus)"),
            "healthInterpretation": rule("tell whether a member copy is healthy (InterpretHealth)"),
            "dependencyInterpretation": rule("list the objects the workload depends on (InterpretDependency)"),
        }},
    }})
}

/// The webhooks of a `ResourceInterpreterWebhookConfiguration` (Karmada's
/// `ResourceInterpreterWebhook`), the bounds Karmada's admission checks left to admission.
fn interpreter_webhooks() -> Value {
    let strings = |d: &str| json!({"type": "array", "description": d, "items": {"type": "string"}});
    json!({"type": "array", "description": "The interpreter webhooks and the kinds and operations each answers.", "items": {
    "type": "object", "required": ["name", "clientConfig", "interpreterContextVersions"], "properties": {
        "name": {"type": "string", "description": "The webhook's name, a fully qualified domain name unique in the configuration."},
        "clientConfig": {"type": "object", "description": "How to reach the webhook: exactly one of url and service.", "properties": {
            "url": {"type": "string", "description": "An https URL (no user info, query or fragment)."},
            "service": {"type": "object", "required": ["namespace", "name"], "description": "A Service in front of the webhook, called at https://NAME.NAMESPACE.svc:PORT/PATH.", "properties": {
                "namespace": {"type": "string", "description": "The Service's namespace."},
                "name": {"type": "string", "description": "The Service's name."},
                "path": {"type": "string", "description": "The URL path requests are sent to."},
                "port": {"type": "integer", "format": "int32", "description": "The Service port (443 by default)."},
            }},
            "caBundle": {"type": "string", "format": "byte", "description": "PEM CA certificates (base64) verifying the webhook's serving certificate; the system roots when empty."},
        }},
        "rules": {"type": "array", "description": "What the webhook answers: it is called when any rule matches.", "items": {
            "type": "object", "properties": {
                "operations": strings("Interpreter operations (InterpretReplica, Retain, …) or * alone."),
                "apiGroups": strings("API groups (\"\" is the core group) or * alone."),
                "apiVersions": strings("API versions or * alone."),
                "kinds": strings("Kinds or * alone."),
            }}},
        "timeoutSeconds": {"type": "integer", "format": "int32", "description": "Call timeout, 1 to 30 seconds (10 by default); a call that times out fails the operation."},
        "interpreterContextVersions": strings("ResourceInterpreterContext versions the webhook accepts, in preference order; must include v1alpha1."),
    }}})
}

fn preserve(description: &str) -> Value {
    json!({"type": "object", "description": description, "x-kubernetes-preserve-unknown-fields": true})
}

fn kinds() -> Vec<Kind> {
    const KARMADA: &[&str] = &["karmada-io"];
    const FLOTILLA: &[&str] = &["flotilla"];
    let pp_columns = || {
        vec![
            column("CONFLICT-RESOLUTION", "string", ".spec.conflictResolution"),
            column("PRIORITY", "string", ".spec.priority"),
            age(),
        ]
    };
    let rb_columns = || {
        vec![
            column(
                "SCHEDULED",
                "string",
                ".status.conditions[?(@.type==\"Scheduled\")].status",
            ),
            column(
                "FULLYAPPLIED",
                "string",
                ".status.conditions[?(@.type==\"FullyApplied\")].status",
            ),
            age(),
        ]
    };
    let policy = "policy.karmada.io";
    let work = "work.karmada.io";
    vec![
        Kind {
            group: policy,
            version: "v1alpha1",
            kind: "PropagationPolicy",
            plural: "propagationpolicies",
            namespaced: true,
            short_names: &["pp"],
            categories: KARMADA,
            columns: pp_columns(),
            spec: propagation_spec(),
            status: None,
            description: "PropagationPolicy represents the policy that propagates a group of resources to one or more clusters.",
        },
        Kind {
            group: policy,
            version: "v1alpha1",
            kind: "ClusterPropagationPolicy",
            plural: "clusterpropagationpolicies",
            namespaced: false,
            short_names: &["cpp"],
            categories: KARMADA,
            columns: pp_columns(),
            spec: propagation_spec(),
            status: None,
            description: "ClusterPropagationPolicy represents the cluster-wide policy that propagates a group of resources to one or more clusters.",
        },
        Kind {
            group: policy,
            version: "v1alpha1",
            kind: "OverridePolicy",
            plural: "overridepolicies",
            namespaced: true,
            short_names: &["op"],
            categories: KARMADA,
            columns: vec![age()],
            spec: schema::<OverrideSpec>(),
            status: None,
            description: "OverridePolicy represents the policy that overrides a group of resources to one or more clusters.",
        },
        Kind {
            group: policy,
            version: "v1alpha1",
            kind: "ClusterOverridePolicy",
            plural: "clusteroverridepolicies",
            namespaced: false,
            short_names: &["cop"],
            categories: KARMADA,
            columns: vec![age()],
            spec: schema::<OverrideSpec>(),
            status: None,
            description: "ClusterOverridePolicy represents the cluster-wide policy that overrides a group of resources to one or more clusters.",
        },
        Kind {
            group: work,
            version: "v1alpha2",
            kind: "ResourceBinding",
            plural: "resourcebindings",
            namespaced: true,
            short_names: &["rb"],
            categories: KARMADA,
            columns: rb_columns(),
            spec: schema::<ResourceBindingSpec>(),
            status: Some(schema::<ResourceBindingStatus>()),
            description: "ResourceBinding represents a binding of a kubernetes resource with a propagation policy.",
        },
        Kind {
            group: work,
            version: "v1alpha2",
            kind: "ClusterResourceBinding",
            plural: "clusterresourcebindings",
            namespaced: false,
            short_names: &["crb"],
            categories: KARMADA,
            columns: rb_columns(),
            spec: schema::<ResourceBindingSpec>(),
            status: Some(schema::<ResourceBindingStatus>()),
            description: "ClusterResourceBinding represents a binding of a kubernetes resource with a ClusterPropagationPolicy.",
        },
        Kind {
            group: work,
            version: "v1alpha1",
            kind: "Work",
            plural: "works",
            namespaced: true,
            short_names: &[],
            categories: KARMADA,
            columns: vec![
                column(
                    "WORKLOAD-KIND",
                    "string",
                    ".spec.workload.manifests[*].kind",
                ),
                column(
                    "APPLIED",
                    "string",
                    ".status.conditions[?(@.type==\"Applied\")].status",
                ),
                age(),
            ],
            spec: work_spec(),
            status: Some(preserve("WorkStatus defines the observed state of Work.")),
            description: "Work defines a list of resources to be deployed on the member cluster.",
        },
        Kind {
            group: "cluster.karmada.io",
            version: "v1alpha1",
            kind: "Cluster",
            plural: "clusters",
            namespaced: false,
            short_names: &[],
            categories: KARMADA,
            columns: vec![
                column("VERSION", "string", ".status.kubernetesVersion"),
                column("MODE", "string", ".spec.syncMode"),
                column(
                    "READY",
                    "string",
                    ".status.conditions[?(@.type==\"Ready\")].status",
                ),
                age(),
            ],
            spec: schema::<ClusterSpec>(),
            status: Some(schema::<ClusterStatus>()),
            description: "Cluster represents the desired state and status of a member cluster.",
        },
        Kind {
            group: autoscaling::GROUP,
            version: "v1alpha1",
            kind: autoscaling::FEDERATED_HPA,
            plural: "federatedhpas",
            namespaced: true,
            short_names: &["fhpa"],
            categories: KARMADA,
            columns: vec![
                column("REFERENCE-KIND", "string", ".spec.scaleTargetRef.kind"),
                column("REFERENCE-NAME", "string", ".spec.scaleTargetRef.name"),
                column("MINPODS", "integer", ".spec.minReplicas"),
                column("MAXPODS", "integer", ".spec.maxReplicas"),
                column("REPLICAS", "integer", ".status.currentReplicas"),
                age(),
            ],
            spec: schema::<autoscaling::FederatedHPASpec>(),
            status: Some(schema::<autoscaling::HorizontalPodAutoscalerStatus>()),
            description: "FederatedHPA is centralized HPA that can aggregate the metrics in multiple clusters. When the system load increases, it will query the metrics from multiple clusters and scales up the replicas. When the system load decreases, it will query the metrics from multiple clusters and scales down the replicas. After the replicas are scaled up/down, karmada-scheduler will schedule the replicas based on the policy.",
        },
        Kind {
            group: autoscaling::GROUP,
            version: "v1alpha1",
            kind: autoscaling::CRON_FEDERATED_HPA,
            plural: "cronfederatedhpas",
            namespaced: true,
            short_names: &["cronfhpa"],
            categories: KARMADA,
            columns: vec![
                column("REFERENCE-KIND", "string", ".spec.scaleTargetRef.kind"),
                column("REFERENCE-NAME", "string", ".spec.scaleTargetRef.name"),
                age(),
            ],
            spec: cron_federated_hpa_spec(),
            status: Some(schema::<autoscaling::CronFederatedHPAStatus>()),
            description: "CronFederatedHPA represents a collection of repeating schedule to scale replica number of a specific workload. It can scale any resource implementing the scale subresource as well as FederatedHPA.",
        },
        Kind {
            group: "flotilla.dev",
            version: "v1alpha1",
            kind: "SchedulerProfile",
            plural: "schedulerprofiles",
            namespaced: false,
            short_names: &[],
            categories: FLOTILLA,
            columns: vec![age()],
            spec: profile_spec(),
            status: Some(preserve("Observed state, written by the controllers.")),
            description: "SchedulerProfile names the scheduler plugins per extension point; bindings pick one with spec.schedulerName (its metadata.name).",
        },
        Kind {
            group: "flotilla.dev",
            version: "v1alpha1",
            kind: "WasmPlugin",
            plural: "wasmplugins",
            namespaced: false,
            short_names: &["wp"],
            categories: FLOTILLA,
            columns: vec![
                column("SERVING", "string", ".status.servingDigest"),
                column(
                    "READY",
                    "string",
                    ".status.conditions[?(@.type==\"Loaded\")].status",
                ),
                column("USED-BY", "string", ".status.usedBy"),
                age(),
            ],
            spec: wasm_plugin_spec(),
            status: Some(wasm_plugin_status()),
            description: "WasmPlugin is a Wasm scheduler plugin module kept on the control plane; profile entries name it with wasm.plugin.",
        },
        Kind {
            group: "config.karmada.io",
            version: "v1alpha1",
            kind: "ResourceInterpreterCustomization",
            plural: "resourceinterpretercustomizations",
            namespaced: false,
            short_names: &["ric"],
            categories: KARMADA,
            columns: vec![
                column("TARGET-API-VERSION", "string", ".spec.target.apiVersion"),
                column("TARGET-KIND", "string", ".spec.target.kind"),
                age(),
            ],
            spec: customization_spec(),
            status: None,
            description: "ResourceInterpreterCustomization tells the control plane how to interpret one kind (replicas, status, health, dependencies), ahead of interpreter webhooks and the built-in interpreters.",
        },
        Kind {
            group: "config.karmada.io",
            version: "v1alpha1",
            kind: "ResourceInterpreterWebhookConfiguration",
            plural: "resourceinterpreterwebhookconfigurations",
            namespaced: false,
            short_names: &[],
            categories: KARMADA,
            columns: vec![age()],
            spec: interpreter_webhooks(),
            status: None,
            description: "ResourceInterpreterWebhookConfiguration describes interpreter webhooks, asked after the ResourceInterpreterCustomizations and before the built-in interpreters.",
        },
    ]
}

fn file_name(k: &Kind) -> String {
    format!("{}_{}.yaml", k.group, k.plural)
}

fn render(k: &Kind) -> String {
    let header = "# Generated by tests/tests/crds.rs from the Rust types; do not edit.\n# Regenerate: FLOTILLA_BLESS=1 cargo test -p flotilla-tests --test crds\n";
    format!("{header}{}", serde_yaml::to_string(&crd(k)).expect("yaml"))
}

/// Every place a structural schema forbids, as paths (`v` is a schema).
fn non_structural(v: &Value, path: &str, out: &mut Vec<String>) {
    let Value::Object(m) = v else {
        out.push(format!("{path}: not a schema object"));
        return;
    };
    for k in [
        "$ref",
        "nullable",
        "definitions",
        "$defs",
        "uniqueItems",
        "allOf",
        "not",
    ] {
        if m.contains_key(k) {
            out.push(format!("{path}: {k}"));
        }
    }
    if m.get("additionalProperties") == Some(&json!(false))
        || (m.contains_key("additionalProperties") && m.contains_key("properties"))
    {
        out.push(format!("{path}: additionalProperties"));
    }
    let preserve = m.contains_key("x-kubernetes-preserve-unknown-fields");
    let int_or_string = m.contains_key("x-kubernetes-int-or-string");
    if !preserve && !int_or_string && !m.contains_key("type") {
        out.push(format!("{path}: no type"));
    }
    if (m.contains_key("anyOf") || m.contains_key("oneOf")) && !int_or_string {
        out.push(format!("{path}: anyOf/oneOf"));
    }
    if let Some(t) = m.get("type").and_then(Value::as_str) {
        if !["object", "array", "string", "integer", "number", "boolean"].contains(&t) {
            out.push(format!("{path}: type {t}"));
        }
    } else if m.contains_key("type") {
        out.push(format!("{path}: type is not a string"));
    }
    if let Some(Value::Object(props)) = m.get("properties") {
        for (k, c) in props {
            non_structural(c, &format!("{path}.{k}"), out);
        }
    }
    for k in ["items", "additionalProperties"] {
        if let Some(c) = m.get(k).filter(|c| c.is_object()) {
            non_structural(c, &format!("{path}.{k}"), out);
        }
    }
}

#[test]
fn generated_schemas_are_structural() {
    for k in kinds() {
        let mut bad = Vec::new();
        non_structural(
            &crd(&k)["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
            k.kind,
            &mut bad,
        );
        assert!(
            bad.is_empty(),
            "{}: not structural:\n{}",
            k.kind,
            bad.join("\n")
        );
    }
}

/// deploy/crds, and the Helm chart's copy (Helm installs a chart's `crds/` before its templates
/// and cannot read files outside the chart).
fn golden_dirs() -> [PathBuf; 2] {
    [
        crds_dir(),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/helm/flotilla/crds"),
    ]
}

#[test]
fn golden_crds_match_the_generator() {
    let bless = std::env::var_os("FLOTILLA_BLESS").is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    let kinds = kinds();
    let expected: Vec<String> = kinds.iter().map(file_name).collect();
    for dir in golden_dirs() {
        for k in &kinds {
            let path = dir.join(file_name(k));
            let text = render(k);
            if bless {
                std::fs::create_dir_all(&dir).expect("create the CRD directory");
                std::fs::write(&path, &text).expect("write CRD");
            } else if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
                stale.push(path.display().to_string());
            }
        }
        let extra: Vec<String> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".yaml") && !expected.contains(n))
            .collect();
        assert!(
            extra.is_empty(),
            "files in {} the generator does not write: {extra:?}",
            dir.display()
        );
    }
    assert!(
        stale.is_empty(),
        "stale or missing CRDs (regenerate with FLOTILLA_BLESS=1): {stale:?}"
    );
}

#[test]
fn crds_accept_the_karmada_fixtures() {
    // The round-trip fixtures of flotilla-api carry every field: each must fit its CRD's schema
    // (checked here for the shape: every field of the fixture's spec is declared).
    fn declared(schema: &Value, value: &Value, path: &str, out: &mut Vec<String>) {
        if schema.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true)) {
            return;
        }
        match value {
            Value::Object(m) => {
                if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                    for (k, v) in m {
                        match props.get(k) {
                            Some(s) => declared(s, v, &format!("{path}.{k}"), out),
                            None => out.push(format!("{path}.{k}")),
                        }
                    }
                } else if let Some(items) = schema.get("additionalProperties") {
                    m.iter()
                        .for_each(|(k, v)| declared(items, v, &format!("{path}.{k}"), out));
                }
            }
            Value::Array(a) => {
                if let Some(items) = schema.get("items") {
                    a.iter()
                        .enumerate()
                        .for_each(|(i, v)| declared(items, v, &format!("{path}[{i}]"), out));
                }
            }
            _ => {}
        }
    }
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../engine/api/tests/data");
    let kinds = kinds();
    for file in [
        "propagationpolicy.yaml",
        "overridepolicy.yaml",
        "propagationpolicy-cel.yaml",
        "overridepolicy-cel.yaml",
        "cluster.yaml",
        "resourcebinding.yaml",
        "work.yaml",
    ] {
        let doc: Value =
            serde_yaml::from_str(&std::fs::read_to_string(data.join(file)).expect("fixture"))
                .expect("yaml");
        let kind = doc["kind"].as_str().expect("kind");
        let k = kinds
            .iter()
            .find(|k| k.kind == kind)
            .expect("a CRD for the kind");
        let schema = &crd(k)["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        let mut missing = Vec::new();
        for part in ["spec", "status"] {
            if let (Some(v), Some(s)) = (
                doc.get(part),
                schema.pointer(&format!("/properties/{part}")),
            ) {
                declared(s, v, part, &mut missing);
            }
        }
        assert!(
            missing.is_empty(),
            "{file}: fields the CRD does not declare: {missing:?}"
        );
    }
}

fn kubectl_on_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
}

#[test]
fn the_embedded_server_accepts_every_crd() {
    let Some(bin) = kubectl_on_path() else {
        eprintln!("skipping: no kubectl on PATH");
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = rt
        .block_on(flotilla_apiserver::start(
            flotilla_apiserver::Config::new(dir.path().join("data")),
            async move {
                let _ = stopped.await;
            },
        ))
        .expect("server starts");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, &running.kubeconfig).expect("kubeconfig");
    let kubectl = |args: &[&str]| {
        let out = std::process::Command::new(&bin)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg("--cache-dir")
            .arg(dir.path().join("kube-cache"))
            .args(args)
            .env_remove("KUBECONFIG")
            .output()
            .expect("kubectl runs");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "kubectl {args:?} failed:\nstdout: {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    };
    let crds = crds_dir().display().to_string();
    let applied = kubectl(&["apply", "-f", &crds]);
    let kinds = kinds();
    for k in &kinds {
        let name = format!(
            "customresourcedefinition.apiextensions.k8s.io/{}.{} created",
            k.plural, k.group
        );
        assert!(applied.contains(&name), "{name} missing from:\n{applied}");
    }
    let established = kubectl(&[
        "get",
        "crd",
        "-o",
        "jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type==\"Established\")].status}{\"\\n\"}{end}",
    ]);
    for k in &kinds {
        assert!(
            established.contains(&format!("{}.{}=True", k.plural, k.group)),
            "{established}"
        );
    }
    // Re-applying is a no-op; the kinds stay served.
    assert!(kubectl(&["apply", "-f", &crds]).contains("unchanged"));
    kubectl(&[
        "get",
        "pp,cpp,op,cop,rb,crb,works,clusters,schedulerprofiles,wasmplugins",
        "-A",
    ]);
    let _ = stop.send(());
    rt.block_on(running.task).expect("server stops");
}
