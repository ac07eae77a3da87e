//! Admission for the embedded API server: the defaults and checks of Karmada's webhooks for the
//! policy kinds and Clusters, and Flotilla's own checks for `SchedulerProfile` and `WasmPlugin`.
//! The same core functions `flotilla validate` and `flotilla plan` run, so a policy the server
//! accepts plans offline and vice versa (except the known-kind check of offline inputs: a server
//! may serve custom kinds the offline inventory does not know).
//!
//! | kind | defaults | checks |
//! |---|---|---|
//! | (Cluster)PropagationPolicy | Karmada's mutating webhook + CRD defaults | Karmada's validation, CEL compiled |
//! | (Cluster)OverridePolicy | selector namespaces | Karmada's validation, CEL compiled |
//! | Cluster | legacy `spec.zone` → `spec.zones` | the spec's schema |
//! | (Cluster)ResourceBinding, Work | the permanent-id label on create (also on the policies) | — |
//! | SchedulerProfile | — | the spec's schema, built-in names exist, CEL compiles; Wasm is not loaded |
//! | WasmPlugin | — | the spec's schema, one module source, base64 decodes, sha256 shape |
//! | ResourceInterpreterCustomization | — | no other stored one customizes the same operation of its target (Karmada's `403` denial), every rule compiles |
//!
//! Every error names the field (`spec.placement.clusterAffinities[1].affinityName`), and CEL
//! errors the column in the expression.

use std::sync::Arc;

#[path = "autoscaling_admission.rs"]
mod autoscaling;
#[path = "permanent_ids.rs"]
mod permanent_ids;

use base64::Engine as _;
use flotilla_api::policy::{OverridePolicy, PropagationPolicy};
use flotilla_apiserver::admission::{Admission, AdmissionError, FieldError, Operation};
use flotilla_apiserver::registry::Resource;
use flotilla_core::expression::{ExpressionEngine, Site};
use flotilla_core::profile::{
    Backend, BuildError, ExtensionPoint, Factories, PluginFactory, PluginSpec, ProfileDocument,
    WasmPluginSpec, WasmSource,
};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// The admission `flotilla up` registers on its API server, with the process's CEL engine.
pub fn admission() -> Arc<dyn Admission> {
    Arc::new(Policies::new(super::profiles::cel()))
}

/// Defaults and validation of the Karmada policy kinds, Clusters and the `flotilla.dev` kinds.
#[derive(Debug)]
pub struct Policies {
    cel: Arc<flotilla_cel::Engine>,
}

impl Policies {
    /// Admission compiling CEL with `cel`.
    pub fn new(cel: Arc<flotilla_cel::Engine>) -> Self {
        Policies { cel }
    }
}

impl Admission for Policies {
    fn admit_with(
        &self,
        op: Operation,
        resource: &Resource,
        object: &mut Value,
        old: Option<&Value>,
        existing: &dyn flotilla_apiserver::admission::Existing,
    ) -> Result<(), AdmissionError> {
        // Karmada's webhook checks conflicts with the stored customizations before compiling.
        if (resource.group, resource.kind)
            == ("config.karmada.io", "ResourceInterpreterCustomization")
        {
            super::interpreters::admit_against_stored(object, resource, existing)?;
        }
        self.admit(op, resource, object, old)
    }

    fn admit(
        &self,
        op: Operation,
        resource: &Resource,
        object: &mut Value,
        _old: Option<&Value>,
    ) -> Result<(), AdmissionError> {
        permanent_ids::assign(op, resource.group, resource.kind, object);
        match (resource.group, resource.kind) {
            ("policy.karmada.io", "PropagationPolicy" | "ClusterPropagationPolicy") => {
                self.propagation_policy(object)
            }
            ("policy.karmada.io", "OverridePolicy" | "ClusterOverridePolicy") => {
                self.override_policy(object)
            }
            ("cluster.karmada.io", "Cluster") => cluster(object),
            ("flotilla.dev", "SchedulerProfile") => self.scheduler_profile(object),
            ("flotilla.dev", "WasmPlugin") => wasm_plugin(object),
            ("config.karmada.io", "ResourceInterpreterWebhookConfiguration") => {
                interpreter_webhook_configuration(object)
            }
            ("config.karmada.io", "ResourceInterpreterCustomization") => customization(object),
            ("autoscaling.karmada.io", "FederatedHPA") => autoscaling::federated_hpa(object),
            ("autoscaling.karmada.io", "CronFederatedHPA") => {
                autoscaling::cron_federated_hpa(object)
            }
            _ => Ok(()),
        }
    }
}

