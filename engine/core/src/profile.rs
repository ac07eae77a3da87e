//! Scheduler profiles as data: a `SchedulerProfile` document names the plugins per extension point,
//! each from a backend (built-in, Wasm, CEL), with config, failure policy, score weight and limits.
//! Backends turn a [`PluginSpec`] into a plugin through a [`PluginFactory`]; the core knows none of
//! them.
//!
//! ```yaml
//! apiVersion: flotilla.dev/v1alpha1
//! kind: SchedulerProfile
//! metadata: {name: gpu-aware}
//! spec:
//!   scores:                 # omitted lists keep the default profile's plugins
//!   - name: ClusterLocality  # a plain list REPLACES the built-ins of the point: name every one
//!   - name: gpu-score
//!     weight: 2
//!     wasm: {path: plugins/gpu.wasm}
//!     config: {label: example.com/gpu}
//!     failurePolicy: Ignore
//!   filters:
//!     add:                   # {add: [...]} EXTENDS them: the built-ins stay, these run after
//!     - name: gpu-only       # (assigners: before, so the added assigner is asked first)
//!       wasm: {path: plugins/gpu-only.wasm}
//! ```

use std::sync::Arc;

use flotilla_api::meta::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::framework::{
    AssignPlugin, FailurePolicy, FilterPlugin, OverridePlugin, Profile, ScorePlugin, SelectPlugin,
    Slot, VictimPlugin,
};

/// API version of [`ProfileDocument`].
pub const API_VERSION: &str = "flotilla.dev/v1alpha1";
/// Kind of [`ProfileDocument`].
pub const KIND: &str = "SchedulerProfile";

/// A `SchedulerProfile` document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProfileDocument {
    /// `flotilla.dev/v1alpha1`.
    pub api_version: String,
    /// `SchedulerProfile`.
    pub kind: String,
    /// `metadata.name` is the scheduler name bindings select with `spec.schedulerName`.
    pub metadata: ObjectMeta,
    /// The plugins.
    #[serde(default)]
    pub spec: ProfileSpec,
}

impl ProfileDocument {
    /// Every plugin spec of the document, mutably, in extension-point order, then the victim
    /// plugin of `spec.preemption`.
    pub fn plugins_mut(&mut self) -> impl Iterator<Item = &mut PluginSpec> {
        let ProfileSpec {
            filters,
            scores,
            selects,
            assigners,
            overriders,
            preemption,
        } = &mut self.spec;
        [filters, scores, selects, assigners, overriders]
            .into_iter()
            .flatten()
            .flat_map(|l| l.plugins_mut().iter_mut())
            .chain(preemption.as_mut().and_then(|p| p.plugin.as_mut()))
    }

    /// Resolve relative `wasm.path`s against `dir` (the profile file's directory); returns every
    /// module path the document names, resolved.
    pub fn resolve_wasm_paths(&mut self, dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        for spec in self.plugins_mut() {
            if let Some(w) = spec.wasm.as_mut().filter(|w| !w.path.is_empty()) {
                let p = std::path::PathBuf::from(&w.path);
                let p = if p.is_relative() { dir.join(p) } else { p };
                w.path = p.display().to_string();
                out.push(p);
            }
        }
        out
    }
}

impl ProfileSpec {
    /// The point's list as given (`None`: absent, the default profile's plugins apply).
    pub fn point(&self, point: ExtensionPoint) -> Option<&PointList> {
        match point {
            ExtensionPoint::Filter => self.filters.as_ref(),
            ExtensionPoint::Score => self.scores.as_ref(),
            ExtensionPoint::Select => self.selects.as_ref(),
            ExtensionPoint::Assign => self.assigners.as_ref(),
            ExtensionPoint::Override => self.overriders.as_ref(),
        }
    }

