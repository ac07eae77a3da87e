//! The build mistakes `flotilla plugin inspect` and `plugin test` recognise in a module, each with
//! how to fix it. The module is read with wasmparser, so a module the host refuses to compile is
//! still explained. Messages name imports and exports only (bounded), never other module bytes.

use flotilla_abi::{HOST_MODULE, WASI_MODULE, export, import};

/// What a module imports and exports.
#[derive(Debug, Default)]
pub struct Shape {
    /// `(module, name)` of each import.
    pub imports: Vec<(String, String)>,
    /// Export names.
    pub exports: Vec<String>,
    /// The `abi` of the `flotilla.plugin` section, when there is one and it parses.
    pub metadata_abi: Option<u64>,
}

/// Longest name quoted in a message.
const NAME_MAX: usize = 80;

fn bounded(s: &str) -> String {
    if s.len() <= NAME_MAX {
        return s.escape_debug().to_string();
    }
    let mut end = NAME_MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", s[..end].escape_debug())
}

/// Read the imports and exports of `bytes` (binary Wasm, or WAT text).
///
/// # Errors
/// Neither binary Wasm nor WAT text (the message does not quote the input).
pub fn shape(bytes: &[u8]) -> Result<Shape, String> {
    let wasm = if bytes.starts_with(b"\0asm") {
        std::borrow::Cow::Borrowed(bytes)
    } else {
        match wat::parse_bytes(bytes) {
            Ok(w) => std::borrow::Cow::Owned(w.into_owned()),
            Err(_) => {
                return Err(format!(
                    "not a Wasm module ({} bytes): a .wasm file starts with the bytes \\0asm (WebAssembly text is accepted too); check the build wrote the module to this path",
                    bytes.len()
                ));
            }
        }
    };
    let mut out = Shape::default();
    for payload in wasmparser::Parser::new(0).parse_all(&wasm) {
        let payload = payload.map_err(|e| {
            format!(
                "not a valid Wasm module ({} bytes): malformed at offset {}",
                wasm.len(),
                e.offset()
            )
        })?;
        match payload {
            wasmparser::Payload::ImportSection(s) => {
                for imp in s.into_imports() {
                    let imp =
                        imp.map_err(|e| format!("malformed import section at {}", e.offset()))?;
                    out.imports
                        .push((imp.module.to_owned(), imp.name.to_owned()));
                }
            }
            wasmparser::Payload::ExportSection(s) => {
                for e in s {
                    let e = e.map_err(|e| format!("malformed export section at {}", e.offset()))?;
                    out.exports.push(e.name.to_owned());
                }
            }
            wasmparser::Payload::CustomSection(c) if c.name() == flotilla_abi::CUSTOM_SECTION => {
                out.metadata_abi = serde_json::from_slice::<serde_json::Value>(c.data())
                    .ok()
                    .and_then(|v| v["abi"].as_u64());
            }
            _ => {}
        }
    }
    Ok(out)
}

/// The fix for a missing SDK export, per language.
const SDK_EXPORTS: &str = "with the SDKs these come for free: Rust flotilla_pdk::export_plugin!, Go importing flotilla.dev/sdk/go, AssemblyScript re-exporting them from @flotilla/plugin-sdk/assembly, C flotilla.h with FLOTILLA_CLUSTERS (and clang -Wl,--export-dynamic)";

