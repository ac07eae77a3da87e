//! The CEL [`Engine`]: one Kubernetes-dialect environment, a bounded program cache, a bounded
//! cache of converted clusters, and the [`ExpressionEngine`] implementation the core calls.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use cel::common::types::{CelMap, CelMapKey, CelString};
use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;
use cel::{Context, Env};
use flotilla_api::cluster::Cluster;
use flotilla_core::expression::{
    BoundObject, ExpressionEngine, ExpressionError, ExpressionErrorKind, ExpressionKind,
};
use serde_json::Value;

use crate::check::{self, Poly, Ty};
use crate::convert::{self, Sizes};
use crate::limits::Limits;

/// Stack that parsing and checking may need, and the size of a fresh stack when less is left.
/// Measured in a debug build at [`Limits::max_depth`] 250: a chain of 250 binary operators needs
/// about 9.5 MiB (parsing dominates, about 38 KiB per level), the worst shape measured; release
/// builds need far less.
const COMPILE_RED_ZONE: usize = 32 * 1024 * 1024;
/// See [`COMPILE_RED_ZONE`].
const COMPILE_STACK: usize = 64 * 1024 * 1024;

/// Stack that evaluating an accepted program (and converting its result) may need, and the size
/// of a fresh stack when less is left. Measured in a debug build: about 420 KiB for 250 levels.
/// The red zone is small enough that a tokio worker (2 MiB) usually evaluates in place.
const EVAL_RED_ZONE: usize = 1024 * 1024;
/// See [`EVAL_RED_ZONE`].
const EVAL_STACK: usize = 4 * 1024 * 1024;

/// A compiled expression: the program, its static type and its cost bound.
#[derive(Debug)]
pub struct Program {
    program: cel::Program,
    ty: Ty,
    cost: Poly,
}

impl Program {
    /// The cost bound at `sizes`, in cost units.
    pub fn estimated_cost(&self, sizes: Sizes) -> f64 {
        self.cost.eval(sizes)
    }

    /// The static type of the program's result.
    pub(crate) fn ty(&self) -> &Ty {
        &self.ty
    }
}

/// A FIFO-evicting map: bounded, and cheap to hit.
struct Bounded<K, V> {
    map: HashMap<K, V>,
    order: VecDeque<K>,
    capacity: usize,
}