    /// The plugins given for `point`, whether they replace or extend the built-ins (`None`:
    /// absent, the default profile's plugins apply).
    pub fn list(&self, point: ExtensionPoint) -> Option<&Vec<PluginSpec>> {
        self.point(point).map(PointList::plugins)
    }

    /// The lists given, mutably, with their extension point, in extension-point order.
    pub fn lists_mut(&mut self) -> impl Iterator<Item = (ExtensionPoint, &mut Vec<PluginSpec>)> {
        [
            (ExtensionPoint::Filter, &mut self.filters),
            (ExtensionPoint::Score, &mut self.scores),
            (ExtensionPoint::Select, &mut self.selects),
            (ExtensionPoint::Assign, &mut self.assigners),
            (ExtensionPoint::Override, &mut self.overriders),
        ]
        .into_iter()
        .filter_map(|(p, l)| l.as_mut().map(|l| (p, l.plugins_mut())))
    }

    /// The field path of entry `index` of `point`: `spec.scores[0]` for a list that replaces the
    /// built-ins, `spec.scores.add[0]` for one that extends them.
    pub fn entry_path(&self, point: ExtensionPoint, index: usize) -> String {
        let add = self.point(point).is_some_and(PointList::extends);
        format!("spec.{point}{}[{index}]", if add { ".add" } else { "" })
    }
}

/// Plugins per extension point. A list that is absent keeps the default profile's plugins for that
/// point; a plain list replaces them (an empty list means none); `{add: [...]}` keeps them and adds
/// its plugins ([`PointList`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProfileSpec {
    /// Filter plugins, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filters: Option<PointList>,
    /// Score plugins (weights apply).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scores: Option<PointList>,
    /// Select plugins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selects: Option<PointList>,
    /// Assign plugins, asked in order until one does not skip.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assigners: Option<PointList>,
    /// Override plugins, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overriders: Option<PointList>,
    /// Binding preemption's victim rules: CEL evaluated by the profile's expression engine
    /// (`victimFilter` vetoes, `victimScore` ranks) or a Wasm plugin (`plugin`) that chooses
    /// ([`crate::preemption::VictimRules`]). Absent: the default profile's (none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemption: Option<crate::preemption::VictimRules>,
}

/// The plugins of one extension point, and whether they replace the default profile's.
///
/// Written as a plain list, they **replace** the built-ins of that point (name each built-in you
/// keep); written as `{add: [...]}`, they **extend** them: filters, scores, selects and overriders
/// run after the built-ins, assigners before them (so an added assigner is asked first and the
/// built-ins handle what it skips).
#[derive(Debug, Clone, PartialEq)]
pub enum PointList {
    /// A plain list: these plugins only.
    Replace(Vec<PluginSpec>),
    /// `{add: [...]}`: the default profile's plugins plus these.
    Extend(Vec<PluginSpec>),
}

impl Default for PointList {
    fn default() -> Self {
        PointList::Replace(Vec::new())
    }
}

impl From<Vec<PluginSpec>> for PointList {
    fn from(v: Vec<PluginSpec>) -> Self {
        PointList::Replace(v)
    }
}

impl PointList {
    /// The plugins listed.
    pub fn plugins(&self) -> &Vec<PluginSpec> {
        match self {
            PointList::Replace(v) | PointList::Extend(v) => v,
        }
    }

    /// The plugins listed, mutably.
    pub fn plugins_mut(&mut self) -> &mut Vec<PluginSpec> {
        match self {
            PointList::Replace(v) | PointList::Extend(v) => v,
        }
    }

    /// Whether the built-ins stay (`{add: [...]}`).
    pub fn extends(&self) -> bool {
        matches!(self, PointList::Extend(_))
    }
}

/// `{add: [...]}`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct AddList {
    add: Vec<PluginSpec>,
}