/// A `ResourceInterpreterCustomization` must compile: a target, one program per rule, each
/// accepted by its backend ([`super::interpreters::rule_backends`]). The error names the rule.
fn customization(object: &Value) -> Result<(), AdmissionError> {
    let ric: flotilla_api::interpreter::ResourceInterpreterCustomization = typed(object)?;
    let backends = super::interpreters::rule_backends();
    let refs: Vec<&dyn flotilla_core::interpreter::RuleBackend> =
        backends.iter().map(AsRef::as_ref).collect();
    match flotilla_core::interpreter::Customization::compile(&ric, &refs) {
        Ok(_) => Ok(()),
        Err(e) => {
            let (field, message) = e.split_once(": ").unwrap_or(("spec", e.as_str()));
            Err(AdmissionError::new(vec![fe(field, message)]))
        }
    }
}

/// Karmada's validating webhook for `ResourceInterpreterWebhookConfiguration`.
fn interpreter_webhook_configuration(object: &Value) -> Result<(), AdmissionError> {
    // Server-set metadata is none of the checks' business.
    let view = serde_json::json!({
        "metadata": {"name": object.pointer("/metadata/name")},
        "webhooks": object.get("webhooks").cloned().unwrap_or_else(|| Value::Array(Vec::new())),
    });
    let config = serde_path_to_error::deserialize(view)
        .map_err(|e| AdmissionError::field(e.path().to_string(), e.into_inner().to_string()))?;
    result(from_core(flotilla_core::interpreter_webhook::validate(
        &config,
    )))
}

fn fe(field: impl Into<String>, message: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        message: message.into(),
    }
}

fn from_core(errors: Vec<flotilla_core::validate::FieldError>) -> Vec<FieldError> {
    errors.into_iter().map(|e| fe(e.field, e.message)).collect()
}

fn result(causes: Vec<FieldError>) -> Result<(), AdmissionError> {
    if causes.is_empty() {
        Ok(())
    } else {
        Err(AdmissionError::new(causes))
    }
}

/// The typed view of `object`: apiVersion, kind, name, namespace and spec (metadata the types do
/// not need is left out, so server-set fields never fail deserialization). Errors name the field.
fn typed<T: DeserializeOwned>(object: &Value) -> Result<T, AdmissionError> {
    let mut view = Map::new();
    for k in ["apiVersion", "kind"] {
        view.insert(k.to_owned(), object.get(k).cloned().unwrap_or_default());
    }
    let mut meta = Map::new();
    for k in ["name", "namespace"] {
        if let Some(v) = object
            .pointer(&format!("/metadata/{k}"))
            .filter(|v| !v.is_null())
        {
            meta.insert(k.to_owned(), v.clone());
        }
    }
    view.insert("metadata".to_owned(), Value::Object(meta));
    if let Some(spec) = object.get("spec") {
        view.insert("spec".to_owned(), spec.clone());
    }
    serde_path_to_error::deserialize(Value::Object(view)).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { "spec".to_owned() } else { path };
        AdmissionError::field(field, e.into_inner().to_string())
    })
}

/// Deserialize `object.spec` alone as `T`, with `spec.`-prefixed field paths.
fn typed_spec<T: DeserializeOwned>(object: &Value) -> Result<T, AdmissionError> {
    let Some(spec) = object.get("spec") else {
        return Err(AdmissionError::field("spec", "Required value"));
    };
    serde_path_to_error::deserialize(spec.clone()).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." {
            "spec".to_owned()
        } else {
            format!("spec.{path}")
        };
        AdmissionError::field(field, e.into_inner().to_string())
    })
}

fn set_spec<T: serde::Serialize>(object: &mut Value, spec: &T) -> Result<(), AdmissionError> {
    let v = serde_json::to_value(spec).map_err(|e| {
        AdmissionError::field("spec", format!("cannot encode the defaulted spec: {e}"))
    })?;
    object["spec"] = v;
    Ok(())
}

