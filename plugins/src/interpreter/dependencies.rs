//! InterpretDependency (Karmada `native/dependencies.go`): the ConfigMaps, Secrets,
//! ServiceAccounts and PersistentVolumeClaims a pod template refers to, an Ingress's TLS Secrets,
//! a ServiceImport's derived Service and EndpointSlices.

use std::collections::{BTreeMap, BTreeSet};

use flotilla_api::interpreter::DependentObjectReference;
use flotilla_api::meta::LabelSelector;
use flotilla_core::error::PluginError;
use serde_json::Value;

use super::{array_at, fail, gvk, str_at};

/// The prefix of the Service Karmada derives for an imported service.
const DERIVED_SERVICE_PREFIX: &str = "derived";

pub(super) fn get_dependencies(o: &Value) -> Result<Vec<DependentObjectReference>, PluginError> {
    let namespace = str_at(o, "/metadata/namespace");
    match gvk(o) {
        ("apps/v1", "Deployment" | "ReplicaSet" | "DaemonSet") | ("batch/v1", "Job") => {
            Ok(from_pod_spec(spec_at(o, "/spec/template/spec"), namespace))
        }
        ("batch/v1", "CronJob") => Ok(from_pod_spec(
            spec_at(o, "/spec/jobTemplate/spec/template/spec"),
            namespace,
        )),
        ("v1", "Pod") => Ok(from_pod_spec(spec_at(o, "/spec"), namespace)),
        ("apps/v1", "StatefulSet") => {
            let deps = from_pod_spec(spec_at(o, "/spec/template/spec"), namespace);
            // PVCs of the volume claim templates are the StatefulSet's own, made in the member.
            let templates: BTreeSet<&str> = array_at(o, "/spec/volumeClaimTemplates")
                .iter()
                .map(|t| str_at(t, "/metadata/name"))
                .collect();
            Ok(deps
                .into_iter()
                .filter(|d| {
                    d.kind != "PersistentVolumeClaim" || !templates.contains(d.name.as_str())
                })
                .collect())
        }
        ("networking.k8s.io/v1", "Ingress") => Ok(array_at(o, "/spec/tls")
            .iter()
            .map(|tls| reference("Secret", namespace, str_at(tls, "/secretName")))
            .collect()),
        ("multicluster.x-k8s.io/v1alpha1", "ServiceImport") => {
            let derived = format!("{DERIVED_SERVICE_PREFIX}-{}", str_at(o, "/metadata/name"));
            Ok(vec![
                reference("Service", namespace, &derived),
                DependentObjectReference {
                    api_version: "discovery.k8s.io/v1".into(),
                    kind: "EndpointSlice".into(),
                    namespace: namespace.into(),
                    name: String::new(),
                    label_selector: Some(LabelSelector {
                        match_labels: BTreeMap::from([(
                            "kubernetes.io/service-name".to_owned(),
                            derived,
                        )]),
                        ..Default::default()
                    }),
                },
            ])
        }
        (api_version, kind) => Err(fail(format!(
            "InterpretDependency is not implemented for {api_version} {kind}"
        ))),
    }
}

/// Karmada's `VerifyDependencies`: apiVersion, kind, and a name or a label selector.
pub(super) fn verify(deps: &[DependentObjectReference]) -> Result<(), PluginError> {
    let mut errors = Vec::new();
    for (i, d) in deps.iter().enumerate() {
        if d.api_version.is_empty() {
            errors.push(format!(
                "dependencies[{i}].apiVersion: missing required apiVersion"
            ));
        }
        if d.kind.is_empty() {
            errors.push(format!("dependencies[{i}].kind: missing required kind"));
        }
        if d.name.is_empty() && d.label_selector.is_none() {
            errors.push(format!(
                "dependencies[{i}]: dependency can not leave name and labelSelector all empty"
            ));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(fail(errors.join(", ")))
    }
}

fn spec_at<'a>(o: &'a Value, p: &str) -> &'a Value {
    static NULL: Value = Value::Null;
    o.pointer(p).unwrap_or(&NULL)
}