impl Serialize for PointList {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            PointList::Replace(v) => v.serialize(s),
            PointList::Extend(v) => AddList { add: v.clone() }.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for PointList {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = PointList;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(
                    "a list of plugins (replaces the built-ins) or {add: [...]} (extends them)",
                )
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                seq: A,
            ) -> Result<PointList, A::Error> {
                Vec::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))
                    .map(PointList::Replace)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<PointList, A::Error> {
                AddList::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(|a| PointList::Extend(a.add))
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// One plugin in a profile.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginSpec {
    /// Plugin name (a built-in's Karmada name, or any name for Wasm/CEL plugins).
    pub name: String,
    /// Score weight (scores only), default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i64>,
    /// What a plugin fault does: `Fail` (default) or `Ignore`.
    #[serde(default)]
    pub failure_policy: FailurePolicy,
    /// A Wasm module source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wasm: Option<WasmSource>,
    /// CEL expressions (shape defined by the CEL backend).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cel: Option<Value>,
    /// Plugin configuration, passed to the plugin as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
    /// Per-call limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<PluginLimits>,
}

/// Where a Wasm module comes from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WasmSource {
    /// Path of the `.wasm` (or `.wat`) file; relative paths resolve against the profile file's
    /// directory. Exactly one of `path` and `plugin` is set.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path: String,
    /// Name of a `WasmPlugin` object holding the module (control plane only: the controllers
    /// resolve it to the object's module, config, failure policy and limits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
    /// Expected sha256 of the module (hex); checked at load when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// Per-call resource limits of a sandboxed plugin.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginLimits {
    /// Wall-clock budget per call, milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Linear memory cap, MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mib: Option<u64>,
    /// Largest reply accepted, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_bytes: Option<u64>,
}

impl PluginLimits {
    /// Largest `timeoutMs`: ten seconds per call (setup work gets ten times a call's budget).
    pub const MAX_TIMEOUT_MS: u64 = 10_000;
    /// Largest `memoryMib`: the host's per-instance ceiling, 1 GiB.
    pub const MAX_MEMORY_MIB: u64 = 1024;
    /// Largest `maxOutputBytes`: 16 MiB.
    pub const MAX_OUTPUT_BYTES: u64 = 16 << 20;

    /// Check every limit against its documented range (each at least 1, at most its `MAX_*`).
    /// `at` is the path of the `limits` field (`spec.limits`, `spec.filters[0].limits`); each
    /// error names the offending field under it. Offline profiles, profile entries and
    /// `WasmPlugin` objects all go through here, so they are refused alike.
    pub fn validate(&self, at: &str) -> Vec<crate::validate::FieldError> {
        let mut out = Vec::new();
        for (name, value, max) in [
            ("timeoutMs", self.timeout_ms, Self::MAX_TIMEOUT_MS),
            ("memoryMib", self.memory_mib, Self::MAX_MEMORY_MIB),
            (
                "maxOutputBytes",
                self.max_output_bytes,
                Self::MAX_OUTPUT_BYTES,
            ),
        ] {
            let message = match value {
                Some(0) => "must be at least 1".to_owned(),
                Some(v) if v > max => format!("must be at most {max}"),
                _ => continue,
            };
            out.push(crate::validate::FieldError {
                field: format!("{at}.{name}"),
                message,
            });
        }
        out
    }
}

/// The extension points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExtensionPoint {
    /// Filter.
    Filter,
    /// Score.
    Score,
    /// Select.
    Select,
    /// Assign.
    Assign,
    /// Override.
    Override,
}

impl ExtensionPoint {
    /// Every extension point, in profile order: the one list the profile builder, admission and
    /// the backends go by.
    pub const ALL: [ExtensionPoint; 5] = [
        ExtensionPoint::Filter,
        ExtensionPoint::Score,
        ExtensionPoint::Select,
        ExtensionPoint::Assign,
        ExtensionPoint::Override,
    ];
}

impl std::fmt::Display for ExtensionPoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ExtensionPoint::Filter => "filters",
            ExtensionPoint::Score => "scores",
            ExtensionPoint::Select => "selects",
            ExtensionPoint::Assign => "assigners",
            ExtensionPoint::Override => "overriders",
        })
    }
}

