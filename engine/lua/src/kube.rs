//! The `kube` module Karmada preloads (`luavm/kube.go`): `resourceAdd`, `getResourceQuantity`,
//! `accuratePodRequirements`, `getPodDependencies`, with the same results and quantity formatting
//! as Karmada's Go helpers.

use std::collections::BTreeMap;

use mlua::{Lua, MultiValue, Table, Value as LuaValue};
use serde_json::{Map, Value, json};

use crate::convert::{EmptyFields, Encoder, to_lua};
use crate::quantity::{Format, Quantity};

/// Bytes a pod template handed to the module may encode to.
const MAX_POD_TEMPLATE_BYTES: usize = 4 << 20;

/// The module table (`require("kube")`).
pub(crate) fn module(lua: &Lua) -> mlua::Result<Table> {
    let m = lua.create_table()?;
    m.set("resourceAdd", lua.create_function(resource_add)?)?;
    m.set(
        "getResourceQuantity",
        lua.create_function(get_resource_quantity)?,
    )?;
    m.set(
        "accuratePodRequirements",
        lua.create_function(accurate_pod_requirements)?,
    )?;
    m.set(
        "getPodDependencies",
        lua.create_function(get_pod_dependencies)?,
    )?;
    Ok(m)
}

fn bad_arg(n: usize, f: &str, want: &str, got: &LuaValue) -> mlua::Error {
    mlua::Error::runtime(format!(
        "bad argument #{n} to {f} ({want} expected, got {})",
        got.type_name()
    ))
}

/// `checkResourceQuantity`: nil is zero, a string is parsed (`resource.MustParse`), anything
/// else is a type error.
fn quantity_arg(v: &LuaValue, n: usize, f: &str) -> mlua::Result<Quantity> {
    match v {
        LuaValue::Nil => Ok(Quantity::ZERO),
        LuaValue::String(s) => {
            let text = s.to_str()?.to_owned();
            Quantity::parse(&text).map_err(|e| {
                let shown: String = text.chars().take(64).collect();
                mlua::Error::runtime(format!("cannot parse '{shown}': {e}"))
            })
        }
        other => Err(bad_arg(n, f, "string", other)),
    }
}

fn resource_add(_: &Lua, args: MultiValue) -> mlua::Result<String> {
    let mut sum = Quantity::ZERO;
    for (i, v) in args.iter().enumerate() {
        sum.add(quantity_arg(v, i + 1, "resourceAdd")?)
            .map_err(mlua::Error::runtime)?;
    }
    Ok(sum.canonical())
}

fn get_resource_quantity(_: &Lua, args: MultiValue) -> mlua::Result<f64> {
    if args.len() != 1 {
        return Err(mlua::Error::runtime(
            "getResourceQuantity only accepts one argument",
        ));
    }
    let q = quantity_arg(&args[0], 1, "getResourceQuantity")?;
    let num = q.approximate_f64();
    if num < 0.0 {
        return Err(mlua::Error::runtime(
            "int approximation unexpectedly returned a negative value",
        ));
    }
    if num.is_infinite() {
        return Err(mlua::Error::runtime(
            "int approximation unexpectedly returned an infinite value",
        ));
    }
    Ok(num)
}

/// A table argument as the `corev1.PodTemplateSpec` JSON Karmada decodes it into.
fn pod_template(v: &LuaValue, n: usize, f: &str) -> mlua::Result<Value> {
    let LuaValue::Table(_) = v else {
        return Err(bad_arg(n, f, "table", v));
    };
    let encoded = Encoder::new(MAX_POD_TEMPLATE_BYTES)
        .encode(v)
        .map_err(|e| {
            mlua::Error::runtime(format!("fail to convert lua value to PodTemplateSpec: {e}"))
        })?;
    let t = EmptyFields::of(&[]).fix(encoded, true);
    if !t.is_object() {
        return Err(mlua::Error::runtime(
            "fail to convert lua value to PodTemplateSpec: json: cannot unmarshal array into Go value of type v1.PodTemplateSpec",
        ));
    }
    Ok(t)
}