/// Every build mistake found in `shape`, one message each with its fix.
pub fn problems(shape: &Shape) -> Vec<String> {
    let mut out = Vec::new();
    let has = |name: &str| shape.exports.iter().any(|e| e == name);
    for (module, name) in &shape.imports {
        let known = match module.as_str() {
            HOST_MODULE => import::ALL.contains(&name.as_str()),
            WASI_MODULE => true,
            _ => false,
        };
        if known {
            continue;
        }
        if module == "env" && name == "abort" {
            out.push("imports env.abort (AssemblyScript's default abort handler), which the host does not provide; fix: compile with `asc ... --use abort=` (the generated build.sh does): a failed assertion then traps, which the host reports as a plugin failure".to_owned());
        } else {
            out.push(format!(
                "imports {}.{}, which the host does not provide (plugins may import only {HOST_MODULE} log, set_result, set_rows and {WASI_MODULE}); fix: drop the dependency that needs it (C: -nostdlib with flotilla.h; Rust: target wasm32-unknown-unknown; Go: GOOS=wasip1)",
                bounded(module),
                bounded(name)
            ));
        }
    }
    if has("_start") && !has(export::WASI_INITIALIZE) {
        out.push("a WASI command module (exports _start, not _initialize): the host never runs _start, so a Go module built without -buildmode=c-shared has an uninitialised runtime and its first call traps (runtime.notInitialized ... unreachable); fix: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared (C with wasi-libc: clang -mexec-model=reactor)".to_owned());
    }
    if !has(export::MEMORY) {
        out.push(format!(
            "does not export its memory ({}); fix: export the linear memory as \"memory\" (the default of every SDK toolchain; with wasm-ld do not pass --no-export-memory)",
            export::MEMORY
        ));
    }
    let missing: Vec<&str> = [
        export::ABI_VERSION,
        export::ALLOC,
        export::DEALLOC,
        export::CLUSTERS,
    ]
    .into_iter()
    .filter(|e| !has(e))
    .collect();
    if !missing.is_empty() {
        out.push(format!(
            "does not export {} (required by plugin ABI v{}); fix: {SDK_EXPORTS}",
            missing.join(", "),
            flotilla_abi::ABI_VERSION
        ));
    }
    if !export::POINTS.iter().any(|p| has(p)) && !has(export::INTERPRET) && !has(export::VICTIMS) {
        out.push(format!(
            "exports no extension point (any of {}, {}, {}); fix: Rust: list the points in export_plugin!(..., points = [...]); Go: import the point's package (flotilla.dev/sdk/go/score, ...) and call its Handle; AssemblyScript: re-export flotilla_<point>_v1 from the SDK; C: define FLOTILLA_<POINT>(...)",
            export::POINTS.join(", "),
            export::INTERPRET,
            export::VICTIMS
        ));
    }
    if let Some(abi) = shape
        .metadata_abi
        .filter(|a| *a != u64::from(flotilla_abi::ABI_VERSION))
    {
        out.push(format!(
            "its flotilla.plugin section says plugin ABI v{abi}, this host speaks v{}; fix: rebuild with the current SDK",
            flotilla_abi::ABI_VERSION
        ));
    }
    out
}

/// A fix for an error the host reported loading or calling a module, when the error is one of
/// the usual build mistakes.
pub fn hint(message: &str) -> Option<&'static str> {
    if message.contains("notInitialized") || message.contains("_start") {
        Some(
            "hint: the Go runtime was never initialised: build with GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared (a wasip1 reactor)",
        )
    } else if message.contains("env.abort") {
        Some("hint: AssemblyScript imports env.abort unless compiled with `--use abort=`")
    } else if message.contains("targets plugin ABI") || message.contains("flotilla_abi_version") {
        Some(
            "hint: the module's flotilla_abi_version does not answer the host's ABI version: rebuild with the current SDK",
        )
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems_of(wat: &str) -> Vec<String> {
        problems(&shape(wat.as_bytes()).expect("shape"))
    }

    const OK: &str = r#"(module
        (memory (export "memory") 1)
        (func (export "flotilla_abi_version") (result i32) i32.const 1)
        (func (export "flotilla_alloc") (param i32) (result i32) i32.const 0)
        (func (export "flotilla_dealloc") (param i32 i32))
        (func (export "flotilla_clusters_v1") (param i32 i32) (result i32) i32.const 0)
        (func (export "flotilla_filter_v1") (param i32 i32 i32 i32) (result i32) i32.const 0))"#;

    #[test]
    fn a_complete_module_has_no_problem() {
        assert_eq!(problems_of(OK), Vec::<String>::new());
    }

    #[test]
    fn garbage_is_not_a_module_and_is_not_quoted() {
        let e = shape(b"PK\x03\x04 secret zip").expect_err("not wasm");
        assert!(e.starts_with("not a Wasm module (15 bytes)"), "{e}");
        assert!(!e.contains("secret"), "{e}");
    }

    #[test]
    fn long_import_names_are_bounded() {
        let name = "x".repeat(10_000);
        let p = problems_of(&OK.replace(
            "(module",
            &format!(r#"(module (import "{name}" "f" (func)) "#),
        ));
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].len() < 600, "{}", p[0].len());
    }
}