/// A plugin built for one extension point.
#[derive(Clone)]
pub enum BuiltPlugin {
    /// A filter.
    Filter(Arc<dyn FilterPlugin>),
    /// A score plugin.
    Score(Arc<dyn ScorePlugin>),
    /// A select plugin.
    Select(Arc<dyn SelectPlugin>),
    /// An assign plugin.
    Assign(Arc<dyn AssignPlugin>),
    /// An override plugin.
    Override(Arc<dyn OverridePlugin>),
}

impl BuiltPlugin {
    /// The extension point the plugin was built for.
    pub fn point(&self) -> ExtensionPoint {
        match self {
            BuiltPlugin::Filter(_) => ExtensionPoint::Filter,
            BuiltPlugin::Score(_) => ExtensionPoint::Score,
            BuiltPlugin::Select(_) => ExtensionPoint::Select,
            BuiltPlugin::Assign(_) => ExtensionPoint::Assign,
            BuiltPlugin::Override(_) => ExtensionPoint::Override,
        }
    }

    /// `plugin` (implementing every extension point, as sandboxed backends do) built for `point`.
    pub fn for_point<P>(point: ExtensionPoint, plugin: Arc<P>) -> Self
    where
        P: FilterPlugin + ScorePlugin + SelectPlugin + AssignPlugin + OverridePlugin,
    {
        match point {
            ExtensionPoint::Filter => BuiltPlugin::Filter(plugin),
            ExtensionPoint::Score => BuiltPlugin::Score(plugin),
            ExtensionPoint::Select => BuiltPlugin::Select(plugin),
            ExtensionPoint::Assign => BuiltPlugin::Assign(plugin),
            ExtensionPoint::Override => BuiltPlugin::Override(plugin),
        }
    }
}

/// Where a profile entry's plugin comes from. An entry names one backend (`wasm:` or `cel:`, or
/// neither for a built-in); each backend is one [`PluginFactory`] in the [`Factories`] map.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Backend {
    /// The in-tree plugins, by Karmada name.
    Builtin,
    /// A WebAssembly module (`wasm:`).
    Wasm,
    /// CEL expressions (`cel:`).
    Cel,
}

impl Backend {
    /// The entry's field naming this backend (empty for built-ins).
    pub fn field(self) -> &'static str {
        match self {
            Backend::Builtin => "",
            Backend::Wasm => "wasm",
            Backend::Cel => "cel",
        }
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Backend::Builtin => "built-in",
            Backend::Wasm => "wasm",
            Backend::Cel => "cel",
        })
    }
}

impl PluginSpec {
    /// The backend this entry names.
    ///
    /// # Errors
    /// Both `wasm` and `cel` are set.
    pub fn backend(&self) -> Result<Backend, String> {
        match (&self.wasm, &self.cel) {
            (Some(_), Some(_)) => Err("set one of wasm and cel, not both".into()),
            (Some(_), None) => Ok(Backend::Wasm),
            (None, Some(_)) => Ok(Backend::Cel),
            (None, None) => Ok(Backend::Builtin),
        }
    }
}

