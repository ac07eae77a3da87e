//! OpenAPI v3 documents with real schemas, and the unknown-field walk of `fieldValidation`.
//!
//! kube-apiserver publishes one document per group version at `/openapi/v3/apis/{g}/{v}` (and
//! `/openapi/v3/api/v1`), each with the schemas of its kinds and of everything they reference in
//! `components.schemas`, named like `io.k8s.api.apps.v1.Deployment`; the kind schemas carry
//! `x-kubernetes-group-version-kind`, which is how `kubectl explain` finds them.
//!
//! - Built-in Kubernetes kinds: generated from k8s-openapi's `schemars` implementations (the
//!   upstream OpenAPI definitions, so names and `#/components/schemas/...` refs match kube's).
//! - Karmada and `flotilla.dev` kinds: the `openAPIV3Schema` of their CRDs in deploy/crds.
//! - Custom resources: the `openAPIV3Schema` of the stored CRD, with `metadata` pointing at
//!   ObjectMeta as kube-apiserver publishes it.
//!
//! The same schemas drive `unknown_fields`: the paths of fields a schema does not declare,
//! which kube-apiserver reports as `unknown field "spec.x"` (dropped by its decoder for built-in
//! kinds, pruned for custom resources) and `fieldValidation` turns into a warning or a 400.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::OnceLock;

use k8s_openapi::schemars::generate::{SchemaGenerator, SchemaSettings};
use k8s_openapi::schemars::{JsonSchema, Schema};
use serde_json::{Map, Value, json};

use crate::discovery::KUBE_VERSION;
use crate::registry::{self, Resource};

type Defs = Map<String, Value>;
type SchemaFn = fn(&mut SchemaGenerator) -> Schema;

fn sub<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    g.subschema_for::<T>()
}

use k8s_openapi::api::{
    apps::v1 as apps, authentication::v1 as authn, authorization::v1 as authz,
    autoscaling::v2 as autoscaling, batch::v1 as batch, coordination::v1 as coordination,
    core::v1 as core, events::v1 as events, networking::v1 as networking, policy::v1 as policy,
    rbac::v1 as rbac, scheduling::v1 as scheduling, storage::v1 as storage,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The built-in Kubernetes kinds served ([`registry::RESOURCES`]) and their k8s-openapi types.
/// authentication.k8s.io/v1beta1 SelfSubjectReview, gone from k8s-openapi, shares v1's schema.
const K8S_KINDS: &[(&str, &str, &str, SchemaFn)] = &[
    ("", "v1", "Namespace", sub::<core::Namespace>),
    ("", "v1", "ConfigMap", sub::<core::ConfigMap>),
    ("", "v1", "Secret", sub::<core::Secret>),
    ("", "v1", "Service", sub::<core::Service>),
    ("", "v1", "ServiceAccount", sub::<core::ServiceAccount>),
    (
        "",
        "v1",
        "PersistentVolumeClaim",
        sub::<core::PersistentVolumeClaim>,
    ),
    ("", "v1", "PersistentVolume", sub::<core::PersistentVolume>),
    ("", "v1", "Pod", sub::<core::Pod>),
    ("", "v1", "Node", sub::<core::Node>),
    ("", "v1", "Event", sub::<core::Event>),
    ("", "v1", "Endpoints", sub::<core::Endpoints>),
    ("", "v1", "LimitRange", sub::<core::LimitRange>),
    ("", "v1", "ResourceQuota", sub::<core::ResourceQuota>),
    (
        "",
        "v1",
        "ReplicationController",
        sub::<core::ReplicationController>,
    ),
    ("apps", "v1", "Deployment", sub::<apps::Deployment>),
    ("apps", "v1", "StatefulSet", sub::<apps::StatefulSet>),
    ("apps", "v1", "ReplicaSet", sub::<apps::ReplicaSet>),
    ("apps", "v1", "DaemonSet", sub::<apps::DaemonSet>),
    (
        "apps",
        "v1",
        "ControllerRevision",
        sub::<apps::ControllerRevision>,
    ),
    ("batch", "v1", "Job", sub::<batch::Job>),
    ("batch", "v1", "CronJob", sub::<batch::CronJob>),
    (
        "autoscaling",
        "v2",
        "HorizontalPodAutoscaler",
        sub::<autoscaling::HorizontalPodAutoscaler>,
    ),
    (
        "networking.k8s.io",
        "v1",
        "Ingress",
        sub::<networking::Ingress>,
    ),
    (
        "networking.k8s.io",
        "v1",
        "NetworkPolicy",
        sub::<networking::NetworkPolicy>,
    ),
    (
        "policy",
        "v1",
        "PodDisruptionBudget",
        sub::<policy::PodDisruptionBudget>,
    ),
    ("rbac.authorization.k8s.io", "v1", "Role", sub::<rbac::Role>),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        sub::<rbac::RoleBinding>,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        sub::<rbac::ClusterRole>,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        sub::<rbac::ClusterRoleBinding>,
    ),
    (
        "coordination.k8s.io",
        "v1",
        "Lease",
        sub::<coordination::Lease>,
    ),
    (
        "scheduling.k8s.io",
        "v1",
        "PriorityClass",
        sub::<scheduling::PriorityClass>,
    ),
    (
        "authentication.k8s.io",
        "v1",
        "SelfSubjectReview",
        sub::<authn::SelfSubjectReview>,
    ),
    (
        "authentication.k8s.io",
        "v1beta1",
        "SelfSubjectReview",
        sub::<authn::SelfSubjectReview>,
    ),
    (
        "authorization.k8s.io",
        "v1",
        "SelfSubjectAccessReview",
        sub::<authz::SelfSubjectAccessReview>,
    ),
    (
        "authorization.k8s.io",
        "v1",
        "SelfSubjectRulesReview",
        sub::<authz::SelfSubjectRulesReview>,
    ),
    ("events.k8s.io", "v1", "Event", sub::<events::Event>),
    (
        "storage.k8s.io",
        "v1",
        "StorageClass",
        sub::<storage::StorageClass>,
    ),
    (
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        sub::<apiextensions::CustomResourceDefinition>,
    ),
];