impl<K: Hash + Eq + Clone, V: Clone> Bounded<K, V> {
    fn new(capacity: usize) -> Self {
        Bounded {
            map: HashMap::new(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    fn get<Q: Hash + Eq + ?Sized>(&self, k: &Q) -> Option<V>
    where
        K: std::borrow::Borrow<Q>,
    {
        self.map.get(k).cloned()
    }

    fn insert(&mut self, k: K, v: V) {
        if self.map.insert(k.clone(), v).is_none() {
            self.order.push_back(k);
        }
        while self.map.len() > self.capacity {
            match self.order.pop_front() {
                Some(old) => {
                    self.map.remove(&old);
                }
                None => break,
            }
        }
    }
}

/// A converted value and its sizes.
struct Converted {
    value: Box<dyn Val + 'static>,
    sizes: Sizes,
}

/// A converted cluster with the override conveniences (`clusterName`, `clusterLabels`).
struct ConvertedCluster {
    cluster: Converted,
    name: Box<dyn Val + 'static>,
    labels: Box<dyn Val + 'static>,
}

/// The CEL engine. Cheap to share (`Arc`); all caches are internal and bounded.
pub struct Engine {
    env: Arc<Env>,
    limits: Limits,
    programs: Mutex<Bounded<String, Arc<Program>>>,
    clusters: Mutex<Bounded<ClusterKey, Arc<ConvertedCluster>>>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum ClusterKey {
    /// Objects from an API server: the resource version identifies the content.
    Version {
        name: String,
        uid: String,
        resource_version: String,
    },
    /// Objects from files: a hash of the content.
    Content { name: String, hash: u64 },
}

fn cluster_key(c: &Cluster) -> ClusterKey {
    let name = c.name().to_owned();
    match c.metadata.resource_version.as_deref() {
        Some(rv) if !rv.is_empty() => ClusterKey::Version {
            name,
            uid: c.metadata.uid.clone().unwrap_or_default(),
            resource_version: rv.to_owned(),
        },
        _ => {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            serde_json::to_vec(c).unwrap_or_default().hash(&mut h);
            ClusterKey::Content {
                name,
                hash: h.finish(),
            }
        }
    }
}

fn error(kind: ExpressionErrorKind, message: impl Into<String>) -> ExpressionError {
    ExpressionError::new(kind, message)
}

fn at(
    kind: ExpressionErrorKind,
    column: usize,
    message: impl std::fmt::Display,
) -> ExpressionError {
    ExpressionError {
        kind,
        message: format!("column {column}: {message}"),
        column: Some(column),
    }
}

impl Engine {
    /// An engine with `limits`.
    ///
    /// # Panics
    /// Never in practice: registering the libraries fails only on a duplicate declaration, a
    /// programming error caught by every test.
    pub fn new(limits: Limits) -> Self {
        let mut env = Env::stdlib();
        let registered = env
            .add_extension(cel::extensions::strings)
            .and_then(|()| env.add_extension(cel::extensions::lists))
            .and_then(|()| env.add_extension(cel::extensions::math))
            .and_then(|()| env.add_extension(cel::extensions::encoders))
            .and_then(|()| crate::library::register(&mut env));
        #[allow(clippy::expect_used)]
        registered.expect("invariant: the Kubernetes libraries declare each overload once");
        Engine {
            env: Arc::new(env),
            programs: Mutex::new(Bounded::new(limits.program_cache)),
            clusters: Mutex::new(Bounded::new(limits.cluster_cache)),
            limits,
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Compiled programs currently cached (at most [`Limits::program_cache`]).
    pub fn cached_programs(&self) -> usize {
        self.programs.lock().map(|m| m.map.len()).unwrap_or(0)
    }

    /// Compile `source` (or fetch it from the cache): syntax, types, static cost. The result type
    /// is not checked against a use; [`ExpressionEngine::check`] does that.
    ///
    /// # Errors
    /// Syntax, type or cost errors, with the column.
    pub fn compile(&self, source: &str) -> Result<Arc<Program>, ExpressionError> {
        // Parsing and checking recurse per level of the syntax tree (the pre-scan bounds the
        // levels): they run where at least `COMPILE_RED_ZONE` is left, on a fresh stack if not.
        stacker::maybe_grow(COMPILE_RED_ZONE, COMPILE_STACK, || {
            self.compile_here(source)
        })
    }

    fn compile_here(&self, source: &str) -> Result<Arc<Program>, ExpressionError> {
        if let Some(p) = self
            .programs
            .lock()
            .map_err(|_| error(ExpressionErrorKind::Runtime, "program cache poisoned"))?
            .get(source)
        {
            return Ok(p);
        }
        let program = Arc::new(self.compile_uncached(source, None)?);
        if let Ok(mut cache) = self.programs.lock() {
            cache.insert(source.to_owned(), Arc::clone(&program));
        }
        Ok(program)
    }

    /// Compile `source` with `vars` in scope instead of the placement variables (see
    /// [`check::check_with`]), cached apart from placement programs under `scope`, a name for
    /// that set of variables.
    pub(crate) fn compile_in(
        &self,
        scope: &str,
        vars: &[(&str, Ty)],
        source: &str,
    ) -> Result<Arc<Program>, ExpressionError> {
        // A NUL never parses, so these keys never collide with a placement expression's text.
        let key = format!("\0{scope}\0{source}");
        stacker::maybe_grow(COMPILE_RED_ZONE, COMPILE_STACK, || {
            if let Some(p) = self.programs.lock().ok().and_then(|m| m.get(&key)) {
                return Ok(p);
            }
            let program = Arc::new(self.compile_uncached(source, Some(vars))?);
            if let Ok(mut cache) = self.programs.lock() {
                cache.insert(key.clone(), Arc::clone(&program));
            }
            Ok(program)
        })
    }

    /// Convert an input value for [`Engine::execute`], with its sizes.
    ///
    /// # Errors
    /// The value exceeds the input bounds.
    pub(crate) fn convert_input(
        &self,
        v: &Value,
    ) -> Result<(Box<dyn Val + 'static>, Sizes), ExpressionError> {
        self.convert(v).map(|c| (c.value, c.sizes))
    }

    /// Evaluate `program` with `vars` bound, inputs of `sizes`: the runtime cost check first,
    /// then the evaluation on a stack with room for it, the result converted to JSON.
    ///
    /// # Errors
    /// Over the runtime cost limit ([`ExpressionErrorKind::Limit`]), or a runtime error.
    pub(crate) fn execute(
        &self,
        program: &Program,
        vars: &dyn VariableResolver,
        sizes: Sizes,
    ) -> Result<Value, ExpressionError> {
        let estimate = program.cost.eval(sizes);
        if estimate > self.limits.runtime_cost {
            return Err(error(
                ExpressionErrorKind::Limit,
                format!(
                    "estimated cost {estimate:.0} for this input (lists of {}, strings of {} bytes, {} values) exceeds the runtime limit of {}",
                    sizes.list, sizes.string, sizes.nodes, self.limits.runtime_cost
                ),
            ));
        }
        let mut ctx = Context::with_env(Arc::clone(&self.env));
        ctx.set_variable_resolver(vars);
        stacker::maybe_grow(EVAL_RED_ZONE, EVAL_STACK, || {
            let value = program
                .program
                .execute(&ctx)
                .map_err(|e| error(ExpressionErrorKind::Runtime, e.to_string()))?;
            convert::to_json(&value).map_err(|e| error(ExpressionErrorKind::Runtime, e))
        })
    }

    fn compile_uncached(
        &self,
        source: &str,
        vars: Option<&[(&str, Ty)]>,
    ) -> Result<Program, ExpressionError> {
        let limits = &self.limits;
        if source.len() > limits.max_expression_bytes {
            return Err(error(
                ExpressionErrorKind::Syntax,
                format!(
                    "expression is {} bytes, more than the limit of {}",
                    source.len(),
                    limits.max_expression_bytes
                ),
            ));
        }
        crate::scan::check(source, limits.max_nesting, limits.max_depth)
            .map_err(|e| at(ExpressionErrorKind::Syntax, e.column(), e))?;
        let program = self
            .env
            .compile(source)
            .map_err(|errs| match errs.errors.first() {
                // The parser's column is already 1-based.
                Some(e) => at(
                    ExpressionErrorKind::Syntax,
                    usize::try_from(e.pos.1).unwrap_or(0),
                    format!(
                        "syntax error: {}",
                        e.msg.strip_prefix("Syntax error: ").unwrap_or(&e.msg)
                    ),
                ),
                None => error(ExpressionErrorKind::Syntax, "syntax error"),
            })?;
        let offset = |id| program.source_info().offset_for(id).map(|(start, _)| start);
        let info = match vars {
            None => check::check(program.expression(), &offset),
            Some(vars) => check::check_with(program.expression(), &offset, vars),
        }
        .map_err(|e| match e.offset {
            Some(o) => at(
                ExpressionErrorKind::Type,
                o as usize + 1,
                format!("type error: {}", e.message),
            ),
            None => error(
                ExpressionErrorKind::Type,
                format!("type error: {}", e.message),
            ),
        })?;
        let estimate = info.cost.eval(limits.reference);
        if estimate > limits.static_cost {
            let r = limits.reference;
            return Err(error(
                ExpressionErrorKind::Cost,
                format!(
                    "estimated cost {} exceeds the limit of {} (for an input with lists of {}, strings of {} bytes and {} values); nested comprehensions over the object are the usual cause",
                    if estimate.is_finite() {
                        format!("{estimate:.0}")
                    } else {
                        "unbounded".to_owned()
                    },
                    limits.static_cost,
                    r.list,
                    r.string,
                    r.nodes
                ),
            ));
        }
        Ok(Program {
            program,
            ty: info.ty,
            cost: info.cost,
        })
    }

    fn convert(&self, v: &Value) -> Result<Converted, ExpressionError> {
        let mut sizes = Sizes::default();
        let value = convert::to_cel(v, &self.limits, &mut sizes)
            .map_err(|e| error(ExpressionErrorKind::Limit, e.to_string()))?;
        Ok(Converted { value, sizes })
    }

    fn cluster(&self, c: &Cluster) -> Result<Arc<ConvertedCluster>, ExpressionError> {
        let key = cluster_key(c);
        if let Some(hit) = self.clusters.lock().ok().and_then(|m| m.get(&key)) {
            return Ok(hit);
        }
        let json = serde_json::to_value(c)
            .map_err(|e| error(ExpressionErrorKind::Runtime, e.to_string()))?;
        let cluster = self.convert(&json)?;
        let labels: HashMap<CelMapKey<'static>, Box<dyn Val>> = c
            .labels()
            .iter()
            .map(|(k, v)| {
                (
                    CelMapKey::from(k.clone()),
                    Box::new(CelString::from(v.clone())) as Box<dyn Val>,
                )
            })
            .collect();
        let converted = Arc::new(ConvertedCluster {
            cluster,
            name: Box::new(CelString::from(c.name().to_owned())),
            labels: Box::new(CelMap::from(labels)),
        });
        if let Ok(mut m) = self.clusters.lock() {
            m.insert(key, Arc::clone(&converted));
        }
        Ok(converted)
    }
}

impl Default for Engine {
    fn default() -> Self {
        Engine::new(Limits::default())
    }
}

/// Whether a value of static type `ty` can serve as `kind`'s result.
fn accepts(kind: ExpressionKind, ty: &Ty) -> bool {
    match (kind, ty) {
        (_, Ty::Dyn) => true,
        (ExpressionKind::ClusterSelector, t) => *t == Ty::Bool,
        (ExpressionKind::Score, t) => matches!(t, Ty::Int | Ty::Uint | Ty::Double),
        (ExpressionKind::Value, t) => !matches!(
            t,
            Ty::Opaque(_) | Ty::Type | Ty::Opt(_) | Ty::Duration | Ty::Timestamp | Ty::Bytes
        ),
        (ExpressionKind::StringMap, Ty::Map(k, v)) => {
            matches!(**k, Ty::String | Ty::Dyn) && matches!(**v, Ty::String | Ty::Dyn)
        }
        (ExpressionKind::JsonPatch, t) => matches!(t, Ty::List(_)),
        (ExpressionKind::MergePatch, t) => matches!(t, Ty::Map(..)),
        _ => false,
    }
}

fn wanted(kind: ExpressionKind) -> &'static str {
    match kind {
        ExpressionKind::ClusterSelector => "bool",
        ExpressionKind::Score => "int or double",
        ExpressionKind::Value => "a JSON value",
        ExpressionKind::StringMap => "map(string, string)",
        ExpressionKind::JsonPatch => "a list of JSON patch operations",
        ExpressionKind::MergePatch => "a map (merge patch)",
        _ => "a value",
    }
}

fn check_result(kind: ExpressionKind, v: &Value) -> Result<(), ExpressionError> {
    let ok = match kind {
        ExpressionKind::ClusterSelector => v.is_boolean(),
        ExpressionKind::Score => v.is_number(),
        ExpressionKind::StringMap => v
            .as_object()
            .is_some_and(|m| m.values().all(Value::is_string)),
        ExpressionKind::JsonPatch => v.is_array(),
        ExpressionKind::MergePatch => v.is_object(),
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(error(
            ExpressionErrorKind::Runtime,
            format!("expression returned {v}, want {}", wanted(kind)),
        ))
    }
}

impl ExpressionEngine for Engine {
    fn language(&self) -> &str {
        "CEL"
    }

    fn check(&self, kind: ExpressionKind, source: &str) -> Result<(), ExpressionError> {
        let p = self.compile(source)?;
        if accepts(kind, &p.ty) {
            Ok(())
        } else {
            Err(error(
                ExpressionErrorKind::Type,
                format!(
                    "type error: a {kind} expression must evaluate to {}, but this one evaluates to {}",
                    wanted(kind),
                    ty_name(&p.ty)
                ),
            ))
        }
    }

    fn bind(&self, object: Option<&Value>) -> Result<Box<dyn BoundObject + '_>, ExpressionError> {
        let object = match object {
            Some(v) => self.convert(v)?,
            None => Converted {
                value: Box::new(cel::common::types::CelNull),
                sizes: Sizes::default(),
            },
        };
        Ok(Box::new(Bound {
            engine: self,
            object,
            deadline: Instant::now() + self.limits.deadline,
            last: RefCell::new(None),
        }))
    }
}

fn ty_name(t: &Ty) -> String {
    format!("{t:?}").to_lowercase()
}

/// An object converted once, evaluated against any number of clusters.
struct Bound<'e> {
    engine: &'e Engine,
    object: Converted,
    deadline: Instant,
    /// The last cluster seen: filters and scores evaluate several expressions per cluster.
    last: RefCell<Option<(ClusterKeyLite, Arc<ConvertedCluster>)>>,
}

/// Identity of a cluster within one bound session (address plus what changes with content).
#[derive(PartialEq, Eq)]
struct ClusterKeyLite {
    addr: usize,
    name: String,
    resource_version: Option<String>,
}

struct Vars<'a> {
    object: &'a (dyn Val + 'static),
    cluster: &'a ConvertedCluster,
}

impl VariableResolver for Vars<'_> {
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        Some(CowVal::Borrowed(match variable {
            "object" => self.object,
            "cluster" => self.cluster.cluster.value.as_ref(),
            "clusterName" => self.cluster.name.as_ref(),
            "clusterLabels" => self.cluster.labels.as_ref(),
            _ => return None,
        }))
    }
}