/// Why a profile could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProfileError {
    /// No factory knows the plugin.
    #[error(
        "profile {profile}: spec.{point}{}[{index}]: unknown plugin {name:?} (not a built-in {point} plugin, and no wasm or cel source given)",
        add_segment(*.add)
    )]
    UnknownPlugin {
        /// Profile name.
        profile: String,
        /// Extension point.
        point: ExtensionPoint,
        /// The entry is in an `{add: [...]}` list.
        add: bool,
        /// Index in the list.
        index: usize,
        /// Plugin name.
        name: String,
    },
    /// A factory rejected the plugin (bad module, bad expression, bad config).
    #[error("profile {profile}: spec.{point}{}[{index}] ({name}): {message}", add_segment(*.add))]
    Invalid {
        /// Profile name.
        profile: String,
        /// Extension point.
        point: ExtensionPoint,
        /// The entry is in an `{add: [...]}` list.
        add: bool,
        /// Index in the list.
        index: usize,
        /// Plugin name.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// A factory built a plugin for another extension point than asked.
    #[error(
        "profile {profile}: spec.{point}{}[{index}] ({name}): plugin does not implement {point}",
        add_segment(*.add)
    )]
    WrongPoint {
        /// Profile name.
        profile: String,
        /// Extension point.
        point: ExtensionPoint,
        /// The entry is in an `{add: [...]}` list.
        add: bool,
        /// Index in the list.
        index: usize,
        /// Plugin name.
        name: String,
    },
    /// The document is not a SchedulerProfile.
    #[error("{0}")]
    Document(String),
}

fn add_segment(add: bool) -> &'static str {
    if add { ".add" } else { "" }
}

/// Turns a [`PluginSpec`] into a plugin. One per [`Backend`].
pub trait PluginFactory: Send + Sync {
    /// The backend whose entries this factory builds.
    fn backend(&self) -> Backend;

    /// Build the plugin for `point` from an entry of this factory's backend; `Ok(None)` when the
    /// backend has no plugin of that name (built-ins).
    ///
    /// # Errors
    /// The spec is invalid (message without the profile/field prefix).
    fn build(
        &self,
        point: ExtensionPoint,
        spec: &PluginSpec,
    ) -> Result<Option<BuiltPlugin>, String>;

    /// Build binding preemption's victim plugin (`spec.preemption.plugin`) from an entry of this
    /// factory's backend; `Ok(None)` when the backend has no such plugins (the default: only the
    /// Wasm backend has them; CEL rules are `victimFilter`/`victimScore`).
    ///
    /// # Errors
    /// The spec is invalid (message without the profile/field prefix).
    fn build_victims(&self, _spec: &PluginSpec) -> Result<Option<Arc<dyn VictimPlugin>>, String> {
        Ok(None)
    }
}

/// The plugin backends by [`Backend`]: the one map from a profile entry to the code that builds
/// it. A process registers the backends it links (the CLI: built-in, CEL, Wasm).
#[derive(Clone, Default)]
pub struct Factories {
    by_backend: std::collections::BTreeMap<Backend, Arc<dyn PluginFactory>>,
}

impl std::fmt::Debug for Factories {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.by_backend.keys()).finish()
    }
}

/// Why [`Factories::build`] built nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildError {
    /// The entry is invalid (both backends named, or the backend rejected it).
    Invalid(String),
    /// No plugin of that name (built-ins).
    Unknown,
    /// The entry names a backend this process does not have.
    NoBackend(Backend),
}

impl Factories {
    /// The map of `factories` (a later factory for the same backend replaces an earlier one).
    pub fn new(factories: impl IntoIterator<Item = Arc<dyn PluginFactory>>) -> Self {
        let mut by_backend = std::collections::BTreeMap::new();
        for f in factories {
            by_backend.insert(f.backend(), f);
        }
        Factories { by_backend }
    }

    /// The factory of `backend`.
    pub fn get(&self, backend: Backend) -> Option<&dyn PluginFactory> {
        self.by_backend.get(&backend).map(AsRef::as_ref)
    }

    /// Build `spec` for `point` with the factory of the backend it names.
    ///
    /// # Errors
    /// See [`BuildError`].
    pub fn build(
        &self,
        point: ExtensionPoint,
        spec: &PluginSpec,
    ) -> Result<BuiltPlugin, BuildError> {
        let backend = spec.backend().map_err(BuildError::Invalid)?;
        let factory = self.get(backend).ok_or(BuildError::NoBackend(backend))?;
        factory
            .build(point, spec)
            .map_err(BuildError::Invalid)?
            .ok_or(BuildError::Unknown)
    }
}