/// The CRDs of the Karmada and `flotilla.dev` kinds this server serves built in.
const BUILTIN_CRDS: &[&str] = &[
    include_str!("../../../deploy/crds/cluster.karmada.io_clusters.yaml"),
    include_str!("../../../deploy/crds/config.karmada.io_resourceinterpretercustomizations.yaml"),
    include_str!(
        "../../../deploy/crds/config.karmada.io_resourceinterpreterwebhookconfigurations.yaml"
    ),
    include_str!("../../../deploy/crds/flotilla.dev_schedulerprofiles.yaml"),
    include_str!("../../../deploy/crds/flotilla.dev_wasmplugins.yaml"),
    include_str!("../../../deploy/crds/policy.karmada.io_clusteroverridepolicies.yaml"),
    include_str!("../../../deploy/crds/policy.karmada.io_clusterpropagationpolicies.yaml"),
    include_str!("../../../deploy/crds/policy.karmada.io_overridepolicies.yaml"),
    include_str!("../../../deploy/crds/policy.karmada.io_propagationpolicies.yaml"),
    include_str!("../../../deploy/crds/work.karmada.io_clusterresourcebindings.yaml"),
    include_str!("../../../deploy/crds/work.karmada.io_resourcebindings.yaml"),
    include_str!("../../../deploy/crds/work.karmada.io_works.yaml"),
];

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const REF_PREFIX: &str = "#/components/schemas/";
/// The most unknown fields reported for one body (the rest are counted).
pub(crate) const MAX_REPORTED: usize = 16;
/// The longest field path reported; longer ones are cut.
const MAX_PATH: usize = 256;
/// The most values one walk looks at (bodies are at most 1.5 MiB, so this is rarely reached).
const MAX_NODES: usize = 1 << 20;
/// The deepest a walk goes (request bodies are depth-checked well below this).
const MAX_DEPTH: usize = 128;
/// The most JSON of CRD schemas one document carries (each CRD is at most 3 MiB; a group
/// version with more schemas than this serves the rest as open stubs).
const MAX_CUSTOM_SCHEMAS: usize = 32 << 20;
/// The most `$ref`/`allOf` hops resolving one schema.
const MAX_HOPS: usize = 32;

/// The built-in schemas, computed once.
struct Builtin {
    /// Per group version: the kind schemas and everything they reference.
    defs: HashMap<(String, String), Defs>,
    /// (group, version, kind) → schema name.
    kinds: HashMap<(String, String, String), String>,
    /// ObjectMeta and what it references (for custom resources).
    object_meta: Defs,
    /// Per group version: a hash of its schemas.
    hashes: HashMap<(String, String), u64>,
}

fn settings() -> SchemaGenerator {
    SchemaSettings::openapi3()
        .with(|s| s.meta_schema = None)
        .into_generator()
}

