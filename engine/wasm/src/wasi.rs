//! A deny-all `wasi_snapshot_preview1` for wasip1 reactors (Go's `-buildmode=c-shared`, clang's
//! `-mexec-model=reactor`): clocks and random work, stdout/stderr go to the plugin log, there are
//! no arguments, no environment, no preopened directories, no files and no sockets.
//!
//! Implemented here rather than with `wasmtime-wasi`, which pulls the component model and async
//! (about 10 minutes of clean build on 2 cores) for a context that allows nothing.

use std::hash::{BuildHasher, Hasher};
use std::time::{SystemTime, UNIX_EPOCH};

use wasmtime::{Caller, FuncType, Linker, Val, ValType};

use crate::instance::{HostFault, State, guest_memory};

/// `ERRNO_SUCCESS`.
const SUCCESS: i32 = 0;
/// `ERRNO_BADF`: no such file descriptor.
const BADF: i32 = 8;
/// `ERRNO_INVAL`.
const INVAL: i32 = 28;
/// `ERRNO_NOSYS`: not supported here.
const NOSYS: i32 = 52;
/// `ERRNO_NOTCAPABLE`.
const NOTCAPABLE: i32 = 76;

/// Every wasip1 function with its parameter types (`i` = i32, `I` = i64); all return an i32
/// errno except `proc_exit`. Functions without a real implementation below answer with the errno
/// in the third column.
const DENIED: &[(&str, &str, i32)] = &[
    ("clock_res_get", "ii", SUCCESS),
    ("fd_advise", "iIIi", BADF),
    ("fd_allocate", "iII", BADF),
    ("fd_close", "i", BADF),
    ("fd_datasync", "i", BADF),
    ("fd_fdstat_get", "ii", BADF),
    ("fd_fdstat_set_flags", "ii", BADF),
    ("fd_fdstat_set_rights", "iII", BADF),
    ("fd_filestat_get", "ii", BADF),
    ("fd_filestat_set_size", "iI", BADF),
    ("fd_filestat_set_times", "iIIi", BADF),
    ("fd_pread", "iiiIi", BADF),
    ("fd_prestat_get", "ii", BADF),
    ("fd_prestat_dir_name", "iii", BADF),
    ("fd_pwrite", "iiiIi", BADF),
    ("fd_read", "iiii", BADF),
    ("fd_readdir", "iiiIi", BADF),
    ("fd_renumber", "ii", BADF),
    ("fd_seek", "iIii", BADF),
    ("fd_sync", "i", BADF),
    ("fd_tell", "ii", BADF),
    ("path_create_directory", "iii", NOTCAPABLE),
    ("path_filestat_get", "iiiii", NOTCAPABLE),
    ("path_filestat_set_times", "iiiiIIi", NOTCAPABLE),
    ("path_link", "iiiiiii", NOTCAPABLE),
    ("path_open", "iiiiiIIii", NOTCAPABLE),
    ("path_readlink", "iiiiii", NOTCAPABLE),
    ("path_remove_directory", "iii", NOTCAPABLE),
    ("path_rename", "iiiiii", NOTCAPABLE),
    ("path_symlink", "iiiii", NOTCAPABLE),
    ("path_unlink_file", "iii", NOTCAPABLE),
    ("proc_raise", "i", NOSYS),
    ("sock_accept", "iii", NOTCAPABLE),
    ("sock_recv", "iiiiii", NOTCAPABLE),
    ("sock_send", "iiiii", NOTCAPABLE),
    ("sock_shutdown", "ii", NOTCAPABLE),
];

/// Names implemented for real below (plus [`DENIED`]); anything else a module imports from
/// `wasi_snapshot_preview1` is an unknown import.
const IMPLEMENTED: &[&str] = &[
    "args_get",
    "args_sizes_get",
    "environ_get",
    "environ_sizes_get",
    "clock_time_get",
    "random_get",
    "fd_write",
    "poll_oneoff",
    "sched_yield",
    "proc_exit",
];

/// Is `name` a wasip1 function this shim provides?
pub(crate) fn provides(name: &str) -> bool {
    IMPLEMENTED.contains(&name) || DENIED.iter().any(|(n, _, _)| *n == name)
}

fn write_u32(caller: &mut Caller<'_, State>, ptr: i32, v: u32) -> Result<(), HostFault> {
    guest_memory(caller)?.write_at(caller, ptr, &v.to_le_bytes())
}

fn write_u64(caller: &mut Caller<'_, State>, ptr: i32, v: u64) -> Result<(), HostFault> {
    guest_memory(caller)?.write_at(caller, ptr, &v.to_le_bytes())
}