impl Policies {
    fn expressions(
        &self,
        sites: Vec<Site<'_>>,
        structural: Vec<flotilla_core::validate::FieldError>,
        out: &mut Vec<FieldError>,
    ) {
        out.extend(from_core(structural));
        for site in sites {
            if let Err(e) = self.cel.check(site.kind, site.source) {
                out.push(fe(
                    site.field,
                    format!("invalid {} expression: {}", self.cel.language(), e.message),
                ));
            }
        }
    }

    fn propagation_policy(&self, object: &mut Value) -> Result<(), AdmissionError> {
        if object.get("spec").is_none() {
            return Err(AdmissionError::field("spec", "Required value"));
        }
        let mut p: PropagationPolicy = typed(object)?;
        flotilla_core::validate::default_propagation_policy(&mut p);
        let mut causes = from_core(flotilla_core::validate::validate_propagation_policy(&p));
        let (sites, structural) = flotilla_core::expression::propagation_sites(&p);
        self.expressions(sites, structural, &mut causes);
        result(causes)?;
        set_spec(object, &p.spec)
    }

    fn override_policy(&self, object: &mut Value) -> Result<(), AdmissionError> {
        if object.get("spec").is_none() {
            return Err(AdmissionError::field("spec", "Required value"));
        }
        let mut o: OverridePolicy = typed(object)?;
        flotilla_core::overrides::set_defaults(&mut o);
        let mut causes = from_core(flotilla_core::overrides::validate(&o));
        let (sites, structural) = flotilla_core::expression::override_sites(&o);
        self.expressions(sites, structural, &mut causes);
        result(causes)?;
        set_spec(object, &o.spec)
    }

    fn scheduler_profile(&self, object: &mut Value) -> Result<(), AdmissionError> {
        let doc: ProfileDocument = typed(object)?;
        // Wasm modules load in the controllers; the other backends build here.
        let factories = Factories::new([
            Arc::new(flotilla_plugins::BuiltinFactory) as Arc<dyn PluginFactory>,
            Arc::new(flotilla_cel::CelFactory::new(Arc::clone(&self.cel))),
        ]);
        let mut causes = Vec::new();
        for point in ExtensionPoint::ALL {
            for (i, spec) in doc.spec.list(point).into_iter().flatten().enumerate() {
                let field = doc.spec.entry_path(point, i);
                check_plugin(point, spec, &field, &factories, &mut causes);
            }
        }
        if let Some(rules) = &doc.spec.preemption {
            check_victim_rules(rules, &mut causes);
        }
        result(causes)
    }
}

/// One profile entry: Wasm entries are checked for shape only (modules load in the controllers);
/// the others must build with their backend's factory for `point`.
fn check_plugin(
    point: ExtensionPoint,
    spec: &PluginSpec,
    field: &str,
    factories: &Factories,
    out: &mut Vec<FieldError>,
) {
    if spec.name.is_empty() {
        out.push(fe(format!("{field}.name"), "Required value"));
    }
    if let Some(l) = &spec.limits {
        out.extend(from_core(l.validate(&format!("{field}.limits"))));
    }
    let backend = match spec.backend() {
        Ok(b) => b,
        Err(message) => return out.push(fe(field, message)),
    };
    if let (Backend::Wasm, Some(w)) = (backend, &spec.wasm) {
        check_wasm_source(w, &format!("{field}.wasm"), out);
        return;
    }
    match factories.build(point, spec) {
        Ok(built) if built.point() == point => {}
        Ok(_) => out.push(fe(
            field,
            format!("plugin {:?} does not implement {point}", spec.name),
        )),
        Err(BuildError::Invalid(message)) => {
            let sub = if backend != Backend::Builtin {
                format!(".{}", backend.field())
            } else if spec.config.is_some() {
                ".config".to_owned()
            } else {
                String::new()
            };
            out.push(fe(format!("{field}{sub}"), message));
        }
        Err(BuildError::NoBackend(b)) => out.push(fe(
            format!("{field}.{}", b.field()),
            format!("no {b} plugin backend"),
        )),
        Err(BuildError::Unknown) => out.push(fe(
            format!("{field}.name"),
            format!(
                "unknown plugin {:?}: not a built-in {point} plugin ({}), and no wasm or cel source given",
                spec.name,
                flotilla_plugins::registry::names(point).join(", ")
            ),
        )),
    }
}