fn ref_name(schema: &Schema) -> Option<String> {
    schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix(REF_PREFIX))
        .map(str::to_owned)
}

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!([{"group": group, "kind": kind, "version": version}])
}

fn hash_of(v: &impl Hash) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    v.hash(&mut h);
    h.finish()
}

fn builtin() -> &'static Builtin {
    static BUILTIN: OnceLock<Builtin> = OnceLock::new();
    BUILTIN.get_or_init(|| {
        let mut out = Builtin {
            defs: HashMap::new(),
            kinds: HashMap::new(),
            object_meta: Defs::new(),
            hashes: HashMap::new(),
        };
        let mut gvs: Vec<(&str, &str)> = Vec::new();
        for (g, v, _, _) in K8S_KINDS {
            if !gvs.contains(&(*g, *v)) {
                gvs.push((g, v));
            }
        }
        for (g, v) in gvs {
            let mut generator = settings();
            let mut names = Vec::new();
            for (_, _, kind, f) in K8S_KINDS.iter().filter(|k| k.0 == g && k.1 == v) {
                if let Some(name) = ref_name(&f(&mut generator)) {
                    names.push((*kind, name));
                }
            }
            let mut defs = generator.take_definitions(true);
            for (kind, name) in names {
                if let Some(Value::Object(m)) = defs.get_mut(&name) {
                    m.insert("x-kubernetes-group-version-kind".into(), gvk(g, v, kind));
                }
                out.kinds
                    .insert((g.into(), v.into(), kind.into()), name.clone());
            }
            out.defs.insert((g.into(), v.into()), defs);
        }
        let mut generator = settings();
        sub::<ObjectMeta>(&mut generator);
        out.object_meta = generator.take_definitions(true);
        for text in BUILTIN_CRDS {
            let Ok(crd) = serde_yaml::from_str::<Value>(text) else {
                continue;
            };
            for (g, v, kind, name, schema) in crd_schemas(&crd) {
                let defs = out.defs.entry((g.clone(), v.clone())).or_default();
                defs.extend(out.object_meta.clone());
                defs.insert(name.clone(), schema);
                out.kinds.insert((g, v, kind), name);
            }
        }
        for (gv, defs) in &out.defs {
            let text = serde_json::to_string(defs).unwrap_or_default();
            out.hashes.insert(gv.clone(), hash_of(&text));
        }
        out
    })
}

/// The schema name kube-apiserver gives a custom resource: the group reversed, the version and
/// the kind (`policy.karmada.io`, `v1alpha1`, `PropagationPolicy` →
/// `io.karmada.policy.v1alpha1.PropagationPolicy`).
fn crd_schema_name(group: &str, version: &str, kind: &str) -> String {
    let mut parts: Vec<&str> = group.split('.').collect();
    parts.reverse();
    format!("{}.{version}.{kind}", parts.join("."))
}

/// The served versions of a CRD as (group, version, kind, schema name, published schema).
fn crd_schemas(crd: &Value) -> Vec<(String, String, String, String, Value)> {
    let mut out = Vec::new();
    let Some(spec) = crd.get("spec") else {
        return out;
    };
    let group = spec
        .get("group")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let kind = spec
        .pointer("/names/kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if group.is_empty() || kind.is_empty() {
        return out;
    }
    for v in spec
        .get("versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(version) = v.get("name").and_then(Value::as_str) else {
            continue;
        };
        if v.get("served").and_then(Value::as_bool) == Some(false) {
            continue;
        }
        let mut schema = v
            .pointer("/schema/openAPIV3Schema")
            .cloned()
            .unwrap_or_else(
                || json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
            );
        if let Value::Object(m) = &mut schema {
            let props = m
                .entry("properties")
                .or_insert_with(|| json!({}))
                .as_object_mut();
            if let Some(props) = props {
                props.insert(
                    "metadata".into(),
                    json!({
                        "allOf": [{"$ref": format!("{REF_PREFIX}{OBJECT_META}")}],
                        "description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
                    }),
                );
                for (field, what) in [("apiVersion", "APIVersion"), ("kind", "Kind")] {
                    props.entry(field).or_insert_with(|| {
                        json!({"type": "string", "description": format!("{what} of the object.")})
                    });
                }
            }
            m.insert(
                "x-kubernetes-group-version-kind".into(),
                gvk(group, version, kind),
            );
        }
        out.push((
            group.to_owned(),
            version.to_owned(),
            kind.to_owned(),
            crd_schema_name(group, version, kind),
            schema,
        ));
    }
    out
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