/// Define the shim in `linker`.
pub(crate) fn define(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    const M: &str = flotilla_abi::WASI_MODULE;
    for (name, params, errno) in DENIED {
        let params = params
            .chars()
            .map(|c| if c == 'I' { ValType::I64 } else { ValType::I32 });
        let ty = FuncType::new(linker.engine(), params, [ValType::I32]);
        let errno = *errno;
        linker.func_new(M, name, ty, move |_, _, results: &mut [Val]| {
            results[0] = Val::I32(errno);
            Ok(())
        })?;
    }
    // No arguments and no environment: zero counts, nothing to copy.
    for name in ["args_sizes_get", "environ_sizes_get"] {
        linker.func_wrap(
            M,
            name,
            |mut c: Caller<'_, State>, count: i32, size: i32| -> wasmtime::Result<i32> {
                write_u32(&mut c, count, 0)?;
                write_u32(&mut c, size, 0)?;
                Ok(SUCCESS)
            },
        )?;
    }
    for name in ["args_get", "environ_get"] {
        linker.func_wrap(M, name, |_: Caller<'_, State>, _: i32, _: i32| -> i32 {
            SUCCESS
        })?;
    }
    linker.func_wrap(
        M,
        "clock_time_get",
        |mut c: Caller<'_, State>, id: i32, _precision: i64, out: i32| -> wasmtime::Result<i32> {
            let now = match id {
                // realtime
                0 => SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(0),
                // monotonic, process and thread CPU time: time since the instance started
                1..=3 => c.data().started.elapsed().as_nanos() as u64,
                _ => return Ok(INVAL),
            };
            write_u64(&mut c, out, now)?;
            Ok(SUCCESS)
        },
    )?;
    linker.func_wrap(
        M,
        "random_get",
        |mut c: Caller<'_, State>, ptr: i32, len: i32| -> wasmtime::Result<i32> {
            let len = usize::try_from(len).map_err(|_| HostFault::OutOfBounds)?;
            let mut bytes = Vec::with_capacity(len);
            while bytes.len() < len {
                bytes.extend_from_slice(&c.data_mut().next_random().to_le_bytes());
            }
            bytes.truncate(len);
            guest_memory(&mut c)?.write_at(&mut c, ptr, &bytes)?;
            Ok(SUCCESS)
        },
    )?;
    // stdout and stderr become log lines; every other descriptor does not exist.
    linker.func_wrap(
        M,
        "fd_write",
        |mut c: Caller<'_, State>,
         fd: i32,
         iovs: i32,
         n: i32,
         written: i32|
         -> wasmtime::Result<i32> {
            if fd != 1 && fd != 2 {
                return Ok(BADF);
            }
            let mem = guest_memory(&mut c)?;
            let mut total = 0u32;
            for i in 0..n.max(0) {
                let iov = mem.read(&c, iovs.wrapping_add(i * 8), 8)?;
                let ptr = i32::from_le_bytes([iov[0], iov[1], iov[2], iov[3]]);
                let len = i32::from_le_bytes([iov[4], iov[5], iov[6], iov[7]]);
                let text = mem.read(&c, ptr, len)?;
                total = total.wrapping_add(text.len() as u32);
                let level = if fd == 2 {
                    flotilla_abi::log_level::WARN
                } else {
                    flotilla_abi::log_level::INFO
                };
                c.data_mut().log(level, &text);
            }
            write_u32(&mut c, written, total)?;
            Ok(SUCCESS)
        },
    )?;
    // Clock subscriptions complete at once (a plugin call must not sleep); fd subscriptions fail.
    linker.func_wrap(
        M,
        "poll_oneoff",
        |mut c: Caller<'_, State>,
         subs: i32,
         events: i32,
         n: i32,
         nevents: i32|
         -> wasmtime::Result<i32> {
            let mem = guest_memory(&mut c)?;
            for i in 0..n.max(0) {
                let sub = mem.read(&c, subs.wrapping_add(i * 48), 48)?;
                let mut ev = [0u8; 32];
                ev[0..8].copy_from_slice(&sub[0..8]);
                let tag = sub[8];
                if tag != 0 {
                    ev[8..10].copy_from_slice(&(BADF as u16).to_le_bytes());
                }
                ev[10] = tag;
                mem.write_at(&mut c, events.wrapping_add(i * 32), &ev)?;
            }
            write_u32(&mut c, nevents, n.max(0) as u32)?;
            Ok(SUCCESS)
        },
    )?;
    linker.func_wrap(M, "sched_yield", || -> i32 { SUCCESS })?;
    linker.func_wrap(
        M,
        "proc_exit",
        |_: Caller<'_, State>, code: i32| -> wasmtime::Result<()> {
            Err(wasmtime::Error::new(HostFault::Exit(code)))
        },
    )?;
    Ok(())
}

/// A per-instance random stream (not cryptographic): SipHash with process-random keys over a
/// counter. Guests use `random_get` for hash seeds, not secrets.
pub(crate) fn random_u64(counter: u64) -> u64 {
    static KEYS: std::sync::OnceLock<std::collections::hash_map::RandomState> =
        std::sync::OnceLock::new();
    let mut h = KEYS.get_or_init(Default::default).build_hasher();
    h.write_u64(counter);
    h.finish()
}