fn accurate_pod_requirements(lua: &Lua, args: MultiValue) -> mlua::Result<LuaValue> {
    if args.len() != 1 {
        return Err(mlua::Error::runtime(
            "getPodRequirements only accepts one argument",
        ));
    }
    let template = pod_template(&args[0], 1, "accuratePodRequirements")?;
    let spec = template.get("spec").cloned().unwrap_or(Value::Null);
    match replica_requirements(&spec).map_err(mlua::Error::runtime)? {
        Some(r) => to_lua(lua, &r).map_err(mlua::Error::runtime),
        None => Ok(LuaValue::Nil),
    }
}

fn get_pod_dependencies(lua: &Lua, args: MultiValue) -> mlua::Result<LuaValue> {
    if args.len() != 2 {
        return Err(mlua::Error::runtime(
            "getPodDependencies only accepts two argument",
        ));
    }
    let template = pod_template(&args[0], 1, "getPodDependencies")?;
    let namespace = match &args[1] {
        LuaValue::Nil => "default".to_owned(),
        LuaValue::String(s) => s.to_str()?.to_owned(),
        LuaValue::Number(n) => crate::sandbox::go_number_string(*n),
        LuaValue::Integer(i) => i.to_string(),
        other => return Err(bad_arg(2, "getPodDependencies", "string", other)),
    };
    let spec = template.get("spec").cloned().unwrap_or(Value::Null);
    let deps = pod_dependencies(&spec, &namespace);
    if deps.is_empty() {
        // A nil Go slice marshals to null, which Lua sees as nil.
        return Ok(LuaValue::Nil);
    }
    to_lua(lua, &Value::Array(deps)).map_err(mlua::Error::runtime)
}

/// Is `name` a scalar resource (`lifted.IsScalarResourceName`): extended (`example.com/gpu`),
/// hugepages, attachable volumes or prefixed native resources.
fn is_scalar(name: &str) -> bool {
    name.starts_with("hugepages-")
        || name.starts_with("attachable-volumes-")
        || name.contains("kubernetes.io/")
        || (name.contains('/') && !name.starts_with("requests.") && qualified(name))
}

/// A qualified name (`prefix/name`), as `IsQualifiedName` checks it, loosely.
fn qualified(name: &str) -> bool {
    let Some((prefix, n)) = name.split_once('/') else {
        return false;
    };
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    !prefix.is_empty()
        && prefix.len() <= 253
        && !n.is_empty()
        && n.len() <= 63
        && n.chars().all(ok_char)
        && n.starts_with(|c: char| c.is_ascii_alphanumeric())
        && n.ends_with(|c: char| c.is_ascii_alphanumeric())
        && prefix
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
}

/// `util.Resource`: milli-CPU and whole units of everything else.
#[derive(Default)]
struct Resource(BTreeMap<String, i128>);

impl Resource {
    fn amount(name: &str, q: &Quantity) -> Option<i128> {
        match name {
            "cpu" => Some(q.milli_value()),
            "memory" | "pods" | "ephemeral-storage" => Some(q.value()),
            n if is_scalar(n) => Some(q.value()),
            _ => None,
        }
    }

    fn add(&mut self, list: &BTreeMap<String, Quantity>) {
        for (k, q) in list {
            if let Some(v) = Resource::amount(k, q) {
                let e = self.0.entry(k.clone()).or_default();
                *e = e.saturating_add(v);
            }
        }
    }

    fn set_max(&mut self, list: &BTreeMap<String, Quantity>) {
        for (k, q) in list {
            if let Some(v) = Resource::amount(k, q) {
                let e = self.0.entry(k.clone()).or_default();
                *e = (*e).max(v);
            }
        }
    }

    /// `Resource.ResourceList()`: positive amounts, CPU as milli DecimalSI, memory, ephemeral
    /// storage and hugepages as BinarySI, the rest DecimalSI.
    fn list(&self) -> Map<String, Value> {
        let mut out = Map::new();
        for (k, v) in &self.0 {
            if *v <= 0 {
                continue;
            }
            let q = match k.as_str() {
                "cpu" => Quantity::from_milli(*v, Format::DecimalSi),
                "memory" | "ephemeral-storage" => Quantity::from_value(*v, Format::BinarySi),
                n if n.starts_with("hugepages-") => Quantity::from_value(*v, Format::BinarySi),
                _ => Quantity::from_value(*v, Format::DecimalSi),
            };
            out.insert(k.clone(), Value::String(q.canonical()));
        }
        out
    }
}