/// Binding preemption's `spec.preemption`: CEL rules or a Wasm victim plugin, whose entry is
/// checked for shape as Wasm profile entries are (its module loads in the controllers).
fn check_victim_rules(rules: &flotilla_core::preemption::VictimRules, out: &mut Vec<FieldError>) {
    let Some(spec) = &rules.plugin else { return };
    let field = "spec.preemption.plugin";
    if rules.has_expressions() {
        out.push(fe(
            "spec.preemption",
            "set victimFilter/victimScore (CEL) or plugin (Wasm), not both",
        ));
    }
    if spec.name.is_empty() {
        out.push(fe(format!("{field}.name"), "Required value"));
    }
    if let Some(l) = &spec.limits {
        out.extend(from_core(l.validate(&format!("{field}.limits"))));
    }
    match (&spec.wasm, &spec.cel) {
        (Some(w), None) => check_wasm_source(w, &format!("{field}.wasm"), out),
        _ => out.push(fe(
            format!("{field}.wasm"),
            "a victim plugin is a Wasm module: set wasm (and not cel)",
        )),
    }
}

fn check_wasm_source(w: &WasmSource, field: &str, out: &mut Vec<FieldError>) {
    match (w.path.is_empty(), &w.plugin) {
        (false, Some(_)) => out.push(fe(field, "set one of path and plugin, not both")),
        (true, None) => out.push(fe(
            field,
            "one of path (a .wasm file) and plugin (a WasmPlugin object) is required",
        )),
        (true, Some(name)) if name.is_empty() => {
            out.push(fe(format!("{field}.plugin"), "must not be empty"))
        }
        _ => {}
    }
    if let Some(d) = &w.sha256 {
        check_sha256(d, &format!("{field}.sha256"), out);
    }
}

fn check_sha256(digest: &str, field: &str, out: &mut Vec<FieldError>) {
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        out.push(fe(field, format!("Invalid value: {digest:?}: must be 64 hexadecimal characters, optionally prefixed with \"sha256:\"")));
    }
}

fn cluster(object: &mut Value) -> Result<(), AdmissionError> {
    let mut c: flotilla_api::cluster::Cluster = typed(object)?;
    let before = c.spec.clone();
    flotilla_core::validate::default_cluster(&mut c);
    if c.spec != before {
        set_spec(object, &c.spec)?;
    }
    Ok(())
}

