//! `flotilla interpret`: check a `ResourceInterpreterCustomization` and run its rules locally,
//! flag-compatible with `karmadactl interpret`.
//!
//! `--check` compiles every rule of every customization (for Lua: the script parses, its top
//! level runs and it defines the operation's function) and prints karmadactl's report; otherwise
//! `--operation` runs one rule on `--desired-file`/`--observed-file` (`--status-file`: a stream of
//! AggregatedStatusItem documents; `--desired-replica`) and prints each result as karmadactl does
//! (`-o json`: one object keyed `replica`, `requires`, `components`, `revised`, `retained`,
//! `status`, `aggregatedStatus`, `healthy`, `dependencies`). Unlike karmadactl, a failing rule
//! exits non-zero.
//!
//! `wasm: {plugin: NAME}` rules are served by the `WasmPlugin` documents among the `-f` inputs,
//! as in `plan` (`spec.module.path` relative to the file, or `spec.module.base64`; ≤ 64 MiB).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, anyhow, bail};
use flotilla_api::interpreter::ResourceInterpreterCustomization;
use flotilla_api::work::AggregatedStatusItem;
use flotilla_core::interpreter::{
    Customization, Interpreters, Operation, ResourceInterpreter, RuleBackend, rule_field, rule_for,
};
use flotilla_core::manifest::parse_values;
use serde_json::{Map, Value, json};

/// Arguments (karmadactl's names).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Files or directories with the ResourceInterpreterCustomization(s) and the WasmPlugins
    /// their `wasm` rules name (`-` for stdin).
    #[arg(short = 'f', long = "filename", required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// Recurse into directories given with -f.
    #[arg(short = 'R', long)]
    pub recursive: bool,
    /// The operation to run (case-insensitive): Retain, InterpretReplica, InterpretComponent,
    /// ReviseReplica, InterpretStatus, AggregateStatus, InterpretHealth, InterpretDependency.
    #[arg(long)]
    pub operation: Option<String>,
    /// Check the customizations (every rule compiles) instead of running one.
    #[arg(long)]
    pub check: bool,
    /// The object passed as desiredObj (`-` for stdin).
    #[arg(long)]
    pub desired_file: Option<PathBuf>,
    /// The object passed as observedObj (`-` for stdin).
    #[arg(long)]
    pub observed_file: Option<PathBuf>,
    /// AggregatedStatusItem documents passed as statusItems (`-` for stdin).
    #[arg(long)]
    pub status_file: Option<PathBuf>,
    /// The desiredReplica argument of ReviseReplica.
    #[arg(long, default_value_t = 0)]
    pub desired_replica: i32,
    /// Output format: `json` (one object) or karmadactl's YAML documents (default).
    #[arg(short = 'o', long)]
    pub output: Option<String>,
}

/// Karmadactl's rule order (`AllResourceInterpreterCustomizationRules`).
const RULE_ORDER: [Operation; 8] = [
    Operation::Retain,
    Operation::InterpretReplica,
    Operation::InterpretComponent,
    Operation::ReviseReplica,
    Operation::InterpretStatus,
    Operation::AggregateStatus,
    Operation::InterpretHealth,
    Operation::InterpretDependency,
];

/// Read `path` (`-`: standard input).
fn read(path: &Path) -> anyhow::Result<(String, String)> {
    if path.as_os_str() == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
            .context("reading standard input")?;
        return Ok(("-".to_owned(), s));
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{}: cannot read", path.display()))?;
    Ok((path.display().to_string(), text))
}

/// The documents of one file, parsed with the input bounds every Flotilla input has.
fn documents(path: &Path) -> anyhow::Result<(String, Vec<Value>)> {
    let (name, text) = read(path)?;
    let docs = parse_values(&name, &text)?;
    Ok((name, docs.into_iter().map(|(_, v)| v).collect()))
}

/// One customization with where it came from.
struct Source {
    source: String,
    ric: ResourceInterpreterCustomization,
}

/// `WasmPlugin` documents of the input: `(file, its directory, object)`.
type WasmPluginDocs = Vec<(String, PathBuf, Value)>;