impl Bound<'_> {
    fn cluster(&self, c: &Cluster) -> Result<Arc<ConvertedCluster>, ExpressionError> {
        let lite = ClusterKeyLite {
            addr: c as *const Cluster as usize,
            name: c.name().to_owned(),
            resource_version: c.metadata.resource_version.clone(),
        };
        if let Some((k, v)) = self.last.borrow().as_ref()
            && *k == lite
        {
            return Ok(Arc::clone(v));
        }
        let v = self.engine.cluster(c)?;
        *self.last.borrow_mut() = Some((lite, Arc::clone(&v)));
        Ok(v)
    }
}

impl BoundObject for Bound<'_> {
    fn evaluate(
        &self,
        kind: ExpressionKind,
        source: &str,
        cluster: &Cluster,
    ) -> Result<Value, ExpressionError> {
        let program = self.engine.compile(source)?;
        if !accepts(kind, &program.ty) {
            return Err(error(
                ExpressionErrorKind::Type,
                format!("a {kind} expression must evaluate to {}", wanted(kind)),
            ));
        }
        let c = self.cluster(cluster)?;
        let sizes = self.object.sizes.max(c.cluster.sizes);
        let estimate = program.cost.eval(sizes);
        let limits = &self.engine.limits;
        if estimate > limits.runtime_cost {
            return Err(error(
                ExpressionErrorKind::Limit,
                format!(
                    "estimated cost {estimate:.0} for this input (lists of {}, strings of {} bytes, {} values) exceeds the runtime limit of {}",
                    sizes.list, sizes.string, sizes.nodes, limits.runtime_cost
                ),
            ));
        }
        if Instant::now() > self.deadline {
            return Err(error(
                ExpressionErrorKind::Timeout,
                format!("evaluation budget of {:?} spent", limits.deadline),
            ));
        }
        let vars = Vars {
            object: self.object.value.as_ref(),
            cluster: &c,
        };
        let mut ctx = Context::with_env(Arc::clone(&self.engine.env));
        ctx.set_variable_resolver(&vars);
        // The interpreter recurses per level of the program (bounded at compile time) and the
        // conversion per level of the result: both run where `EVAL_RED_ZONE` is left.
        let json = stacker::maybe_grow(EVAL_RED_ZONE, EVAL_STACK, || {
            let value = program
                .program
                .execute(&ctx)
                .map_err(|e| error(ExpressionErrorKind::Runtime, e.to_string()))?;
            convert::to_json(&value).map_err(|e| error(ExpressionErrorKind::Runtime, e))
        })?;
        check_result(kind, &json)?;
        Ok(json)
    }
}