impl Factories {
    /// Build `spec` as binding preemption's victim plugin with the factory of the backend it
    /// names.
    ///
    /// # Errors
    /// See [`BuildError`]; `Unknown` when the backend has no victim plugins.
    pub fn build_victims(&self, spec: &PluginSpec) -> Result<Arc<dyn VictimPlugin>, BuildError> {
        let backend = spec.backend().map_err(BuildError::Invalid)?;
        let factory = self.get(backend).ok_or(BuildError::NoBackend(backend))?;
        factory
            .build_victims(spec)
            .map_err(BuildError::Invalid)?
            .ok_or(BuildError::Unknown)
    }
}

/// Build a [`Profile`] from a document: absent lists come from `base` (the default profile).
///
/// # Errors
/// The first plugin no factory builds, or a factory's rejection.
pub fn build_profile(
    doc: &ProfileDocument,
    base: &Profile,
    factories: &Factories,
) -> Result<Profile, ProfileError> {
    if doc.kind != KIND || doc.api_version != API_VERSION {
        return Err(ProfileError::Document(format!(
            "expected apiVersion {API_VERSION} kind {KIND}, got {} {}",
            doc.api_version, doc.kind
        )));
    }
    let profile = doc.metadata.name().to_owned();
    if profile.is_empty() {
        return Err(ProfileError::Document(
            "SchedulerProfile: metadata.name is required".into(),
        ));
    }
    let build = |point: ExtensionPoint,
                 index: usize,
                 spec: &PluginSpec|
     -> Result<BuiltPlugin, ProfileError> {
        let add = doc.spec.point(point).is_some_and(PointList::extends);
        let invalid = |message: String| ProfileError::Invalid {
            profile: profile.clone(),
            point,
            add,
            index,
            name: spec.name.clone(),
            message,
        };
        match factories.build(point, spec) {
            Ok(p) => Ok(p),
            Err(BuildError::Invalid(message)) => Err(invalid(message)),
            Err(BuildError::NoBackend(b)) => {
                Err(invalid(format!("this build has no {b} plugin backend")))
            }
            Err(BuildError::Unknown) => Err(ProfileError::UnknownPlugin {
                profile: profile.clone(),
                point,
                add,
                index,
                name: spec.name.clone(),
            }),
        }
    };
    let wrong = |point, index, spec: &PluginSpec| ProfileError::WrongPoint {
        profile: profile.clone(),
        point,
        add: doc.spec.point(point).is_some_and(PointList::extends),
        index,
        name: spec.name.clone(),
    };
    let mut out = base.clone();
    out.name = profile.clone();
    // A plain list replaces the base's plugins of the point; `{add: [...]}` keeps them and adds
    // its own after them (assigners: before them, so the added ones are asked first).
    macro_rules! point {
        ($list:ident, $field:ident, $point:expr, $variant:ident) => {
            if let Some(list) = &doc.spec.$list {
                let specs = list.plugins();
                let mut built = Vec::with_capacity(specs.len());
                for (i, s) in specs.iter().enumerate() {
                    match build($point, i, s)? {
                        BuiltPlugin::$variant(p) => built.push(
                            Slot::new(p)
                                .with_failure_policy(s.failure_policy)
                                .with_weight(s.weight.unwrap_or(1)),
                        ),
                        _ => return Err(wrong($point, i, s)),
                    }
                }
                if !list.extends() {
                    out.$field = built;
                } else if $point == ExtensionPoint::Assign {
                    built.append(&mut out.$field);
                    out.$field = built;
                } else {
                    out.$field.append(&mut built);
                }
            }
        };
    }
    point!(filters, filters, ExtensionPoint::Filter, Filter);
    point!(scores, scores, ExtensionPoint::Score, Score);
    point!(selects, selects, ExtensionPoint::Select, Select);
    point!(assigners, assigners, ExtensionPoint::Assign, Assign);
    point!(overriders, overriders, ExtensionPoint::Override, Override);
    if let Some(rules) = &doc.spec.preemption {
        rules
            .check(out.expressions.as_deref())
            .map_err(|m| ProfileError::Document(format!("SchedulerProfile {profile}: spec.{m}")))?;
        out.victims = None;
        if let Some(spec) = &rules.plugin {
            let at = format!(
                "SchedulerProfile {profile}: spec.preemption.plugin ({})",
                spec.name
            );
            let plugin = match factories.build_victims(spec) {
                Ok(p) => p,
                Err(BuildError::Invalid(m)) => {
                    return Err(ProfileError::Document(format!("{at}: {m}")));
                }
                Err(BuildError::NoBackend(b)) => {
                    return Err(ProfileError::Document(format!(
                        "{at}: this build has no {b} plugin backend"
                    )));
                }
                Err(BuildError::Unknown) => {
                    return Err(ProfileError::Document(format!(
                        "{at}: a victim plugin needs a wasm source (CEL victim rules are victimFilter and victimScore)"
                    )));
                }
            };
            out.victims = Some(Slot::new(plugin).with_failure_policy(spec.failure_policy));
        }
        out.preemption = rules.clone();
    }
    Ok(out)
}

