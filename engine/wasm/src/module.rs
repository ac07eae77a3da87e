//! Loading a module: digest, compile, check imports/exports/metadata, link (`InstancePre`).

use std::fmt;
use std::sync::{Arc, OnceLock};

use flotilla_abi::{CUSTOM_SECTION, HOST_MODULE, Metadata, WASI_MODULE, export, import};
use flotilla_api::work::SpecMembers;
use flotilla_core::division::Strategy;
use sha2::Digest as _;
use wasmtime::{ExternType, InstancePre, Linker, Module};

use crate::host::Host;
use crate::instance::State;

/// A module's sha256.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Digest(pub [u8; 32]);

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{self}")
    }
}

/// sha256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> Digest {
    Digest(sha2::Sha256::digest(bytes).into())
}

/// Why a module could not be made ready. A failed load never affects plugins already loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read {path}")]
    Read {
        /// The path.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The module's digest is not the one the profile pins.
    #[error("module digest sha256:{actual} does not match the expected sha256:{expected}")]
    DigestMismatch {
        /// Pinned digest (hex).
        expected: String,
        /// Actual digest (hex).
        actual: String,
    },
    /// Not valid Wasm (or WAT), or Cranelift rejected it. The message never quotes the input:
    /// a file that is not a module may hold anything.
    #[error("not a valid Wasm module ({size} bytes)")]
    Compile {
        /// Size of the input.
        size: usize,
    },
    /// The plugin's `limits` are out of range.
    #[error("{0}")]
    Limits(#[from] crate::instance::LimitsError),
    /// The module imports something the host does not provide.
    #[error(
        "module imports {module}.{name}, which the host does not provide (plugins may import only {HOST_MODULE}.{{log,set_result,set_rows}} and the deny-all {WASI_MODULE})"
    )]
    UnknownImport {
        /// Import module.
        module: String,
        /// Import name.
        name: String,
    },
    /// A required export is missing or has the wrong kind.
    #[error("module does not export {name} ({what})")]
    MissingExport {
        /// Export name.
        name: String,
        /// What it should be.
        what: &'static str,
    },
    /// The module targets another ABI version.
    #[error(
        "module targets plugin ABI v{found}, the host speaks v{}",
        flotilla_abi::ABI_VERSION
    )]
    AbiVersion {
        /// The version in the module.
        found: u32,
    },
    /// The `flotilla.plugin` custom section is not valid metadata JSON.
    #[error("invalid {CUSTOM_SECTION} custom section: {message}")]
    Metadata {
        /// What is wrong.
        message: String,
    },
    /// Linking (import types) or the first instantiation failed.
    #[error("cannot instantiate module: {message}")]
    Instantiate {
        /// What happened.
        message: String,
    },
    /// The Wasm engine could not be created.
    #[error("cannot create the wasm engine: {message}")]
    Engine {
        /// What happened.
        message: String,
    },
}

impl LoadError {
    /// CamelCase reason, for status conditions.
    pub fn reason(&self) -> &'static str {
        match self {
            LoadError::Read { .. } => "ReadFailed",
            LoadError::DigestMismatch { .. } => "DigestMismatch",
            LoadError::Compile { .. } => "CompileFailed",
            LoadError::Limits(_) => "InvalidLimits",
            LoadError::UnknownImport { .. } => "UnknownImport",
            LoadError::MissingExport { .. } => "MissingExport",
            LoadError::AbiVersion { .. } => "AbiVersionUnsupported",
            LoadError::Metadata { .. } => "InvalidMetadata",
            LoadError::Instantiate { .. } => "InstantiateFailed",
            LoadError::Engine { .. } => "EngineFailed",
        }
    }
}

/// A compiled, checked and linked module, shared by every plugin using the same bytes.
pub struct Compiled {
    /// sha256 of the source bytes.
    pub digest: Digest,
    pub(crate) pre: InstancePre<State>,
    /// The `flotilla.plugin` section, if present.
    pub metadata: Option<Metadata>,
    /// The division strategies an assigner declared in its metadata (`None`: none declared, it is
    /// asked for every binding; see [`Metadata::strategies`]).
    pub strategies: Option<Vec<Strategy>>,
    /// The binding members the module declared it reads (every member when it declared none;
    /// see [`Metadata::binding_fields`]): what each call's `binding` carries.
    pub binding_members: SpecMembers,
    /// Which of [`export::POINTS`] the module exports.
    pub points: [bool; 5],
    /// Exports `flotilla_init_v1`.
    pub has_init: bool,
    /// Exports `flotilla_interpret_v1` (a resource interpreter).
    pub has_interpret: bool,
    /// Exports `flotilla_victims_v1` (binding preemption's victim choice).
    pub has_victims: bool,
    pub(crate) has_initialize: bool,
    /// Imports `wasi_snapshot_preview1` (runs with the deny-all context).
    pub wasi: bool,
    /// Imports, as `module.name`.
    pub imports: Vec<String>,
    /// Exports.
    pub exports: Vec<String>,
    /// Size of the Wasm binary.
    pub size: usize,
    tier: Tier,
    /// For a baseline module: where its optimized build goes (shared by every user of it).
    optimized: Option<Arc<OptimizedSlot>>,
}