fn group_versions() -> Vec<(&'static str, &'static str)> {
    let mut gvs: Vec<(&str, &str)> = Vec::new();
    for r in registry::all() {
        if !gvs.contains(&(r.group, r.version)) {
            gvs.push((r.group, r.version));
        }
    }
    gvs
}

/// A hash of what the document of one group version is made of: the built-in schemas, the
/// served resources and the CRDs (by name and resourceVersion) that add schemas to it.
fn doc_hash(group: &str, version: &str, crds: &[&Value]) -> u64 {
    let b = builtin();
    let mut parts: Vec<String> = vec![
        b.hashes
            .get(&(group.to_owned(), version.to_owned()))
            .copied()
            .unwrap_or_default()
            .to_string(),
    ];
    for r in registry::resources_of(group, version) {
        parts.push(format!("{}/{}/{}", r.plural, r.kind, r.namespaced));
    }
    for crd in crds {
        if crd.pointer("/spec/group").and_then(Value::as_str) != Some(group) {
            continue;
        }
        parts.push(format!(
            "{}@{}",
            crd.pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default(),
            crd.pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .unwrap_or_default()
        ));
    }
    hash_of(&parts)
}

/// `/openapi/v3`: one entry per served group version, its URL carrying a hash of its content.
pub fn index(crds: &[&Value]) -> Value {
    let mut paths = Map::new();
    for (g, v) in group_versions() {
        let p = gv_path(g, v);
        let hash = doc_hash(g, v, crds);
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={hash:016X}")}),
        );
    }
    json!({"paths": paths})
}

/// The hash the index gives the document at `gv` (`api/v1`, `apis/g/v`): clients fetch
/// `?hash=` URLs and may cache what they get for as long as the hash stays in the index.
pub fn hash(gv: &str, crds: &[&Value]) -> Option<String> {
    let (group, version) = match gv.split('/').collect::<Vec<_>>().as_slice() {
        ["api", v] => ("", *v),
        ["apis", g, v] => (*g, *v),
        _ => return None,
    };
    Some(format!("{:016X}", doc_hash(group, version, crds)))
}