/// The customizations of the input, and its `WasmPlugin` documents (which serve
/// `wasm: {plugin: NAME}` rules, as in `plan`).
fn customizations(args: &Args) -> anyhow::Result<(Vec<Source>, WasmPluginDocs)> {
    let mut out = Vec::new();
    let mut wasm_plugins = Vec::new();
    for p in super::input::expand(&args.files, args.recursive)? {
        let (name, docs) = documents(&p)?;
        let dir = p.parent().map(Path::to_path_buf).unwrap_or_default();
        for (i, d) in docs.into_iter().enumerate() {
            if super::interpreters::is_wasm_plugin(&d) {
                wasm_plugins.push((name.clone(), dir.clone(), d));
                continue;
            }
            let kind = d.get("kind").and_then(Value::as_str).unwrap_or_default();
            if kind != flotilla_api::interpreter::CUSTOMIZATION_KIND {
                let api = d
                    .get("apiVersion")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                bail!(
                    "{name}: document {}: not a ResourceInterpreterCustomization, got {api}, Kind={kind}",
                    i + 1
                );
            }
            let ric: ResourceInterpreterCustomization = serde_path_to_error::deserialize(d)
                .map_err(|e| anyhow!("{name}: document {}: {}: {}", i + 1, e.path(), e.inner()))?;
            out.push(Source {
                source: name.clone(),
                ric,
            });
        }
    }
    if out.is_empty() {
        bail!("no ResourceInterpreterCustomization found");
    }
    Ok((out, wasm_plugins))
}

/// At most one object from `path`.
fn object(path: Option<&PathBuf>) -> anyhow::Result<Option<Value>> {
    let Some(path) = path else { return Ok(None) };
    let (name, mut docs) = documents(path)?;
    match docs.len() {
        0 => bail!("{name}: no object"),
        1 => {}
        n => bail!("{name}: get {n} objects, expect one at most"),
    }
    let v = docs.remove(0);
    if !v.is_object() {
        bail!("{name}: expected an object");
    }
    Ok(Some(v))
}

/// AggregatedStatusItem documents, decoded as Go decodes them: unknown fields ignored, missing
/// ones empty.
fn status_items(path: Option<&PathBuf>) -> anyhow::Result<Option<Vec<AggregatedStatusItem>>> {
    const FIELDS: [&str; 5] = [
        "clusterName",
        "status",
        "applied",
        "appliedMessage",
        "health",
    ];
    let Some(path) = path else {
        return Ok(None);
    };
    let (name, docs) = documents(path)?;
    docs.into_iter()
        .enumerate()
        .map(|(i, d)| {
            let Value::Object(m) = d else {
                bail!(
                    "{name}: document {}: expected an AggregatedStatusItem mapping",
                    i + 1
                );
            };
            let mut known: Map<String, Value> = m
                .into_iter()
                .filter(|(k, v)| FIELDS.contains(&k.as_str()) && !v.is_null())
                .collect();
            known
                .entry("clusterName")
                .or_insert_with(|| Value::String(String::new()));
            serde_path_to_error::deserialize(Value::Object(known))
                .map_err(|e| anyhow!("{name}: document {}: {}: {}", i + 1, e.path(), e.inner()))
        })
        .collect::<anyhow::Result<Vec<_>>>()
        .map(Some)
}