/// A `ResourceList` field: names to quantities (strings or numbers, as `Quantity` unmarshals).
fn resource_list(v: Option<&Value>) -> Result<BTreeMap<String, Quantity>, String> {
    let mut out = BTreeMap::new();
    let Some(v) = v else { return Ok(out) };
    let Value::Object(m) = v else {
        return Err("resources: expected a map of quantities".into());
    };
    for (k, q) in m {
        let text = match q {
            Value::String(s) => s.trim().to_owned(),
            Value::Number(n) => n.to_string(),
            Value::Null => continue,
            _ => return Err(format!("resources.{k}: expected a quantity")),
        };
        let q = Quantity::parse(&text).map_err(|e| format!("resources.{k}: {e}"))?;
        out.insert(k.clone(), q);
    }
    Ok(out)
}

fn array<'a>(v: &'a Value, key: &str) -> Result<&'a [Value], String> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(a)) => Ok(a),
        Some(_) => Err(format!("spec.{key}: expected an array")),
    }
}

/// Requests of a container, limits standing in for missing requests.
fn effective_requests(c: &Value) -> Result<BTreeMap<String, Quantity>, String> {
    let res = c.get("resources");
    let mut requests = resource_list(res.and_then(|r| r.get("requests")))?;
    for (k, q) in resource_list(res.and_then(|r| r.get("limits")))? {
        requests.entry(k).or_insert(q);
    }
    Ok(requests)
}

/// `helper.GenerateReplicaRequirements` for a pod spec (the `ResourceQuotaEstimate` gate off, as
/// by default: no `priorityClassName`).
pub(crate) fn replica_requirements(spec: &Value) -> Result<Option<Value>, String> {
    let mut claim = Map::new();
    if let Some(ns) = spec.get("nodeSelector").filter(|v| !v.is_null()) {
        claim.insert("nodeSelector".into(), ns.clone());
    }
    if let Some(a) = spec
        .pointer("/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution")
        .filter(|v| !v.is_null())
    {
        claim.insert("hardNodeAffinity".into(), a.clone());
    }
    let tolerations = array(spec, "tolerations")?;
    if !tolerations.is_empty() {
        claim.insert("tolerations".into(), Value::Array(tolerations.to_vec()));
    }
    let mut total = Resource::default();
    for c in array(spec, "containers")? {
        total.add(&effective_requests(c)?);
    }
    for c in array(spec, "initContainers")? {
        total.set_max(&effective_requests(c)?);
    }
    total.add(&resource_list(
        spec.get("overhead").filter(|v| !v.is_null()),
    )?);
    let request = total.list();
    if claim.is_empty() && request.is_empty() {
        return Ok(None);
    }
    let mut r = Map::new();
    if !claim.is_empty() {
        r.insert("nodeClaim".into(), Value::Object(claim));
    }
    if !request.is_empty() {
        r.insert("resourceRequest".into(), Value::Object(request));
    }
    Ok(Some(Value::Object(r)))
}

