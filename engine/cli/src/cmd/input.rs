//! Reading `-f` paths (files or directories) into an [`Inventory`], and admitting its policies.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use flotilla_core::manifest::parse_documents;
use flotilla_core::plan::{Inventory, admit_with};

/// The `-f`/`-R` arguments every offline command takes.
#[derive(Debug, clap::Args)]
pub struct Files {
    /// Files or directories with templates, policies, Clusters and existing ResourceBindings (`-` for stdin).
    #[arg(short = 'f', long = "filename", required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// Recurse into directories.
    #[arg(short = 'R', long)]
    pub recursive: bool,
}

impl Files {
    /// Load and admit the inputs ([`load`]).
    pub fn load(&self) -> anyhow::Result<Inventory> {
        load(&self.files, self.recursive)
    }
}

/// Expand `-f` arguments: files as given, directories to their `*.yaml|*.yml|*.json` files (sorted;
/// recursively with `recursive`). `-` reads standard input.
pub fn expand(paths: &[PathBuf], recursive: bool) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if p.as_os_str() == "-" {
            out.push(p.clone());
            continue;
        }
        let meta = std::fs::metadata(p).with_context(|| format!("{}: cannot read", p.display()))?;
        if meta.is_dir() {
            walk(p, recursive, &mut out)?;
        } else {
            out.push(p.clone());
        }
    }
    if out.is_empty() {
        bail!(
            "no input files found in {}",
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(out)
}

fn walk(dir: &Path, recursive: bool, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("{}: cannot read directory", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for e in entries {
        if e.is_dir() {
            if recursive {
                walk(&e, recursive, out)?;
            }
        } else if e
            .extension()
            .and_then(|x| x.to_str())
            .is_some_and(|x| matches!(x, "yaml" | "yml" | "json"))
        {
            out.push(e);
        }
    }
    Ok(())
}

/// Load and admit every document; any invalid document or policy is an error naming file,
/// document and field.
pub fn load(paths: &[PathBuf], recursive: bool) -> anyhow::Result<Inventory> {
    let mut inv = Inventory::default();
    let mut wasm_plugins = Vec::new();
    // Which file each policy came from, so admission errors name it.
    let mut origin = std::collections::BTreeMap::<(String, String), String>::new();
    for p in expand(paths, recursive)? {
        let (name, text) = if p.as_os_str() == "-" {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
                .context("reading standard input")?;
            ("-".to_owned(), s)
        } else {
            (
                p.display().to_string(),
                std::fs::read_to_string(&p)
                    .with_context(|| format!("{}: cannot read", p.display()))?,
            )
        };
        let mut docs = parse_documents(&name, &text)?;
        // WasmPlugin objects serve `wasm: {plugin: NAME}` interpreter rules offline; they are
        // not templates to propagate.
        let dir = p.parent().map(Path::to_path_buf).unwrap_or_default();
        docs.retain(|d| match d {
            flotilla_core::manifest::Document::Template(o)
                if super::interpreters::is_wasm_plugin(&o.0) =>
            {
                wasm_plugins.push((name.clone(), dir.clone(), o.0.clone()));
                false
            }
            _ => true,
        });
        for d in &docs {
            if let Some(key) = policy_key(d) {
                origin.entry(key).or_insert_with(|| name.clone());
            }
        }
        inv.extend(docs);
    }
    let cel = super::profiles::cel();
    let errors = admit_with(&mut inv, Some(cel.as_ref()));
    if !errors.is_empty() {
        let lines: Vec<String> = errors
            .iter()
            .map(|e| match origin.get(&(e.kind.clone(), e.name.clone())) {
                Some(file) => format!("{file}: {e}"),
                None => e.to_string(),
            })
            .collect();
        bail!("invalid policies:\n  {}", lines.join("\n  "));
    }
    let mut names = std::collections::BTreeSet::new();
    for c in &inv.clusters {
        if !names.insert(c.name()) {
            bail!("duplicate Cluster {:?}", c.name());
        }
    }
    super::interpreters::attach(&mut inv, &wasm_plugins)?;
    Ok(inv)
}

/// `(kind, namespace/name or name)` of a policy document, as [`flotilla_core::plan::PolicyError`]
/// names it.
fn policy_key(d: &flotilla_core::manifest::Document) -> Option<(String, String)> {
    use flotilla_core::manifest::Document;
    let (kind, meta) = match d {
        Document::Propagation(p) => (&p.kind, &p.metadata),
        Document::Override(o) => (&o.kind, &o.metadata),
        _ => return None,
    };
    let name = if meta.namespace().is_empty() {
        meta.name().to_owned()
    } else {
        format!("{}/{}", meta.namespace(), meta.name())
    };
    Some((kind.clone(), name))
}

/// `--now` or the system clock, as epoch seconds.
pub fn now(arg: Option<&str>) -> anyhow::Result<i64> {
    match arg {
        Some(t) => flotilla_core::time::parse_rfc3339(t)
            .with_context(|| format!("--now: {t:?} is not an RFC 3339 time")),
        None => Ok(std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
            .unwrap_or(0)),
    }
}