/// `/openapi/v3/{api/v1 | apis/g/v}`: the schemas of the group version's kinds (built in, and
/// from `crds`, the logical cluster's CustomResourceDefinitions) and a PUT/PATCH operation per
/// resource carrying the GVK and the `fieldValidation` parameter, which kubectl's query-param
/// verifier looks for.
pub fn document(gv: &str, crds: &[&Value]) -> Option<Value> {
    let (group, version) = match gv.split('/').collect::<Vec<_>>().as_slice() {
        ["api", v] => ("", *v),
        ["apis", g, v] => (*g, *v),
        _ => return None,
    };
    let resources = registry::resources_of(group, version);
    if resources.is_empty() {
        return None;
    }
    let b = builtin();
    let mut schemas = b
        .defs
        .get(&(group.to_owned(), version.to_owned()))
        .cloned()
        .unwrap_or_default();
    let mut custom: HashMap<String, String> = HashMap::new();
    let mut budget = MAX_CUSTOM_SCHEMAS;
    for crd in crds {
        if crd.pointer("/spec/group").and_then(Value::as_str) != Some(group) {
            continue;
        }
        for (_, v, kind, name, schema) in crd_schemas(crd) {
            if v != version || b.kinds.contains_key(&(group.into(), v, kind.clone())) {
                continue;
            }
            let (size, _) = crate::limits::measure(&schema, budget);
            if size > budget {
                // Past the document's bound: the kind keeps the open stub schema below.
                continue;
            }
            budget -= size;
            if !schemas.contains_key(OBJECT_META) {
                schemas.extend(b.object_meta.clone());
            }
            schemas.insert(name.clone(), schema);
            custom.insert(kind, name);
        }
    }
    let mut paths = Map::new();
    for r in resources {
        let base = format!("/{}", gv_path(group, version));
        let path = if r.namespaced {
            format!("{base}/namespaces/{{namespace}}/{}/{{name}}", r.plural)
        } else {
            format!("{base}/{}/{{name}}", r.plural)
        };
        let name = b
            .kinds
            .get(&(group.into(), version.into(), r.kind.into()))
            .or_else(|| custom.get(r.kind))
            .cloned();
        let name = name.unwrap_or_else(|| {
            // A custom resource registered from another logical cluster's CRD.
            let name = crd_schema_name(group, version, r.kind);
            schemas.insert(
                name.clone(),
                json!({
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": true,
                    "x-kubernetes-group-version-kind": gvk(group, version, r.kind),
                }),
            );
            name
        });
        let body = json!({"content": {"application/json": {"schema": {"$ref": format!("{REF_PREFIX}{name}")}}}, "required": true});
        let ok = json!({"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": format!("{REF_PREFIX}{name}")}}}}});
        let op = |verb: &str| {
            json!({
                "operationId": format!("{verb}{}", r.kind),
                "x-kubernetes-action": verb,
                "x-kubernetes-group-version-kind": {"group": r.group, "version": r.version, "kind": r.kind},
                "parameters": [
                    {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                    {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                    {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                ],
                "requestBody": body,
                "responses": ok,
            })
        };
        let mut get = op("get");
        if let Some(m) = get.as_object_mut() {
            m.remove("requestBody");
            m.insert("parameters".into(), json!([]));
        }
        paths.insert(
            path,
            json!({"get": get, "put": op("put"), "patch": op("patch")}),
        );
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": format!("v{}.{}.0", KUBE_VERSION.0, KUBE_VERSION.1)},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// Where to look a custom resource's schema up: its stored CRD.
pub(crate) fn needs_crd(res: &Resource) -> bool {
    !builtin().kinds.contains_key(&(
        res.group.to_owned(),
        res.version.to_owned(),
        res.kind.to_owned(),
    ))
}

/// Unknown fields found in a body: up to [`MAX_REPORTED`] paths, and how many more there were.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Unknown {
    pub(crate) paths: Vec<String>,
    pub(crate) unreported: usize,
}

/// The fields of `obj` that the schema of `res` does not declare (kube-apiserver's
/// `unknown field "…"`), with paths like `spec.template.spec.containers[0].imagePullPolcy`.
/// `crd` is the resource's CustomResourceDefinition when it is a custom resource
/// ([`needs_crd`]); without a schema nothing is unknown.
pub(crate) fn unknown_fields(res: &Resource, obj: &Value, crd: Option<&Value>) -> Unknown {
    let b = builtin();
    let key = (
        res.group.to_owned(),
        res.version.to_owned(),
        res.kind.to_owned(),
    );
    if let Some(name) = b.kinds.get(&key) {
        let Some(defs) = b.defs.get(&(key.0, key.1)) else {
            return Unknown::default();
        };
        let root = json!({"$ref": format!("{REF_PREFIX}{name}")});
        return walk(&root, obj, &[defs], true);
    }
    let Some(crd) = crd else {
        return Unknown::default();
    };
    match crd_schemas(crd)
        .into_iter()
        .find(|(_, v, kind, _, _)| v == res.version && kind == res.kind)
    {
        Some((_, _, _, _, schema)) => walk(&schema, obj, &[&b.object_meta], false),
        None => Unknown::default(),
    }
}

/// One step of a field path.
enum Seg<'a> {
    Key(&'a str),
    Index(usize),
}

struct Walker<'a> {
    defs: &'a [&'a Defs],
    path: Vec<Seg<'a>>,
    found: Unknown,
    nodes: usize,
}

/// What a schema (after `$ref` and `allOf`) says about the fields of an object.
#[derive(Default)]
struct Facts<'a> {
    properties: Vec<&'a Map<String, Value>>,
    additional: Option<&'a Value>,
    items: Option<&'a Value>,
    preserve: bool,
    int_or_string: bool,
    embedded: bool,
    /// Reached through a `$ref` (a built-in definition: an object schema without properties is
    /// open, as for RawExtension or FieldsV1).
    builtin: bool,
}

/// Walk `value` against `schema`; `builtin` says whether an object schema that declares no
/// properties accepts any field (built-in types) or none (structural CRD schemas: kube-apiserver
/// prunes such fields unless `x-kubernetes-preserve-unknown-fields`).
fn walk<'a>(schema: &'a Value, value: &'a Value, defs: &'a [&'a Defs], builtin: bool) -> Unknown {
    let mut w = Walker {
        defs,
        path: Vec::new(),
        found: Unknown::default(),
        nodes: 0,
    };
    w.visit(schema, value, builtin, 0);
    w.found
}