/// Kind of a Wasm module kept on the control plane ([`WasmPluginSpec`]).
pub const WASM_PLUGIN_KIND: &str = "WasmPlugin";

/// `spec` of a `WasmPlugin` object (`flotilla.dev/v1alpha1`, cluster-scoped): a Wasm module on
/// the control plane that profile entries name with `wasm: {plugin: NAME}`. The object is the
/// source of truth for the module, its config, failure policy and limits; the entry sets the
/// plugin's name and score weight.
///
/// ```yaml
/// apiVersion: flotilla.dev/v1alpha1
/// kind: WasmPlugin
/// metadata: {name: gpu-scorer}
/// spec:
///   module: {base64: AGFzbQEAAAA...}   # or {path: gpu.wasm}, inside the controllers' --module-dir,
///                                      # or {image: registry.example/org/gpu:1.0}
///   sha256: 9f86d081884c7d65...                          # optional, checked at load
///   config: {label: example.com/gpu}
///   failurePolicy: Ignore
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WasmPluginSpec {
    /// Where the module's bytes come from.
    pub module: ModuleSource,
    /// Expected sha256 of the module (hex, optionally `sha256:`-prefixed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// The plugin's config (passed to its init).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
    /// Fault handling; when absent the profile entry's applies (default `Fail`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_policy: Option<FailurePolicy>,
    /// Per-call limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<PluginLimits>,
}

/// The bytes of a [`WasmPluginSpec`]: exactly one of `path`, `base64` and `image` is set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModuleSource {
    /// A file in the control plane's module directory (`--module-dir`), relative to it and
    /// resolved without leaving it; refused when the controllers run without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The module inline, base64 (standard alphabet): binary Wasm, or WAT text with `format: wat`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base64: Option<String>,
    /// What the bytes are: `wasm` (the default; anything without the `\0asm` header is refused
    /// as "not a Wasm module") or `wat` (WebAssembly text, compiled by the control plane).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<ModuleFormat>,
    /// An OCI artifact holding the module (`registry.example/org/plugin:tag` or
    /// `...@sha256:<hex>`), in the Wasm artifact layout: one layer of media type
    /// `application/wasm` (config `application/vnd.wasm.config.v0+json`, as wkg and oras push).
    /// A tag is resolved to a digest when the object changes; a digest never re-resolves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// With `image`: the name of a `kubernetes.io/dockerconfigjson` Secret in the controllers'
    /// namespace holding the registry's credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_secret: Option<String>,
    /// With `image`: talk plain HTTP to the registry (always done for loopback registries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insecure: Option<bool>,
}