impl fmt::Debug for Compiled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Compiled")
            .field("digest", &self.digest)
            .field("points", &self.points)
            .field("tier", &self.tier)
            .finish_non_exhaustive()
    }
}

impl Compiled {
    /// Does the module export the extension point `export` (one of [`export::POINTS`])?
    pub fn exports_point(&self, export: &str) -> bool {
        export::POINTS
            .iter()
            .position(|p| *p == export)
            .is_some_and(|i| self.points[i])
    }

    /// Which compiler produced the machine code.
    pub fn tier(&self) -> Tier {
        self.tier
    }

    /// For a [`Tier::Baseline`] module: the optimized build of the same module once it is ready
    /// (compiled in the background, see [`Host::compile_tiered`]); `None` before, and always
    /// for an optimized module.
    pub fn optimized(&self) -> Option<Arc<Compiled>> {
        self.optimized.as_ref().and_then(|slot| slot.get().cloned())
    }

    pub(crate) fn load(
        host: &Host,
        digest: Digest,
        bytes: &[u8],
        cache: Option<&std::path::Path>,
    ) -> Result<Compiled, LoadError> {
        let source = Source::parse(bytes)?;
        let module = match cache {
            Some(dir) => match crate::cache::load(host.engine(), dir, digest) {
                Some(m) => Ok(m),
                None => host.compile_optimized_into(dir, digest, &source.wasm),
            },
            None => host.compile_optimized(&source.wasm),
        }
        .map_err(|_| LoadError::Compile { size: bytes.len() })?;
        Compiled::link(&host.linker, digest, &source, module, Tier::Optimized, None)
    }

    /// Check `module` (compiled from `source`) against the host's imports and the ABI's
    /// exports, and link it with `linker` (the linker of the engine that compiled it).
    pub(crate) fn link(
        linker: &Linker<State>,
        digest: Digest,
        source: &Source<'_>,
        module: Module,
        tier: Tier,
        optimized: Option<Arc<OptimizedSlot>>,
    ) -> Result<Compiled, LoadError> {
        let mut wasi = false;
        let mut imports = Vec::new();
        for imp in module.imports() {
            let known = match imp.module() {
                HOST_MODULE => import::ALL.contains(&imp.name()),
                WASI_MODULE => {
                    wasi = true;
                    crate::wasi::provides(imp.name())
                }
                _ => false,
            };
            if !known {
                return Err(LoadError::UnknownImport {
                    module: crate::instance::bound_message(imp.module().to_owned()),
                    name: crate::instance::bound_message(imp.name().to_owned()),
                });
            }
            imports.push(format!("{}.{}", imp.module(), imp.name()));
        }
        let exports: Vec<String> = module.exports().map(|e| e.name().to_owned()).collect();
        let ty = |name: &str| module.get_export(name);
        if !matches!(ty(export::MEMORY), Some(ExternType::Memory(_))) {
            return Err(LoadError::MissingExport {
                name: export::MEMORY.into(),
                what: "memory",
            });
        }
        for (name, what) in [
            (export::ABI_VERSION, "func () -> i32"),
            (export::ALLOC, "func (i32) -> i32"),
            (export::DEALLOC, "func (i32, i32)"),
            (export::CLUSTERS, "func (i32, i32) -> i32"),
        ] {
            if !matches!(ty(name), Some(ExternType::Func(_))) {
                return Err(LoadError::MissingExport {
                    name: name.into(),
                    what,
                });
            }
        }
        let mut points = [false; 5];
        for (slot, name) in points.iter_mut().zip(export::POINTS) {
            *slot = matches!(ty(name), Some(ExternType::Func(_)));
        }
        let has_interpret = matches!(ty(export::INTERPRET), Some(ExternType::Func(_)));
        let has_victims = matches!(ty(export::VICTIMS), Some(ExternType::Func(_)));
        if !points.iter().any(|p| *p) && !has_interpret && !has_victims {
            return Err(LoadError::MissingExport {
                name: "flotilla_{filter,score,select,assign,override,interpret,victims}_v1".into(),
                what: "at least one extension point",
            });
        }
        let has_init = matches!(ty(export::INIT), Some(ExternType::Func(_)));
        let has_initialize = matches!(ty(export::WASI_INITIALIZE), Some(ExternType::Func(_)));
        let pre = linker
            .instantiate_pre(&module)
            .map_err(|e| LoadError::Instantiate {
                message: crate::instance::bound_message(format!("{e:#}")),
            })?;
        Ok(Compiled {
            digest,
            pre,
            metadata: source.metadata.clone(),
            strategies: source.strategies.clone(),
            binding_members: source.binding_members,
            points,
            has_init,
            has_interpret,
            has_victims,
            has_initialize,
            wasi,
            imports,
            exports,
            size: source.wasm.len(),
            tier,
            optimized,
        })
    }
}