/// Run.
pub fn main(args: Args) -> anyhow::Result<()> {
    if let Some(o) = args.output.as_deref()
        && !matches!(o, "json" | "yaml")
    {
        bail!("unknown output format {o:?} (json or yaml)");
    }
    let (sources, wasm_plugins) = customizations(&args)?;
    // The backends `plan` uses: Lua, CEL, and Wasm rules served by the input's WasmPlugins.
    let backends = super::interpreters::offline_rule_backends(&wasm_plugins)?;
    let refs: Vec<&dyn RuleBackend> = backends.iter().map(AsRef::as_ref).collect();
    if args.check {
        return check(&sources, &refs);
    }
    let Some(op_name) = args.operation.as_deref() else {
        bail!("operation is not set for executing");
    };
    let op = Operation::parse(op_name).ok_or_else(|| {
        let names: Vec<&str> = RULE_ORDER.iter().map(|o| o.as_str()).collect();
        anyhow!(
            "operation {op_name} is not supported. Use one of: {}",
            names.join(", ")
        )
    })?;
    let desired = object(args.desired_file.as_ref())?;
    let observed = object(args.observed_file.as_ref())?;
    let items = status_items(args.status_file.as_ref())?;

    let mut chain: Vec<Arc<dyn ResourceInterpreter>> = Vec::new();
    for s in &sources {
        let c = Customization::compile(&s.ric, &refs)
            .map_err(|e| anyhow!("{}: customization {:?}: {e}", s.source, name_of(&s.ric)))?;
        chain.push(Arc::new(c));
    }
    let chain = Interpreters::new(chain);
    let results = execute(
        &chain,
        op,
        desired,
        observed,
        items.as_deref(),
        args.desired_replica,
        &sources,
    )
    .map_err(|e| anyhow!("Execute {op} error: {e}"))?;
    print(&results, args.output.as_deref())
}

fn name_of(ric: &ResourceInterpreterCustomization) -> &str {
    ric.metadata.name.as_deref().unwrap_or_default()
}

/// `RuleArgs.getObjectOrError`: exactly one of desired and observed.
fn one_object(desired: Option<Value>, observed: Option<Value>) -> anyhow::Result<Value> {
    match (desired, observed) {
        (None, None) => bail!("desired-file, observed-file options are not set"),
        (Some(_), Some(_)) => {
            bail!("you can not specify both desired-file and observed-file options")
        }
        (Some(v), None) | (None, Some(v)) => Ok(v),
    }
}

fn execute(
    chain: &Interpreters,
    op: Operation,
    desired: Option<Value>,
    observed: Option<Value>,
    items: Option<&[AggregatedStatusItem]>,
    replicas: i32,
    sources: &[Source],
) -> anyhow::Result<Vec<(&'static str, Value)>> {
    let enabled = |obj: &Value| {
        chain
            .resolve(obj, op)
            .ok_or_else(|| anyhow!("rule is not enabled"))
    };
    let to = |v: &dyn erased::Ser| v.value();
    Ok(match op {
        Operation::Retain => {
            let desired =
                desired.ok_or_else(|| anyhow!("desired, desired-file options are not set"))?;
            let observed =
                observed.ok_or_else(|| anyhow!("observed, observed-file options are not set"))?;
            vec![("retained", enabled(&desired)?.retain(&desired, &observed)?)]
        }
        Operation::InterpretReplica => {
            let obj = one_object(desired, observed)?;
            let r = enabled(&obj)?.get_replicas(&obj)?;
            vec![
                ("replica", json!(r.replicas)),
                ("requires", to(&r.requirements)?),
            ]
        }
        Operation::InterpretComponent => {
            let obj = one_object(desired, observed)?;
            vec![("components", to(&enabled(&obj)?.get_components(&obj)?)?)]
        }
        Operation::ReviseReplica => {
            let obj = one_object(desired, observed)?;
            vec![(
                "revised",
                enabled(&obj)?.revise_replica(&obj, i64::from(replicas))?,
            )]
        }
        Operation::AggregateStatus => {
            let obj = one_object(desired, observed)?;
            let interpreter = enabled(&obj)?;
            let status = match (items, lua_rule(sources, &obj, op)?) {
                // A status file without items is an empty list, not none (Lua sees `{}`).
                (Some([]), Some(rule)) => rule.aggregate_status_items(&obj, Some(&[]))?,
                _ => interpreter.aggregate_status(&obj, items.unwrap_or_default())?,
            };
            vec![("aggregatedStatus", status)]
        }
        Operation::InterpretStatus => {
            let obj = one_object(desired, observed)?;
            let s = enabled(&obj)?.reflect_status(&obj)?;
            vec![("status", s.unwrap_or(Value::Null))]
        }
        Operation::InterpretHealth => {
            let obj = one_object(desired, observed)?;
            vec![("healthy", json!(enabled(&obj)?.interpret_health(&obj)?))]
        }
        Operation::InterpretDependency => {
            let obj = one_object(desired, observed)?;
            vec![("dependencies", to(&enabled(&obj)?.get_dependencies(&obj)?)?)]
        }
    })
}