impl ModuleSource {
    /// The names of the set source fields among `path`, `base64` and `image`.
    pub fn sources(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.path.is_some() {
            out.push("path");
        }
        if self.base64.is_some() {
            out.push("base64");
        }
        if self.image.is_some() {
            out.push("image");
        }
        out
    }
}

/// The encoding of a [`ModuleSource`]'s bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModuleFormat {
    /// The binary format (`\0asm`).
    #[default]
    Wasm,
    /// WebAssembly text.
    Wat,
}

impl WasmPluginSpec {
    /// Resolve `entry` (a profile entry naming this plugin with `wasm.plugin`) to a loadable spec:
    /// the module at `module_path` with digest `sha256`, this object's config, limits and failure
    /// policy.
    ///
    /// # Errors
    /// `entry` sets `config` or `limits` itself (they belong to the object).
    pub fn resolve(
        &self,
        entry: &PluginSpec,
        module_path: &str,
        sha256: &str,
    ) -> Result<PluginSpec, String> {
        let name = entry
            .wasm
            .as_ref()
            .and_then(|w| w.plugin.as_deref())
            .unwrap_or_default();
        if entry.config.is_some() && self.config.is_some() {
            return Err(format!(
                "config is set both here and in WasmPlugin {name:?}; set it in one place"
            ));
        }
        if entry.limits.is_some() && self.limits.is_some() {
            return Err(format!(
                "limits are set both here and in WasmPlugin {name:?}; set them in one place"
            ));
        }
        let mut out = entry.clone();
        out.wasm = Some(WasmSource {
            path: module_path.to_owned(),
            sha256: Some(sha256.to_owned()),
            plugin: None,
        });
        if self.config.is_some() {
            out.config.clone_from(&self.config);
        }
        if self.limits.is_some() {
            out.limits = self.limits;
        }
        if let Some(p) = self.failure_policy {
            out.failure_policy = p;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod point_list_tests {
    use super::*;

    fn spec(v: Value) -> Result<ProfileSpec, String> {
        serde_path_to_error::deserialize(v).map_err(|e| format!("{}: {}", e.path(), e.inner()))
    }

    #[test]
    fn a_plain_list_replaces_and_add_extends() {
        let s = spec(serde_json::json!({
            "scores": [{"name": "a"}],
            "assigners": {"add": [{"name": "b"}]},
        }))
        .expect("spec");
        assert!(!s.point(ExtensionPoint::Score).expect("scores").extends());
        assert!(
            s.point(ExtensionPoint::Assign)
                .expect("assigners")
                .extends()
        );
        assert_eq!(
            s.list(ExtensionPoint::Assign).expect("assigners")[0].name,
            "b"
        );
        assert_eq!(s.entry_path(ExtensionPoint::Score, 0), "spec.scores[0]");
        assert_eq!(
            s.entry_path(ExtensionPoint::Assign, 0),
            "spec.assigners.add[0]"
        );
        // Both forms serialize back as written.
        let back = serde_json::to_value(&s).expect("serialize");
        assert_eq!(
            back["assigners"],
            serde_json::json!({"add": [{"name": "b", "failurePolicy": "Fail"}]})
        );
        assert_eq!(
            back["scores"],
            serde_json::json!([{"name": "a", "failurePolicy": "Fail"}])
        );
    }

    #[test]
    fn other_shapes_are_refused_with_the_field() {
        let e = spec(serde_json::json!({"scores": 3})).expect_err("scalar");
        assert!(
            e.contains("a list of plugins (replaces the built-ins) or {add: [...]}"),
            "{e}"
        );
        let e = spec(serde_json::json!({"scores": {"append": []}})).expect_err("unknown key");
        assert!(e.contains("unknown field `append`"), "{e}");
        let e = spec(serde_json::json!({"filters": {"add": [{"nam": "x"}]}})).expect_err("entry");
        assert!(e.starts_with("filters.add[0]"), "{e}");
    }
}