/// Where the optimized build of a baseline module is put when ready.
pub(crate) type OptimizedSlot = OnceLock<Arc<Compiled>>;

/// Which compiler produced a module's machine code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// Cranelift: optimized code; what a module is served with once compiled (and what the
    /// on-disk cache holds).
    Optimized,
    /// Winch, the baseline compiler: several times faster to compile, slower code; serves a
    /// module compiled anew until Cranelift's code is ready.
    Baseline,
}

impl Tier {
    /// `optimized` or `baseline`.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Optimized => "optimized",
            Tier::Baseline => "baseline",
        }
    }
}

/// A module's bytes as Wasm (WAT is converted) and its checked `flotilla.plugin` metadata.
pub(crate) struct Source<'a> {
    pub(crate) wasm: std::borrow::Cow<'a, [u8]>,
    pub(crate) metadata: Option<Metadata>,
    /// The metadata's `strategies`, known by the host.
    pub(crate) strategies: Option<Vec<Strategy>>,
    /// The metadata's `bindingFields`, known by the host.
    pub(crate) binding_members: SpecMembers,
}

impl<'a> Source<'a> {
    pub(crate) fn parse(bytes: &'a [u8]) -> Result<Source<'a>, LoadError> {
        let wasm = if bytes.starts_with(b"\0asm") {
            std::borrow::Cow::Borrowed(bytes)
        } else {
            std::borrow::Cow::Owned(
                wat::parse_bytes(bytes)
                    .map_err(|_| LoadError::Compile { size: bytes.len() })?
                    .into_owned(),
            )
        };
        let metadata = match custom_section(&wasm, CUSTOM_SECTION) {
            Some(raw) => {
                let m: Metadata = serde_json::from_slice(raw).map_err(|e| LoadError::Metadata {
                    message: crate::instance::bound_message(e.to_string()),
                })?;
                if m.abi != flotilla_abi::ABI_VERSION {
                    return Err(LoadError::AbiVersion { found: m.abi });
                }
                Some(m)
            }
            None => None,
        };
        let strategies = match metadata.as_ref().map(|m| &m.strategies) {
            Some(names) if !names.is_empty() => Some(
                names
                    .iter()
                    .map(|s| Strategy::named(s).ok_or_else(|| unknown_strategy(s)))
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            _ => None,
        };
        let binding_members = match &metadata {
            Some(m) => SpecMembers::named(&m.binding_fields).map_err(|e| LoadError::Metadata {
                message: crate::instance::bound_message(format!("bindingFields: {e}")),
            })?,
            None => SpecMembers::ALL,
        };
        Ok(Source {
            wasm,
            metadata,
            strategies,
            binding_members,
        })
    }
}

/// The load error for a `strategies` entry the host does not know, listing the names it does.
fn unknown_strategy(name: &str) -> LoadError {
    let known: Vec<&str> = Strategy::ALL.iter().map(|(_, n)| *n).collect();
    LoadError::Metadata {
        message: crate::instance::bound_message(format!(
            "strategies: unknown strategy {name:?}; expected one of {}",
            known.join(", ")
        )),
    }
}

/// The first custom section named `name` (a minimal walk over the binary's sections).
pub fn custom_section<'a>(wasm: &'a [u8], name: &str) -> Option<&'a [u8]> {
    for (id, body) in sections(wasm).unwrap_or_default() {
        if id == 0 {
            let mut p = 0;
            let n = leb(body, &mut p)?;
            let section_name = body.get(p..p.checked_add(n)?)?;
            if section_name == name.as_bytes() {
                return body.get(p + n..);
            }
        }
    }
    None
}

/// The sections of a binary module, as (id, body), up to the first malformed one; `None` when
/// not even the first is well formed (or `wasm` is not a binary module).
pub(crate) fn sections(wasm: &[u8]) -> Option<Vec<(u8, &[u8])>> {
    if !wasm.starts_with(b"\0asm") || wasm.len() < 8 {
        return None;
    }
    let mut out = Vec::new();
    let mut pos = 8;
    while pos < wasm.len() {
        let id = wasm[pos];
        pos += 1;
        let Some(body) = leb(wasm, &mut pos)
            .and_then(|size| pos.checked_add(size))
            .and_then(|end| wasm.get(pos..end))
        else {
            break;
        };
        pos += body.len();
        out.push((id, body));
    }
    (!out.is_empty() || wasm.len() == 8).then_some(out)
}

/// An unsigned LEB128 at `pos` (at most 5 bytes), advancing `pos`.
pub(crate) fn leb(b: &[u8], pos: &mut usize) -> Option<usize> {
    let mut result = 0usize;
    let mut shift = 0;
    loop {
        let byte = *b.get(*pos)?;
        *pos += 1;
        result |= usize::from(byte & 0x7f).checked_shl(shift)?;
        if byte & 0x80 == 0 {
            return Some(result);
        }
        shift += 7;
        if shift > 35 {
            return None;
        }
    }
}
