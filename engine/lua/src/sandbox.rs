//! The Lua state a customization runs in: Karmada's environment (`luavm.NewLuaState` +
//! `setLib`) on a vendored Lua 5.1, with a deadline, a memory cap and a fresh state per call.
//!
//! Opened: base, `table`, `string` (Karmada's safe variant: no `gsub`, `rep`, `dump`; inputs of at
//! most 1,000,000 bytes), `math`, `os` (only `time` and `date`) and `package` (only the preload
//! loader, so `require("kube")` works and nothing is read from disk). Disabled like Karmada does
//! (calling them raises "call function X is not supported in karmada customized
//! resourceinterpreter."): `collectgarbage`, `dofile`, `getfenv`, `getmetatable`, `load`,
//! `loadfile`, `loadstring`, `rawequal`, `rawget`, `rawset`, `setfenv`, `setmetatable`, `module`,
//! `newproxy`. Not present, as in gopher-lua without its open libraries: `io`, `debug`,
//! `coroutine`. `print` writes nothing. `tostring` of a number prints as gopher-lua does
//! (integral doubles without a fraction, others in Go's shortest form).

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use mlua::{HookTriggers, Lua, LuaOptions, StdLib, Value as LuaValue, VmState};

/// Resource limits of one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock budget of one call (Karmada: 1 s).
    pub timeout: Duration,
    /// Memory the Lua state may allocate.
    pub memory_bytes: usize,
    /// Largest result, in bytes of JSON.
    pub output_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(1),
            memory_bytes: 64 << 20,
            output_bytes: 8 << 20,
        }
    }
}

/// Largest string the safe string library accepts as input (Karmada's
/// `maxInputStringParamsLen`).
pub(crate) const MAX_STRING_PARAM: usize = 1_000_000;

/// Instructions between deadline checks.
const HOOK_EVERY: u32 = 1000;

/// The functions Karmada replaces by a stub that raises.
const DISABLED: [&str; 14] = [
    "collectgarbage",
    "dofile",
    "getfenv",
    "getmetatable",
    "load",
    "loadfile",
    "loadstring",
    "rawequal",
    "rawget",
    "rawset",
    "setfenv",
    "setmetatable",
    "module",
    "newproxy",
];

/// Lua run once in every new state, after the libraries open: Karmada's restrictions.
const PRELUDE: &str = r#"
local disabled = ...
local error, type, select = error, type, select
for _, name in ipairs(disabled) do
  _G[name] = function()
    error('call function ' .. name .. ' is not supported in karmada customized resourceinterpreter.', 2)
  end
end
coroutine = nil
gcinfo = nil
print = function() end

local function unsupported(name)
  return function()
    error('The Lua function string.' .. name .. ' is not supported by Karmada. If you believe this function is essential for your use case, please submit an issue to let us know why you need it.', 2)
  end
