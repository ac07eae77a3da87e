//! Compile time of a ~5.7 MB Go module by each compiler, and what Cranelift's incremental cache
//! saves on a new version of it:
//!
//!     cargo bench -p flotilla-wasm --bench compile      # needs `go` on PATH
//!
//! The module is examples/plugins/go-gpu-scorer with a few standard packages linked in (as the
//! controller's plugin_swap bench builds it). Versions: v1 differs from v0 by one custom section
//! only (every function the same), v2 is built from a scorer whose constant changed (`100 *` →
//! `99 *`: the guest's own code changed, the Go runtime and libraries did not). Cranelift
//! compiles v0 with an empty incremental cache, then v1 and v2 with v0's functions in it. Knob:
//! `FLOTILLA_BENCH_ROUNDS` (3): each figure is the median of that many compiles.

use std::path::Path;
use std::time::{Duration, Instant};

use flotilla_wasm::{Host, Tier};

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// go-gpu-scorer with extra packages linked in, its source passed through `edit`.
fn go_module(dir: &Path, name: &str, edit: impl Fn(String) -> String) -> Vec<u8> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let src = dir.join(name);
    std::fs::create_dir_all(&src).expect("dir");
    let example = root.join("examples/plugins/go-gpu-scorer");
    let main = std::fs::read_to_string(example.join("main.go")).expect("main.go");
    std::fs::write(src.join("main.go"), edit(main)).expect("main.go");
    let sdk = root.join("sdk/go").canonicalize().expect("sdk/go");
    std::fs::write(
        src.join("go.mod"),
        format!(
            "module flotilla.dev/bench/swap\n\ngo 1.24\n\nrequire flotilla.dev/sdk/go v0.0.0\n\nreplace flotilla.dev/sdk/go => {}\n",
            sdk.display()
        ),
    )
    .expect("go.mod");
    std::fs::write(
        src.join("extra.go"),
        "package main\n\nimport (\n\t_ \"encoding/xml\"\n\t_ \"math/big\"\n\t_ \"net/http\"\n\t_ \"regexp\"\n\t_ \"text/template\"\n)\n",
    )
    .expect("extra.go");
    let out = dir.join(format!("{name}.wasm"));
    let status = std::process::Command::new("go")
        .args(["build", "-buildmode=c-shared", "-o"])
        .arg(&out)
        .arg(".")
        .current_dir(&src)
        .env("GOOS", "wasip1")
        .env("GOARCH", "wasm")
        .status()
        .expect("go (the Go toolchain) on PATH");
    assert!(status.success(), "go build failed");
    std::fs::read(out).expect("module")
}

/// `wasm` with one more custom section: the same code under another digest.
fn tagged(wasm: &[u8], n: u32) -> Vec<u8> {
    let name = b"flotilla-bench-version";
    let mut body = vec![name.len() as u8];
    body.extend_from_slice(name);
    body.extend_from_slice(&n.to_le_bytes());
    let mut out = wasm.to_vec();
    out.push(0);
    out.push(body.len() as u8);
    out.extend_from_slice(&body);
    out
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let rounds: u32 = std::env::var("FLOTILLA_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
        .max(1);
    let tmp = tempfile::tempdir().expect("tempdir");
    let v0 = go_module(tmp.path(), "v0", |s| s);
    let changed = go_module(tmp.path(), "v2", |s| {
        assert!(
            s.contains("int64(100 * gpus(c) / best)"),
            "the scorer changed"
        );
        s.replace("int64(100 * gpus(c) / best)", "int64(99 * gpus(c) / best)")
    });
    assert_ne!(v0, changed);
    println!(
        "compile bench: a {:.1} MB Go module, {rounds} rounds; load average {}",
        v0.len() as f64 / 1e6,
        loadavg()
    );
    let host = Host::global().expect("host");
    let mut tag = 0u32;
    let mut time = |what: &str, wasm: &dyn Fn(u32) -> Vec<u8>, tier: Tier, first: bool| {
        let mut times = Vec::new();
        let mut last = (0, 0);
        for _ in 0..if first { 1 } else { rounds } {
            tag += 1;
            let bytes = wasm(tag);
            let before = host.incremental();
            let t = Instant::now();
            host.compile_with(&bytes, tier).expect("compile");
            times.push(t.elapsed());
            let after = host.incremental();
            last = (after.hits - before.hits, after.misses - before.misses);
        }
        times.sort();
        let s = host.incremental();
        println!(
            "  {what}: {:.0} ms (median of {}; min {:.0}, max {:.0}); functions from the incremental cache {} / compiled {}; cache {} entries, {:.1} MB; load average {}",
            ms(times[times.len() / 2]),
            times.len(),
            ms(times[0]),
            ms(times[times.len() - 1]),
            last.0,
            last.1,
            s.entries,
            s.bytes as f64 / 1e6,
            loadavg()
        );
    };
    time("Winch, v0", &|n| tagged(&v0, n), Tier::Baseline, false);
    time(
        "Cranelift, v0, incremental cache empty",
        &|n| tagged(&v0, n),
        Tier::Optimized,
        true,
    );
    time(
        "Cranelift, v1 (v0 + a custom section), v0 cached",
        &|n| tagged(&v0, n),
        Tier::Optimized,
        false,
    );
    time(
        "Cranelift, v2 (scorer constant changed), v0 cached, first compile",
        &|n| tagged(&changed, n),
        Tier::Optimized,
        true,
    );
    time("Winch, v2", &|n| tagged(&changed, n), Tier::Baseline, false);
    println!("done; load average {}", loadavg());
}