fn name_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// `helper.GetDependenciesFromPodTemplate`: ConfigMaps, Secrets, the ServiceAccount (unless
/// `default`) and PVCs a pod spec references, each kind's names sorted.
pub(crate) fn pod_dependencies(spec: &Value, namespace: &str) -> Vec<Value> {
    let mut config_maps = std::collections::BTreeSet::new();
    let mut secrets = std::collections::BTreeSet::new();
    let mut pvcs = std::collections::BTreeSet::new();
    for s in spec
        .get("imagePullSecrets")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        secrets.extend(name_at(s, "/name"));
    }
    for key in ["initContainers", "containers", "ephemeralContainers"] {
        for c in spec
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            for e in c
                .get("envFrom")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                config_maps.extend(name_at(e, "/configMapRef/name"));
                secrets.extend(name_at(e, "/secretRef/name"));
            }
            for e in c.get("env").and_then(Value::as_array).into_iter().flatten() {
                config_maps.extend(name_at(e, "/valueFrom/configMapKeyRef/name"));
                secrets.extend(name_at(e, "/valueFrom/secretKeyRef/name"));
            }
        }
    }
    for v in spec
        .get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let has = |k: &str| v.get(k).is_some_and(|x| !x.is_null());
        // The first source present decides, in Kubernetes' order.
        if has("azureFile") {
            secrets.extend(name_at(v, "/azureFile/secretName"));
        } else if has("cephfs") {
            secrets.extend(name_at(v, "/cephfs/secretRef/name"));
        } else if has("cinder") {
            secrets.extend(name_at(v, "/cinder/secretRef/name"));
        } else if has("flexVolume") {
            secrets.extend(name_at(v, "/flexVolume/secretRef/name"));
        } else if has("projected") {
            for s in v
                .pointer("/projected/sources")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                secrets.extend(name_at(s, "/secret/name"));
                config_maps.extend(name_at(s, "/configMap/name"));
            }
        } else if has("rbd") {
            secrets.extend(name_at(v, "/rbd/secretRef/name"));
        } else if has("secret") {
            secrets.extend(name_at(v, "/secret/secretName"));
        } else if has("scaleIO") {
            secrets.extend(name_at(v, "/scaleIO/secretRef/name"));
        } else if has("iscsi") {
            secrets.extend(name_at(v, "/iscsi/secretRef/name"));
        } else if has("storageos") {
            secrets.extend(name_at(v, "/storageos/secretRef/name"));
        } else if has("csi") {
            secrets.extend(name_at(v, "/csi/nodePublishSecretRef/name"));
        }
        if has("configMap") && !has("projected") {
            config_maps.extend(name_at(v, "/configMap/name"));
        }
        pvcs.extend(name_at(v, "/persistentVolumeClaim/claimName"));
    }
    let sa = name_at(spec, "/serviceAccountName").filter(|s| *s != "default");
    let mut out = Vec::new();
    let mut push = |kind: &str, name: &str| {
        let mut d = json!({"apiVersion": "v1", "kind": kind, "name": name});
        if !namespace.is_empty() {
            d["namespace"] = json!(namespace);
        }
        out.push(d);
    };
    config_maps.iter().for_each(|n| push("ConfigMap", n));
    secrets.iter().for_each(|n| push("Secret", n));
    sa.into_iter().for_each(|n| push("ServiceAccount", n));
    pvcs.iter().for_each(|n| push("PersistentVolumeClaim", n));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requirements_sum_containers_max_init_containers_and_add_overhead() {
        let spec = json!({
            "nodeSelector": {"zone": "a"},
            "containers": [
                {"resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}},
                {"resources": {"limits": {"cpu": "1", "memory": "512Mi", "example.com/gpu": 1}}}
            ],
            "initContainers": [{"resources": {"requests": {"cpu": "2", "memory": "10Mi"}}}],
            "overhead": {"cpu": "100m"}
        });
        assert_eq!(
            replica_requirements(&spec).unwrap().unwrap(),
            json!({"nodeClaim": {"nodeSelector": {"zone": "a"}},
                   "resourceRequest": {"cpu": "2100m", "memory": "1536Mi", "example.com/gpu": "1"}})
        );
        assert_eq!(
            replica_requirements(&json!({"containers": [{}]})).unwrap(),
            None
        );
        assert!(replica_requirements(&json!({"containers": {}})).is_err());
    }

    #[test]
    fn dependencies_cover_every_reference_kind() {
        let spec = json!({
            "serviceAccountName": "robot",
            "imagePullSecrets": [{"name": "pull"}],
            "containers": [{"envFrom": [{"configMapRef": {"name": "cm1"}}],
                            "env": [{"valueFrom": {"secretKeyRef": {"name": "s1"}}}]}],
            "volumes": [{"configMap": {"name": "cm2"}},
                        {"persistentVolumeClaim": {"claimName": "data"}},
                        {"projected": {"sources": [{"secret": {"name": "s2"}}]}}]
        });
        let names: Vec<String> = pod_dependencies(&spec, "ns")
            .iter()
            .map(|d| {
                format!(
                    "{}/{}",
                    d["kind"].as_str().unwrap(),
                    d["name"].as_str().unwrap()
                )
            })
            .collect();
        assert_eq!(
            names,
            [
                "ConfigMap/cm1",
                "ConfigMap/cm2",
                "Secret/pull",
                "Secret/s1",
                "Secret/s2",
                "ServiceAccount/robot",
                "PersistentVolumeClaim/data"
            ]
        );
        assert!(pod_dependencies(&json!({"serviceAccountName": "default"}), "x").is_empty());
    }
}