end
string.gsub = unsupported('gsub')
string.rep = unsupported('rep')
string.dump = unsupported('dump')
local max = MAX_STRING_PARAM
for _, name in ipairs({'byte', 'find', 'format', 'lower', 'match', 'reverse', 'sub', 'upper', 'gmatch'}) do
  local f = string[name]
  string[name] = function(s, ...)
    if type(s) == 'string' and #s > max then
      error('string length ' .. #s .. ' exceeds the maximum allowed input string length ' .. max .. ' in Karmada lua string lib, please check your lua script.', 2)
    end
    return f(s, ...)
  end
end
string.gfind = string.gmatch

os = { time = os.time, date = os.date }

local preload_loader = package.loaders[1]
package.loaders = { preload_loader }
package.path = nil
package.cpath = nil
package.seeall = nil
package.loadlib = function() error('loadlib is not supported', 2) end
"#;

/// Wraps `pcall` and `xpcall` so that an expired deadline is raised again after them.
const GUARD: &str = r#"
local expired, error = ...
local function check(...)
  if expired() then error('context deadline exceeded', 0) end
  return ...
end
local pcall, xpcall = pcall, xpcall
_G.pcall = function(...) return check(pcall(...)) end
_G.xpcall = function(...) return check(xpcall(...)) end
"#;

/// Wraps the `kube` functions: at most [`MAX_KUBE_ARGS`] arguments cross into the host.
const KUBE_WRAP: &str = r#"
local m, max = ...
local select, error, pairs = select, error, pairs
local out = {}
for k, f in pairs(m) do
  out[k] = function(...)
    if select('#', ...) > max then error('too many arguments to ' .. k, 2) end
    return f(...)
  end
end
return out
"#;

/// Most arguments a `kube` function takes (each is a host reference while it runs).
const MAX_KUBE_ARGS: usize = 1000;

/// Why a call failed.
#[derive(Debug)]
pub(crate) enum Fault {
    /// The deadline passed.
    Timeout,
    /// The memory cap was hit.
    Memory,
    /// The script raised (or could not be loaded): the message, without a traceback.
    Script(String),
    /// The result exceeds the output budget.
    TooLarge,
    /// The result (or an input) has the wrong shape.
    Invalid(String),
}

/// A Lua number as gopher-lua prints it (`LNumber.String()`): integral doubles as integers,
/// others as Go's `fmt.Sprint(float64)`.
pub(crate) fn go_number_string(n: f64) -> String {
    #[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)]
    if n.is_finite() && n.fract() == 0.0 && n.abs() < 9.2e18 {
        return (n as i64).to_string();
    }
    if n.is_nan() {
        return "NaN".into();
    }
    if n.is_infinite() {
        return if n > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    // Shortest digits, then Go's %v layout: exponent form when exp < -4 || exp >= 21.
    let e = format!("{n:e}");
    let (mantissa, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..21).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exp.abs());
    }
    format!("{n}")
}

/// A fresh state with Karmada's environment, the memory cap set.
pub(crate) fn new_state(limits: &Limits) -> mlua::Result<Lua> {
    let lua = Lua::new_with(
        StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::OS | StdLib::PACKAGE,
        LuaOptions::new(),
    )?;
    lua.set_memory_limit(limits.memory_bytes)?;
    let g = lua.globals();
    g.set("MAX_STRING_PARAM", MAX_STRING_PARAM)?;
    let disabled = lua.create_sequence_from(DISABLED)?;
    lua.load(PRELUDE)
        .set_name("=karmada")
        .call::<()>(disabled)?;
    g.raw_remove("MAX_STRING_PARAM")?;

    let tostring: mlua::Function = g.get("tostring")?;
    g.set(
        "tostring",
        lua.create_function(move |lua, v: LuaValue| match v {
            LuaValue::Number(n) => lua.create_string(go_number_string(n)).map(LuaValue::String),
            other => tostring.call::<LuaValue>(other),
        })?,
    )?;

    let preload: mlua::Table = g.get::<mlua::Table>("package")?.get("preload")?;
    preload.set(
        "kube",
        lua.create_function(|lua, ()| {
            let m = crate::kube::module(lua)?;
            lua.load(KUBE_WRAP)
                .set_name("=kube")
                .call::<mlua::Table>((m, MAX_KUBE_ARGS))
        })?,
    )?;
    Ok(lua)
}

/// Run `f` against a fresh state under the deadline; classify what went wrong.
pub(crate) fn with_state<T>(
    limits: &Limits,
    f: impl FnOnce(&Lua) -> Result<T, RunError>,
) -> Result<T, Fault> {
    let lua = new_state(limits).map_err(|e| classify(&e, false))?;
    let deadline = Instant::now() + limits.timeout;
    let expired = Rc::new(Cell::new(false));
    let flag = Rc::clone(&expired);
    lua.set_hook(
        HookTriggers::new().every_nth_instruction(HOOK_EVERY),
        move |_, _| {
            if flag.get() || Instant::now() >= deadline {
                // Raised again at every check once expired, so a pcall cannot swallow it.
                flag.set(true);
                return Err(mlua::Error::runtime("context deadline exceeded"));
            }
            Ok(VmState::Continue)
        },
    )?;
    // pcall/xpcall rethrow once the deadline has passed, so a script cannot catch it and go on
    // (in Lua, so the results stay on the Lua stack).
    let flag = Rc::clone(&expired);
    let expired_fn = lua.create_function(move |_, ()| Ok(flag.get()))?;
    lua.load(GUARD)
        .set_name("=karmada")
        .call::<()>(expired_fn)?;
    let out = f(&lua);
    let timed_out = expired.get() || Instant::now() >= deadline;
    drop(lua);
    out.map_err(|e| match e {
        RunError::Lua(e) => classify(&e, timed_out),
        RunError::Fault(f) => f,
    })
}