fn reference(kind: &str, namespace: &str, name: &str) -> DependentObjectReference {
    DependentObjectReference {
        api_version: "v1".into(),
        kind: kind.into(),
        namespace: namespace.into(),
        name: name.into(),
        label_selector: None,
    }
}

/// Every container of a pod spec (init, regular, ephemeral).
fn containers(spec: &Value) -> impl Iterator<Item = &Value> {
    ["initContainers", "containers", "ephemeralContainers"]
        .into_iter()
        .flat_map(move |list| array_at(spec, &format!("/{list}")).iter())
}

/// The volume sources of a pod spec that name a Secret (kube's `VisitPodSecretNames`).
const SECRET_VOLUME_REFS: &[(&str, &str)] = &[
    ("azureFile", "/secretName"),
    ("cephfs", "/secretRef/name"),
    ("cinder", "/secretRef/name"),
    ("flexVolume", "/secretRef/name"),
    ("rbd", "/secretRef/name"),
    ("secret", "/secretName"),
    ("scaleIO", "/secretRef/name"),
    ("iscsi", "/secretRef/name"),
    ("storageos", "/secretRef/name"),
    ("csi", "/nodePublishSecretRef/name"),
];

/// The dependencies of a pod spec (Karmada's `GetDependenciesFromPodTemplate`): ConfigMaps,
/// Secrets, ServiceAccounts (other than `default`), PersistentVolumeClaims, each set sorted.
fn from_pod_spec(spec: &Value, namespace: &str) -> Vec<DependentObjectReference> {
    let mut config_maps = BTreeSet::new();
    let mut secrets = BTreeSet::new();
    for r in array_at(spec, "/imagePullSecrets") {
        secrets.insert(str_at(r, "/name"));
    }
    for c in containers(spec) {
        for e in array_at(c, "/envFrom") {
            if let Some(r) = e.get("secretRef") {
                secrets.insert(str_at(r, "/name"));
            }
            if let Some(r) = e.get("configMapRef") {
                config_maps.insert(str_at(r, "/name"));
            }
        }
        for e in array_at(c, "/env") {
            if let Some(r) = e.pointer("/valueFrom/secretKeyRef") {
                secrets.insert(str_at(r, "/name"));
            }
            if let Some(r) = e.pointer("/valueFrom/configMapKeyRef") {
                config_maps.insert(str_at(r, "/name"));
            }
        }
    }
    let mut claims = BTreeSet::new();
    for v in array_at(spec, "/volumes") {
        if let Some(p) = v.get("projected") {
            for s in array_at(p, "/sources") {
                if let Some(r) = s.get("secret") {
                    secrets.insert(str_at(r, "/name"));
                }
                if let Some(r) = s.get("configMap") {
                    config_maps.insert(str_at(r, "/name"));
                }
            }
        }
        if let Some(r) = v.get("configMap") {
            config_maps.insert(str_at(r, "/name"));
        }
        // A volume has one source: the first that names a Secret counts, as kube's switch.
        if let Some(name) = SECRET_VOLUME_REFS
            .iter()
            .find_map(|(source, p)| v.get(*source).map(|s| str_at(s, p)))
        {
            secrets.insert(name);
        }
        let claim = str_at(v, "/persistentVolumeClaim/claimName");
        if !claim.is_empty() {
            claims.insert(claim);
        }
    }
    let service_account = str_at(spec, "/serviceAccountName");
    let accounts: BTreeSet<&str> = [service_account]
        .into_iter()
        .filter(|s| !s.is_empty() && *s != "default")
        .collect();
    let mut out = Vec::new();
    for (kind, names) in [
        ("ConfigMap", config_maps),
        ("Secret", secrets),
        ("ServiceAccount", accounts),
        ("PersistentVolumeClaim", claims),
    ] {
        out.extend(
            names
                .into_iter()
                .filter(|n| !n.is_empty())
                .map(|n| reference(kind, namespace, n)),
        );
    }
    out
}