impl<'a> Walker<'a> {
    fn facts(&self, schema: &'a Value, builtin: bool) -> Facts<'a> {
        let mut facts = Facts {
            builtin,
            ..Facts::default()
        };
        let mut todo = vec![schema];
        let mut hops = 0;
        while let Some(s) = todo.pop() {
            hops += 1;
            if hops > MAX_HOPS {
                // Cannot tell: accept anything rather than report fields wrongly.
                facts.preserve = true;
                break;
            }
            let Some(m) = s.as_object() else { continue };
            if let Some(r) = m.get("$ref").and_then(Value::as_str) {
                let name = r.strip_prefix(REF_PREFIX).unwrap_or(r);
                match self.defs.iter().find_map(|d| d.get(name)) {
                    Some(def) => {
                        facts.builtin = true;
                        todo.push(def);
                    }
                    None => facts.preserve = true,
                }
            }
            for sub in m
                .get("allOf")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                todo.push(sub);
            }
            if let Some(p) = m.get("properties").and_then(Value::as_object) {
                facts.properties.push(p);
            }
            if let Some(a) = m.get("additionalProperties") {
                facts.additional = Some(a);
            }
            if let Some(i) = m.get("items") {
                facts.items = Some(i);
            }
            let flag = |k: &str| m.get(k).and_then(Value::as_bool) == Some(true);
            facts.preserve |= flag("x-kubernetes-preserve-unknown-fields");
            facts.int_or_string |= flag("x-kubernetes-int-or-string");
            facts.embedded |= flag("x-kubernetes-embedded-resource");
        }
        facts
    }