/// The Lua rule for `op` of the first customization targeting `obj`'s kind, compiled, when that
/// rule is a `luaScript`.
fn lua_rule(
    sources: &[Source],
    obj: &Value,
    op: Operation,
) -> anyhow::Result<Option<flotilla_lua::LuaRule>> {
    let s = |k: &str| obj.get(k).and_then(Value::as_str).unwrap_or_default();
    let found = sources.iter().find_map(|src| {
        let t = &src.ric.spec.target;
        let (_, rule) = rule_for(&src.ric.spec.customizations, op);
        (t.api_version == s("apiVersion") && t.kind == s("kind"))
            .then_some(rule)
            .flatten()
            .map(|r| (src, r))
    });
    let Some((src, rule)) = found else {
        return Ok(None);
    };
    let Some(script) = rule.lua_script.as_deref() else {
        return Ok(None);
    };
    flotilla_lua::LuaRule::new(
        name_of(&src.ric),
        op,
        script,
        flotilla_lua::Limits::default(),
    )
    .map(Some)
    .map_err(|e| anyhow!(e))
}

/// Serializing the typed results without naming each type.
mod erased {
    use serde_json::Value;

    /// Anything serializable, as a JSON value.
    pub(super) trait Ser {
        fn value(&self) -> anyhow::Result<Value>;
    }

    impl<T: serde::Serialize> Ser for T {
        fn value(&self) -> anyhow::Result<Value> {
            Ok(serde_json::to_value(self)?)
        }
    }
}

fn print(results: &[(&'static str, Value)], output: Option<&str>) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if output == Some("json") {
        let obj: Map<String, Value> = results
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect();
        serde_json::to_writer_pretty(&mut out, &Value::Object(obj))?;
        writeln!(out)?;
        return Ok(());
    }
    // karmadactl's printExecuteResult: one YAML document per result.
    for (i, (name, v)) in results.iter().enumerate() {
        writeln!(out, "---")?;
        writeln!(out, "# [{}/{}] {name}:", i + 1, results.len())?;
        write!(out, "{}", serde_yaml::to_string(v)?)?;
    }
    Ok(())
}

/// `karmadactl interpret --check`: every rule of every customization, PASS, UNSET or ERROR.
fn check(sources: &[Source], backends: &[&dyn RuleBackend]) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let mut failed = false;
    let width = RULE_ORDER
        .iter()
        .map(|o| o.as_str().len())
        .max()
        .unwrap_or(0)
        + 1;
    for s in sources {
        writeln!(out, "-----------------------------------")?;
        let name = name_of(&s.ric);
        writeln!(
            out,
            "SOURCE: {}",
            if name.is_empty() { &s.source } else { name }
        )?;
        let target = &s.ric.spec.target;
        if target.kind.is_empty() {
            failed = true;
            writeln!(out, "target.kind no set")?;
            continue;
        }
        if target.api_version.is_empty() {
            failed = true;
            writeln!(out, "target.apiVersion no set")?;
            continue;
        }
        writeln!(out, "TARGET: {} {}", target.api_version, target.kind)?;
        writeln!(out, "RULERS:")?;
        for op in RULE_ORDER {
            let label = format!("{}:", op.as_str());
            write!(out, "    {label:<width$}  ")?;
            let (_, Some(rule)) = rule_for(&s.ric.spec.customizations, op) else {
                writeln!(out, "UNSET")?;
                continue;
            };
            let result = rule_field(rule).and_then(|field| {
                let backend = backends
                    .iter()
                    .find(|b| b.field() == field)
                    .ok_or_else(|| format!("{field} rules are not supported here"))?;
                backend.compile(name, target, op, rule).map(|_| ())
            });
            match result {
                Ok(()) => writeln!(out, "PASS")?,
                Err(e) => {
                    failed = true;
                    writeln!(out, "ERROR: {}", e.trim())?;
                }
            }
        }
    }
    out.flush()?;
    if failed {
        bail!("some customizations do not compile");
    }
    Ok(())
}