fn wasm_plugin(object: &mut Value) -> Result<(), AdmissionError> {
    let spec: WasmPluginSpec = typed_spec(object)?;
    let mut causes = Vec::new();
    let sources = spec.module.sources();
    if let Some(image) = &spec.module.image {
        if let Err(e) = flotilla_controller::oci::parse_reference(image) {
            causes.push(fe(
                "spec.module.image",
                format!("Invalid value: {}", e.message),
            ));
        }
        if spec.module.format == Some(flotilla_core::profile::ModuleFormat::Wat) {
            causes.push(fe(
                "spec.module.format",
                "an image holds a binary Wasm module (layer application/wasm); wat is for base64 and path",
            ));
        }
    } else {
        if spec.module.image_pull_secret.is_some() {
            causes.push(fe(
                "spec.module.imagePullSecret",
                "only goes with spec.module.image",
            ));
        }
        if spec.module.insecure.is_some() {
            causes.push(fe(
                "spec.module.insecure",
                "only goes with spec.module.image",
            ));
        }
    }
    if let Some(s) = &spec.module.image_pull_secret
        && (s.is_empty()
            || s.len() > 253
            || !s
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.'))
    {
        causes.push(fe(
            "spec.module.imagePullSecret",
            "must be the name of a Secret (lowercase DNS subdomain) in the controllers' namespace",
        ));
    }
    match (&spec.module.path, &spec.module.base64) {
        _ if sources.len() > 1 => causes.push(fe(
            "spec.module",
            format!(
                "set one of path, base64 and image, not {}",
                sources.join(" and ")
            ),
        )),
        (None, None) if spec.module.image.is_some() => {}
        (None, None) => causes.push(fe(
            "spec.module",
            "one of path, base64 and image is required",
        )),
        (Some(p), None) if p.is_empty() => causes.push(fe("spec.module.path", "must not be empty")),
        (Some(p), None)
            if !std::path::Path::new(p).components().all(|c| {
                matches!(
                    c,
                    std::path::Component::Normal(_) | std::path::Component::CurDir
                )
            }) =>
        {
            causes.push(fe(
                "spec.module.path",
                "must be a relative path inside the controllers' --module-dir, without \"..\"",
            ))
        }
        (None, Some(b)) => match base64::engine::general_purpose::STANDARD.decode(b.trim()) {
            Ok(bytes) if bytes.is_empty() => {
                causes.push(fe("spec.module.base64", "the module is empty"))
            }
            Ok(bytes)
                if !bytes.starts_with(b"\0asm")
                    && spec.module.format != Some(flotilla_core::profile::ModuleFormat::Wat) =>
            {
                causes.push(fe(
                    "spec.module.base64",
                    format!(
                        "not a Wasm module ({} bytes without the \\0asm header); for WebAssembly text set spec.module.format: wat",
                        bytes.len()
                    ),
                ));
            }
            Ok(bytes) if !bytes.starts_with(b"\0asm") && std::str::from_utf8(&bytes).is_err() => {
                causes.push(fe(
                    "spec.module.base64",
                    "spec.module.format is wat, but the module is neither WAT text nor binary Wasm",
                ));
            }
            Ok(_) => {}
            Err(e) => causes.push(fe(
                "spec.module.base64",
                format!("not valid base64 (standard alphabet): {e}"),
            )),
        },
        _ => {}
    }
    if let Some(d) = &spec.sha256 {
        check_sha256(d, "spec.sha256", &mut causes);
    }
    if let Some(l) = &spec.limits {
        causes.extend(from_core(l.validate("spec.limits")));
    }
    result(causes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn res(group: &str, kind: &str) -> &'static Resource {
        flotilla_apiserver::registry::all()
            .into_iter()
            .find(|r| r.group == group && r.kind == kind)
            .expect("served kind")
    }

    fn admit(kind: (&str, &str), mut obj: Value) -> Result<Value, AdmissionError> {
        let a = Policies::new(Arc::new(flotilla_cel::Engine::default()));
        a.admit(Operation::Create, res(kind.0, kind.1), &mut obj, None)
            .map(|()| obj)
    }

    const PP: (&str, &str) = ("policy.karmada.io", "PropagationPolicy");

    fn pp(placement: Value) -> Value {
        json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
               "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "3", "managedFields": [{"manager": "kubectl"}]},
               "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}], "placement": placement}})
    }

    fn fields(e: &AdmissionError) -> Vec<&str> {
        e.causes.iter().map(|c| c.field.as_str()).collect()
    }

    #[test]
    fn propagation_policy_defaults_are_applied_and_metadata_kept() {
        let out = admit(
            PP,
            pp(json!({"replicaScheduling": {}, "spreadConstraints": [{"maxGroups": 2}]})),
        )
        .unwrap();
        assert_eq!(out["spec"]["resourceSelectors"][0]["namespace"], "ns");
        assert_eq!(
            out["spec"]["placement"]["replicaScheduling"],
            json!({"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted"})
        );
        assert_eq!(
            out["spec"]["placement"]["spreadConstraints"][0],
            json!({"spreadByField": "cluster", "maxGroups": 2, "minGroups": 1})
        );
        assert_eq!(
            (
                &out["spec"]["conflictResolution"],
                &out["spec"]["preemption"]
            ),
            (&json!("Abort"), &json!("Never"))
        );
        assert_eq!(out["spec"]["schedulerName"], "default-scheduler");
        assert_eq!(
            out["metadata"]["managedFields"],
            json!([{"manager": "kubectl"}])
        );
    }

    #[test]
    fn propagation_policy_validation_names_the_field() {
        let e = admit(
            PP,
            pp(json!({"clusterAffinities": [{"affinityName": "a"}, {"affinityName": "a"}]})),
        )
        .unwrap_err();
        assert_eq!(
            fields(&e),
            ["spec.placement.clusterAffinities[1].affinityName"],
            "{e}"
        );
        let e = admit(PP, pp(json!({"replicaScheduling": {"weightPreference": {"staticWeightList": [{"targetCluster": {}, "weight": 0}]}}}))).unwrap_err();
        assert_eq!(
            fields(&e),
            ["spec.placement.replicaScheduling.weightPreference.staticWeightList[0].weight"],
            "{e}"
        );
    }

    #[test]
    fn cel_errors_name_the_field_and_column() {
        let bad = json!({"clusterAffinity": {"celSelector": {"celExpressions": ["cluster.metadata.name == 'a' &&"]}}});
        let e = admit(PP, pp(bad)).unwrap_err();
        assert_eq!(
            fields(&e),
            ["spec.placement.clusterAffinity.celSelector.celExpressions[0]"],
            "{e}"
        );
        assert!(
            e.causes[0].message.contains("invalid CEL expression")
                && e.causes[0].message.contains("column"),
            "{e}"
        );
        let good = json!({"clusterAffinity": {"celSelector": {"celExpressions": ["cluster.metadata.name == 'a'"]}}});
        assert!(admit(PP, pp(good)).is_ok());
    }

    #[test]
    fn schema_errors_carry_the_path() {
        let e = admit(PP, pp(json!({"clusterAffinity": {"clusterNames": "a"}}))).unwrap_err();
        assert_eq!(
            fields(&e),
            ["spec.placement.clusterAffinity.clusterNames"],
            "{e}"
        );
        let mut no_spec = pp(json!({}));
        no_spec.as_object_mut().unwrap().remove("spec");
        assert_eq!(fields(&admit(PP, no_spec).unwrap_err()), ["spec"]);
    }

    #[test]
    fn override_policy_cel_is_compiled() {
        let op = |expr: &str| {
            json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "OverridePolicy", "metadata": {"name": "o", "namespace": "ns"},
                   "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
                            "overrideRules": [{"targetCluster": {"celSelector": {"celExpressions": [expr]}},
                                               "overriders": {"plaintext": [{"path": "/spec/replicas", "operator": "replace", "value": 1}]}}]}})
        };
        let out = admit(
            ("policy.karmada.io", "OverridePolicy"),
            op("clusterName == 'm1'"),
        )
        .unwrap();
        assert_eq!(out["spec"]["resourceSelectors"][0]["namespace"], "ns");
        let e = admit(
            ("policy.karmada.io", "OverridePolicy"),
            op("clusterName =="),
        )
        .unwrap_err();
        assert_eq!(
            fields(&e),
            ["spec.overrideRules[0].targetCluster.celSelector.celExpressions[0]"],
            "{e}"
        );
    }

    #[test]
    fn cluster_legacy_zone_moves_to_zones() {
        let c = json!({"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "metadata": {"name": "m1"}, "spec": {"zone": "z1", "syncMode": "Push"}});
        let out = admit(("cluster.karmada.io", "Cluster"), c).unwrap();
        assert_eq!(out["spec"], json!({"syncMode": "Push", "zones": ["z1"]}));
    }

    fn profile(spec: Value) -> Value {
        json!({"apiVersion": "flotilla.dev/v1alpha1", "kind": "SchedulerProfile", "metadata": {"name": "gpu", "uid": "u"}, "spec": spec})
    }

    const SP: (&str, &str) = ("flotilla.dev", "SchedulerProfile");

    #[test]
    fn scheduler_profiles_check_names_cel_and_wasm_shape_without_loading() {
        let ok = profile(json!({
            "filters": [{"name": "ClusterAffinity"}, {"name": "big", "cel": {"expression": "clusterName != 'x'"}}],
            "scores": [{"name": "gpu", "weight": 2, "wasm": {"plugin": "gpu-scorer"}}, {"name": "local", "wasm": {"path": "/nonexistent/x.wasm"}}],
        }));
        assert!(admit(SP, ok).is_ok());
        let e = admit(
            SP,
            profile(json!({"scores": [{"name": "ClusterLocality"}, {"name": "NoSuchPlugin"}]})),
        )
        .unwrap_err();
        assert_eq!(fields(&e), ["spec.scores[1].name"], "{e}");
        // {add: [...]} extends the built-ins; its entries are checked alike and named so.
        let added = profile(
            json!({"scores": {"add": [{"name": "gpu", "wasm": {"plugin": "gpu-scorer"}}]}}),
        );
        assert!(admit(SP, added).is_ok());
        let e = admit(
            SP,
            profile(json!({"scores": {"add": [{"name": "NoSuchPlugin"}]}})),
        )
        .unwrap_err();
        assert_eq!(fields(&e), ["spec.scores.add[0].name"], "{e}");
        let e = admit(
            SP,
            profile(json!({"filters": [{"name": "f", "cel": {"expression": "clusterName =="}}]})),
        )
        .unwrap_err();
        assert_eq!(fields(&e), ["spec.filters[0].cel"], "{e}");
        assert!(e.causes[0].message.contains("column"), "{e}");
        let e = admit(
            SP,
            profile(json!({"scores": [{"name": "w", "wasm": {"path": "a.wasm", "plugin": "b"}}]})),
        )
        .unwrap_err();
        assert_eq!(fields(&e), ["spec.scores[0].wasm"], "{e}");
        let e = admit(
            SP,
            profile(json!({"scores": [{"name": "w", "wasm": {"plugin": "b", "sha256": "abc"}}]})),
        )
        .unwrap_err();
        assert_eq!(fields(&e), ["spec.scores[0].wasm.sha256"], "{e}");
        let e = admit(
            SP,
            profile(json!({"scores": [{"name": "w", "weight": "x"}]})),
        )
        .unwrap_err();
        assert_eq!(fields(&e), ["spec.scores[0].weight"], "{e}");
    }

    fn wasm(spec: Value) -> Result<Value, AdmissionError> {
        admit(
            ("flotilla.dev", "WasmPlugin"),
            json!({"apiVersion": "flotilla.dev/v1alpha1", "kind": "WasmPlugin", "metadata": {"name": "w"}, "spec": spec}),
        )
    }

    #[test]
    fn wasm_plugin_images_are_one_source_with_a_valid_reference() {
        assert!(wasm(json!({"module": {"image": "registry.example/org/gpu:1.0"}})).is_ok());
        assert!(
            wasm(json!({"module": {"image": "127.0.0.1:5000/gpu@sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "imagePullSecret": "regcred", "insecure": true}}))
                .is_ok()
        );
        let e = wasm(json!({"module": {"image": "r.example/x:1", "base64": "AGFzbQEAAAA="}}))
            .unwrap_err();
        assert_eq!(fields(&e), ["spec.module"]);
        assert!(e.causes[0].message.contains("not base64 and image"), "{e}");
        for bad in ["Upper/Case", "r.example/x:1 ", "r.example/x@sha256:00"] {
            assert_eq!(
                fields(&wasm(json!({"module": {"image": bad}})).unwrap_err()),
                ["spec.module.image"],
                "{bad}"
            );
        }
        assert_eq!(
            fields(
                &wasm(json!({"module": {"base64": "AGFzbQEAAAA=", "imagePullSecret": "s", "insecure": false}}))
                    .unwrap_err()
            ),
            ["spec.module.imagePullSecret", "spec.module.insecure"]
        );
        assert_eq!(
            fields(
                &wasm(
                    json!({"module": {"image": "r.example/x:1", "imagePullSecret": "Not_A_Name"}})
                )
                .unwrap_err()
            ),
            ["spec.module.imagePullSecret"]
        );
        assert_eq!(
            fields(
                &wasm(json!({"module": {"image": "r.example/x:1", "format": "wat"}})).unwrap_err()
            ),
            ["spec.module.format"]
        );
    }

    #[test]
    fn wasm_plugins_need_one_decodable_module_and_a_well_formed_digest() {
        let digest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
        assert!(wasm(json!({"module": {"base64": "AGFzbQEAAAA="}, "sha256": digest, "failurePolicy": "Ignore"})).is_ok());
        assert!(
            wasm(
                json!({"module": {"path": "gpu/scorer.wasm"}, "sha256": format!("sha256:{digest}")})
            )
            .is_ok()
        );
        assert_eq!(
            fields(&wasm(json!({"module": {}})).unwrap_err()),
            ["spec.module"]
        );
        assert_eq!(
            fields(&wasm(json!({"module": {"path": "a", "base64": "AGFzbQEAAAA="}})).unwrap_err()),
            ["spec.module"]
        );
        assert_eq!(
            fields(&wasm(json!({"module": {"base64": "not base64!"}})).unwrap_err()),
            ["spec.module.base64"]
        );
        // WAT text ("(module)") only when declared; other bytes are not a Wasm module.
        assert_eq!(
            fields(&wasm(json!({"module": {"base64": "KG1vZHVsZSk="}})).unwrap_err()),
            ["spec.module.base64"]
        );
        assert!(wasm(json!({"module": {"base64": "KG1vZHVsZSk=", "format": "wat"}})).is_ok());
        assert!(
            wasm(json!({"module": {"base64": "AGFzbQEAAAA=", "format": "binary"}})).is_err(),
            "an unknown format"
        );
        assert_eq!(
            fields(&wasm(json!({"module": {"path": "a"}, "sha256": "sha256:xyz"})).unwrap_err()),
            ["spec.sha256"]
        );
        assert_eq!(
            fields(
                &wasm(json!({"module": {"path": "a"}, "failurePolicy": "Sometimes"})).unwrap_err()
            ),
            ["spec.failurePolicy"]
        );
        let e = wasm(json!({"module": {"path": "a"}, "extra": 1})).unwrap_err();
        assert!(
            e.causes[0].field.starts_with("spec")
                && e.causes[0].message.contains("unknown field `extra`"),
            "{e}"
        );
    }

    #[test]
    fn wasm_plugin_paths_outside_the_module_directory_are_refused() {
        for path in ["/etc/shadow", "../../etc/shadow", "plugins/../../x.wasm"] {
            let e = wasm(json!({"module": {"path": path}})).unwrap_err();
            assert_eq!(fields(&e), ["spec.module.path"], "{path}: {e}");
        }
    }

    #[test]
    fn limits_above_their_maximum_are_refused_with_the_field_named() {
        let e = wasm(json!({
            "module": {"base64": "AGFzbQEAAAA="},
            "limits": {"timeoutMs": u64::MAX, "memoryMib": 0, "maxOutputBytes": 1u64 << 40},
        }))
        .unwrap_err();
        assert_eq!(
            e.causes
                .iter()
                .map(|c| format!("{}: {}", c.field, c.message))
                .collect::<Vec<_>>(),
            [
                "spec.limits.timeoutMs: must be at most 10000",
                "spec.limits.memoryMib: must be at least 1",
                "spec.limits.maxOutputBytes: must be at most 16777216",
            ]
        );
        assert!(
            wasm(json!({"module": {"base64": "AGFzbQEAAAA="}, "limits": {"timeoutMs": 10000}}))
                .is_ok()
        );
        let e = admit(
            SP,
            profile(json!({"filters": [{"name": "w", "wasm": {"plugin": "p"}, "limits": {"timeoutMs": 1u64 << 60}}]})),
        )
        .unwrap_err();
        assert_eq!(fields(&e), ["spec.filters[0].limits.timeoutMs"], "{e}");
    }

    #[test]
    fn customizations_must_compile_and_errors_name_the_rule() {
        let ric = |rules: Value| {
            json!({"apiVersion": "config.karmada.io/v1alpha1", "kind": "ResourceInterpreterCustomization",
                   "metadata": {"name": "widgets"},
                   "spec": {"target": {"apiVersion": "example.dev/v1", "kind": "Widget"}, "customizations": rules}})
        };
        let kind = ("config.karmada.io", "ResourceInterpreterCustomization");
        admit(
            kind,
            ric(json!({"replicaResource": {"cel": {"replicas": "object.spec.replicas"}}})),
        )
        .expect("a valid CEL rule");
        let e = admit(
            kind,
            ric(json!({"healthInterpretation": {"cel": {"healthy": "observedObject.status.("}}})),
        )
        .expect_err("a CEL syntax error");
        assert_eq!(fields(&e), ["spec.customizations.healthInterpretation"]);
        let e = admit(kind, ric(json!({"retention": {}}))).expect_err("no program");
        assert_eq!(fields(&e), ["spec.customizations.retention"]);
    }

    #[test]
    fn other_kinds_pass_unchanged() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "b"}});
        assert_eq!(admit(("", "ConfigMap"), cm.clone()).unwrap(), cm);
    }
}