    fn record(&mut self, key: &str) {
        if self.found.paths.len() >= MAX_REPORTED {
            self.found.unreported += 1;
            return;
        }
        let mut out = String::new();
        for seg in &self.path {
            match seg {
                Seg::Key(k) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(k);
                }
                Seg::Index(i) => out.push_str(&format!("[{i}]")),
            }
            if out.len() > MAX_PATH {
                break;
            }
        }
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(key);
        if out.len() > MAX_PATH {
            let mut end = MAX_PATH;
            while !out.is_char_boundary(end) {
                end -= 1;
            }
            out.truncate(end);
        }
        self.found.paths.push(out);
    }

    fn visit(&mut self, schema: &'a Value, value: &'a Value, builtin: bool, depth: usize) {
        self.nodes += 1;
        if depth > MAX_DEPTH || self.nodes > MAX_NODES {
            return;
        }
        match value {
            Value::Object(fields) => {
                let facts = self.facts(schema, builtin);
                if facts.int_or_string {
                    return;
                }
                let open_object = facts.properties.is_empty() && facts.additional.is_none();
                if open_object && (facts.preserve || facts.builtin) {
                    return;
                }
                for (k, v) in fields {
                    if let Some(s) = facts.properties.iter().find_map(|p| p.get(k)) {
                        self.path.push(Seg::Key(k));
                        self.visit(s, v, facts.builtin, depth + 1);
                        self.path.pop();
                    } else if let Some(a) = facts.additional {
                        if a.is_object() {
                            self.path.push(Seg::Key(k));
                            self.visit(a, v, facts.builtin, depth + 1);
                            self.path.pop();
                        } else if a == &Value::Bool(false) && !facts.preserve {
                            self.record(k);
                        }
                    } else if facts.preserve
                        || (facts.embedded
                            && ["apiVersion", "kind", "metadata"].contains(&k.as_str()))
                    {
                    } else {
                        self.record(k);
                    }
                }
            }
            Value::Array(items) => {
                let facts = self.facts(schema, builtin);
                if let Some(s) = facts.items {
                    for (i, v) in items.iter().enumerate() {
                        self.path.push(Seg::Index(i));
                        self.visit(s, v, facts.builtin, depth + 1);
                        self.path.pop();
                    }
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(group: &str, version: &str, kind: &str) -> &'static Resource {
        registry::all()
            .into_iter()
            .find(|r| r.group == group && r.version == version && r.kind == kind)
            .expect("served")
    }

    fn deployment(container: Value) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}, "annotations": {"a": "b"},
                         "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {}}}]},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [
                        {"name": "ok", "image": "nginx", "ports": [{"containerPort": 80}],
                         "resources": {"limits": {"cpu": "1", "memory": 1024}}},
                        container,
                    ]},
                },
            },
        })
    }

    #[test]
    fn a_valid_deployment_has_no_unknown_fields() {
        let obj = deployment(json!({"name": "b", "image": "x", "imagePullPolicy": "Always"}));
        let u = unknown_fields(res("apps", "v1", "Deployment"), &obj, None);
        assert_eq!(u, Unknown::default());
    }

    #[test]
    fn unknown_fields_in_nested_lists_are_named_with_their_index() {
        let mut obj = deployment(json!({"name": "b", "image": "x", "imagePullPolcy": "Always"}));
        obj["spec"]["bogus"] = json!(1);
        obj["metadata"]["lables"] = json!({});
        let u = unknown_fields(res("apps", "v1", "Deployment"), &obj, None);
        assert_eq!(
            u.paths,
            // In the body's order, as kube-apiserver's decoder meets them.
            [
                "metadata.lables",
                "spec.template.spec.containers[1].imagePullPolcy",
                "spec.bogus",
            ]
        );
    }

    #[test]
    fn maps_accept_any_key_and_check_their_values() {
        // ConfigMap data is a map of strings; resource limits a map of quantities.
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                        "data": {"any-key": "v", "other": "w"}});
        assert!(
            unknown_fields(res("", "v1", "ConfigMap"), &cm, None)
                .paths
                .is_empty()
        );
        // PodSpec.overhead is a map of Quantity; nodeSelector a map of strings.
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"nodeSelector": {"k": "v"}, "containers": [{"name": "c", "env": [{"name": "A", "valu": "1"}]}]}});
        assert_eq!(
            unknown_fields(res("", "v1", "Pod"), &pod, None).paths,
            ["spec.containers[0].env[0].valu"]
        );
        // RawExtension (ControllerRevision.data) and FieldsV1 hold any JSON.
        let cr = json!({"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": {"name": "r"},
                        "revision": 1, "data": {"spec": {"template": {"anything": [1, {"x": 2}]}}}});
        assert!(
            unknown_fields(res("apps", "v1", "ControllerRevision"), &cr, None)
                .paths
                .is_empty()
        );
    }

    fn crd(schema: Value) -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com", "resourceVersion": "7"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"kind": "Widget", "plural": "widgets"},
                     "versions": [{"name": "v1", "served": true, "storage": true,
                                   "schema": {"openAPIV3Schema": schema}}]},
        })
    }

    fn widget_res() -> Resource {
        Resource {
            group: "example.com",
            version: "v1",
            kind: "Widget",
            plural: "widgets",
            singular: "widget",
            namespaced: true,
            has_status: false,
            short_names: &[],
            categories: &[],
            strategic: false,
        }
    }

    #[test]
    fn crd_schemas_prune_like_kube_and_respect_preserve_unknown_fields() {
        let crd = crd(json!({
            "type": "object",
            "properties": {
                "spec": {"type": "object", "properties": {
                    "size": {"type": "integer"},
                    "port": {"x-kubernetes-int-or-string": true},
                    "raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "closed": {"type": "object"},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "items": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "string"}}}},
                    "embedded": {"type": "object", "x-kubernetes-embedded-resource": true,
                                 "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
                }},
            },
        }));
        let obj = json!({
            "apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w", "labels": {"a": "b"}, "namee": "x"},
            "spec": {
                "size": 1, "port": "http", "raw": {"anything": {"goes": [1]}},
                "closed": {"x": 1}, "labels": {"k": "v"},
                "items": [{"n": "a"}, {"n": "b", "m": "c"}],
                "embedded": {"apiVersion": "v1", "kind": "Pod", "metadata": {}, "spec": {"z": 1}},
                "extra": true,
            },
        });
        let r = widget_res();
        assert!(needs_crd(&r));
        assert_eq!(
            unknown_fields(&r, &obj, Some(&crd)).paths,
            [
                "metadata.namee",
                "spec.closed.x",
                "spec.items[1].m",
                "spec.extra",
            ]
        );
        // Without the CRD there is no schema, so nothing is unknown.
        assert!(unknown_fields(&r, &obj, None).paths.is_empty());
    }

    #[test]
    fn karmada_kinds_use_their_crd_schemas() {
        let pp = json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": "p"},
            "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "nmae": "x"}],
                     "placement": {"clusterAffinity": {"clusterNames": ["a"]}}}});
        let r = res("policy.karmada.io", "v1alpha1", "PropagationPolicy");
        assert!(!needs_crd(r));
        assert_eq!(
            unknown_fields(r, &pp, None).paths,
            ["spec.resourceSelectors[0].nmae"]
        );
    }

    #[test]
    fn reports_are_bounded_and_deep_values_do_not_overflow() {
        let mut spec = Map::new();
        for i in 0..100 {
            spec.insert(format!("f{i:03}"), json!(i));
        }
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "bogus": spec});
        let mut obj = cm.clone();
        obj.as_object_mut().unwrap().extend(spec.clone());
        let u = unknown_fields(res("", "v1", "ConfigMap"), &obj, None);
        assert_eq!(u.paths.len(), MAX_REPORTED);
        assert_eq!(u.unreported, 101 - MAX_REPORTED);
        // A deeply nested preserve-unknown-fields value.
        let mut deep = json!(1);
        for _ in 0..500 {
            deep = json!({"a": [deep]});
        }
        let crd = crd(
            json!({"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}),
        );
        let obj = json!({"spec": deep});
        assert!(
            unknown_fields(&widget_res(), &obj, Some(&crd))
                .paths
                .is_empty()
        );
    }

    /// kubectl's default `--validate=strict` sends fieldValidation=Strict, so a manifest the
    /// project ships with a field its kind's schema lacks would be refused.
    #[test]
    fn shipped_manifests_have_no_unknown_fields() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut dirs = vec![
            root.join("examples"),
            root.join("engine/api/tests/data"),
            root.join("deploy/crds"),
        ];
        let mut files = Vec::new();
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let p = entry.path();
                if p.is_dir() {
                    dirs.push(p);
                } else if p.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                    files.push(p);
                }
            }
        }
        assert!(!files.is_empty());
        let mut checked = 0;
        let mut problems = Vec::new();
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for doc in serde_yaml::Deserializer::from_str(&text) {
                let Ok(obj) = <Value as serde::Deserialize>::deserialize(doc) else {
                    continue;
                };
                let (Some(av), Some(kind)) = (
                    obj.get("apiVersion").and_then(Value::as_str),
                    obj.get("kind").and_then(Value::as_str),
                ) else {
                    continue;
                };
                let Some(r) = registry::lookup_kind(av, kind) else {
                    continue;
                };
                checked += 1;
                let u = unknown_fields(r, &obj, None);
                if !u.paths.is_empty() {
                    problems.push(format!("{}: {kind}: {:?}", file.display(), u.paths));
                }
            }
        }
        assert!(checked > 10, "only {checked} manifests found");
        assert!(problems.is_empty(), "{problems:#?}");
    }

    #[test]
    fn documents_carry_kube_names_refs_and_gvks() {
        let doc = document("apis/apps/v1", &[]).unwrap();
        let schemas = &doc["components"]["schemas"];
        let d = &schemas["io.k8s.api.apps.v1.Deployment"];
        assert_eq!(
            d["x-kubernetes-group-version-kind"],
            json!([{"group": "apps", "kind": "Deployment", "version": "v1"}])
        );
        assert_eq!(
            d["properties"]["spec"]["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec"
        );
        assert!(schemas[OBJECT_META]["properties"]["labels"].is_object());
        assert!(schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"].is_object());
        // Every ref resolves inside the document.
        let text = serde_json::to_string(&doc).unwrap();
        for part in text.split("\"$ref\":\"").skip(1) {
            let name = part.split('"').next().unwrap();
            let name = name.strip_prefix(REF_PREFIX).unwrap();
            assert!(schemas.get(name).is_some(), "{name} missing");
        }
        let path = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"];
        assert_eq!(path["patch"]["parameters"][0]["name"], "fieldValidation");
        let pp = document("apis/policy.karmada.io/v1alpha1", &[]).unwrap();
        let s = &pp["components"]["schemas"]["io.karmada.policy.v1alpha1.PropagationPolicy"];
        assert!(s["properties"]["spec"]["properties"]["placement"].is_object());
        assert!(document("apis/nope/v1", &[]).is_none());
    }

    #[test]
    fn the_index_hash_changes_with_the_crds() {
        let crd = crd(json!({"type": "object"}));
        let before = index(&[]);
        let url = before["paths"]["apis/apps/v1"]["serverRelativeURL"]
            .as_str()
            .unwrap();
        assert!(url.ends_with(&hash("apis/apps/v1", &[]).unwrap()), "{url}");
        let after = index(&[&crd]);
        assert_eq!(
            before["paths"]["apis/apps/v1"],
            after["paths"]["apis/apps/v1"]
        );
        // example.com is not registered here; the hash of a registered group moves instead.
        let mut karmada = crd.clone();
        karmada["spec"]["group"] = json!("policy.karmada.io");
        let moved = index(&[&karmada]);
        assert_ne!(
            before["paths"]["apis/policy.karmada.io/v1alpha1"],
            moved["paths"]["apis/policy.karmada.io/v1alpha1"]
        );
    }
}