/// A failure inside [`with_state`]'s closure.
#[derive(Debug)]
pub(crate) enum RunError {
    /// From Lua.
    Lua(mlua::Error),
    /// Already classified (conversion failures).
    Fault(Fault),
}

impl From<mlua::Error> for RunError {
    fn from(e: mlua::Error) -> Self {
        RunError::Lua(e)
    }
}

impl From<Fault> for RunError {
    fn from(f: Fault) -> Self {
        RunError::Fault(f)
    }
}

impl From<mlua::Error> for Fault {
    fn from(e: mlua::Error) -> Self {
        classify(&e, false)
    }
}

fn is_memory(e: &mlua::Error) -> bool {
    match e {
        mlua::Error::MemoryError(_) => true,
        mlua::Error::CallbackError { cause, .. } => is_memory(cause),
        mlua::Error::WithContext { cause, .. } => is_memory(cause),
        _ => false,
    }
}

/// The message of a Lua error without mlua's traceback.
pub(crate) fn message(e: &mlua::Error) -> String {
    let text = match e {
        mlua::Error::CallbackError { cause, .. } => return message(cause),
        mlua::Error::WithContext { cause, .. } => return message(cause),
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        mlua::Error::RuntimeError(m) => m.clone(),
        other => other.to_string(),
    };
    let text = match text.find("\nstack traceback:") {
        Some(i) => text[..i].to_owned(),
        None => text,
    };
    text.trim_end().to_owned()
}

fn classify(e: &mlua::Error, timed_out: bool) -> Fault {
    if timed_out {
        Fault::Timeout
    } else if is_memory(e) {
        Fault::Memory
    } else {
        Fault::Script(message(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_as_gopher_lua_prints_them() {
        for (n, s) in [
            (2.0, "2"),
            (-3.0, "-3"),
            (0.5, "0.5"),
            (1.0 / 3.0, "0.3333333333333333"),
            (1e15, "1000000000000000"),
            (1e21, "1e+21"),
            (0.00001, "1e-05"),
            (0.0001, "0.0001"),
            (f64::NAN, "NaN"),
        ] {
            assert_eq!(go_number_string(n), s, "{n}");
        }
    }

    fn eval(src: &str) -> Result<String, Fault> {
        with_state(&Limits::default(), |lua| {
            Ok(lua.load(src).set_name("=test").eval::<String>()?)
        })
    }

    #[test]
    fn environment_is_karmadas() {
        assert_eq!(
            eval("return tostring(2) .. ' ' .. tostring(1.5)").unwrap(),
            "2 1.5"
        );
        assert_eq!(
            eval("return type(io) .. type(debug) .. type(coroutine)").unwrap(),
            "nilnilnil"
        );
        assert_eq!(
            eval("return type(os.time()) .. tostring(os.exit)").unwrap(),
            "numbernil"
        );
        assert_eq!(
            eval("return require('kube').resourceAdd('1', '500m')").unwrap(),
            "1500m"
        );
        for bad in [
            "local f = load('return 1')",
            "local t = setmetatable({}, {})",
            "local v = rawget({}, 1)",
            "local x = dofile('/etc/passwd')",
        ] {
            let Err(Fault::Script(m)) = eval(bad) else {
                panic!("{bad} ran");
            };
            assert!(m.contains("is not supported in karmada"), "{m}");
            assert!(m.starts_with("test:1:"), "{m}");
        }
        let Err(Fault::Script(m)) = eval("return require('io')") else {
            panic!()
        };
        assert!(m.contains("module 'io' not found"), "{m}");
        let Err(Fault::Script(m)) = eval("return string.rep('x', 10)") else {
            panic!()
        };
        assert!(m.contains("string.rep is not supported"), "{m}");
        let Err(Fault::Script(m)) = eval("return ('x'):gsub('x', 'y')") else {
            panic!()
        };
        assert!(m.contains("string.gsub is not supported"), "{m}");
    }
}
