//! The Kubernetes CEL libraries (quantity, semver, regex, lists, sets, url, ip/cidr,
//! jsonpatch), written for the `cel` crate's `Val` API.
//!
//! Function names, receivers and results follow `k8s.io/apiserver/pkg/cel/library`; the format
//! library (`"%s".format([...])`) and the string extensions come from `cel::extensions::strings`.

use std::any::Any;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::net::IpAddr;

use cel::common::types::{
    self, CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelString, Type,
};
use cel::common::value::{CowVal, StaticVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

type Ret<'b, 'v> = Result<CowVal<'b, 'v>, ExecutionError>;

/// Registers every library on `env`.
///
/// # Errors
/// An overload is already declared (a programming error).
pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    for t in [&QUANTITY, &SEMVER, &IP, &CIDR, &URL] {
        env.add_type(t.to_owned())?;
    }
    quantity(env)?;
    semver_lib(env)?;
    net(env)?;
    url(env)?;
    regex_lib(env)?;
    lists(env)?;
    sets(env)?;
    env.add_overload(
        "jsonpatch.escapeKey",
        "jsonpatch_escape_key_string",
        vec![types::STRING_TYPE],
        escape_key,
    )?;
    Ok(())
}

macro_rules! opaque {
    ($t:ident, $name:literal, $ty:ident) => {
        /// The CEL type of the values of this library.
        pub(crate) static $ty: Type = Type::new_unspecified_type($name);

        impl Val for $t {
            fn get_type(&self) -> &Type {
                &$ty
            }
            fn cel_type() -> &'static Type {
                &$ty
            }
            fn equals(&self, other: &dyn Val) -> bool {
                other.downcast_ref::<$t>().is_some_and(|o| o == self)
            }
            fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
                Box::new(self.clone())
            }
            fn as_any(&self) -> Option<&dyn Any> {
                Some(self)
            }
        }

        impl StaticVal for $t {}
    };
}

fn fail(function: &str, message: impl ToString) -> ExecutionError {
    ExecutionError::function_error(function, message)
}

fn arg<'a, T: StaticVal>(
    args: &'a [CowVal<'_, '_>],
    i: usize,
    function: &str,
) -> Result<&'a T, ExecutionError> {
    args.get(i)
        .and_then(|a| a.as_any())
        .and_then(|a| a.downcast_ref::<T>())
        .ok_or_else(|| fail(function, format!("argument {i} has the wrong type")))
}

fn text<'a>(
    args: &'a [CowVal<'_, '_>],
    i: usize,
    function: &str,
) -> Result<&'a str, ExecutionError> {
    args.get(i)
        .and_then(|a| a.downcast_ref::<CelString<'_>>())
        .map(CelString::inner)
        .ok_or_else(|| fail(function, format!("argument {i} is not a string")))
}

fn int(args: &[CowVal<'_, '_>], i: usize, function: &str) -> Result<i64, ExecutionError> {
    args.get(i)
        .and_then(|a| a.downcast_ref::<CelInt>())
        .map(|v| *v.inner())
        .ok_or_else(|| fail(function, format!("argument {i} is not an int")))
}

fn list<'a, 'v>(
    args: &'a [CowVal<'_, 'v>],
    i: usize,
    function: &str,
) -> Result<&'a [Box<dyn Val + 'v>], ExecutionError> {
    args.get(i)
        .and_then(|a| a.downcast_ref::<CelList<'_>>())
        .map(CelList::inner)
        .ok_or_else(|| fail(function, format!("argument {i} is not a list")))
}

fn ret<'b, 'v>(v: impl Val + 'v) -> Ret<'b, 'v> {
    Ok(CowVal::owned(v))
}

fn boolean<'b, 'v>(b: bool) -> Ret<'b, 'v> {
    ret(CelBool::from(b))
}

fn ordering<'b, 'v>(o: Ordering) -> Ret<'b, 'v> {
    ret(CelInt::from(o as i64))
}

// ---------------------------------------------------------------------------------------------
// quantity

/// A Kubernetes resource quantity, held exactly in nano-units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Quantity(i128);
opaque!(Quantity, "kubernetes.Quantity", QUANTITY);

const NANO: i128 = 1_000_000_000;

fn parse_quantity(s: &str) -> Result<Quantity, ExecutionError> {
    flotilla_core::quantity::parse_nano(s)
        .map(Quantity)
        .map_err(|e| fail("quantity", format!("{s:?}: {e}")))
}

fn quantity(env: &mut Env) -> Result<(), DeclarationError> {
    let q = || QUANTITY.to_owned();
    env.add_overload(
        "quantity",
        "string_to_quantity",
        vec![types::STRING_TYPE],
        |a| ret(parse_quantity(text(&a, 0, "quantity")?)?),
    )?;
    env.add_overload(
        "isQuantity",
        "is_quantity_string",
        vec![types::STRING_TYPE],
        |a| boolean(flotilla_core::quantity::parse_nano(text(&a, 0, "isQuantity")?).is_ok()),
    )?;
    env.add_member_overload("sign", "quantity_sign", q(), vec![], |a| {
        ret(CelInt::from(
            arg::<Quantity>(&a, 0, "sign")?.0.signum() as i64
        ))
    })?;
    env.add_member_overload("isInteger", "quantity_is_integer", q(), vec![], |a| {
        let v = arg::<Quantity>(&a, 0, "isInteger")?.0;
        boolean(v % NANO == 0 && i64::try_from(v / NANO).is_ok())
    })?;
    env.add_member_overload("asInteger", "quantity_as_integer", q(), vec![], |a| {
        let v = arg::<Quantity>(&a, 0, "asInteger")?.0;
        if v % NANO != 0 {
            return Err(fail("asInteger", "quantity is not an integer"));
        }
        let i = i64::try_from(v / NANO).map_err(|_| fail("asInteger", "quantity overflows int"))?;
        ret(CelInt::from(i))
    })?;
    env.add_member_overload(
        "asApproximateFloat",
        "quantity_as_float",
        q(),
        vec![],
        |a| {
            ret(CelDouble::from(
                arg::<Quantity>(&a, 0, "asApproximateFloat")?.0 as f64 / NANO as f64,
            ))
        },
    )?;
    fn operand(a: &[CowVal<'_, '_>], f: &str) -> Result<i128, ExecutionError> {
        if let Some(i) = a.get(1).and_then(|v| v.downcast_ref::<CelInt>()) {
            return Ok(i128::from(*i.inner()) * NANO);
        }
        Ok(arg::<Quantity>(a, 1, f)?.0)
    }
    for (name, sign) in [("add", 1i128), ("sub", -1)] {
        let f = if sign > 0 {
            (|a: Vec<CowVal<'_, '_>>| {
                let v = arg::<Quantity>(&a, 0, "add")?
                    .0
                    .checked_add(operand(&a, "add")?);
                ret(Quantity(v.ok_or_else(|| fail("add", "overflow"))?))
            }) as cel::common::functions::Function
        } else {
            |a: Vec<CowVal<'_, '_>>| {
                let v = arg::<Quantity>(&a, 0, "sub")?
                    .0
                    .checked_sub(operand(&a, "sub")?);
                ret(Quantity(v.ok_or_else(|| fail("sub", "overflow"))?))
            }
        };
        env.add_member_overload(
            name,
            &format!("quantity_{name}_quantity"),
            q(),
            vec![q()],
            f,
        )?;
        env.add_member_overload(
            name,
            &format!("quantity_{name}_int"),
            q(),
            vec![types::INT_TYPE],
            f,
        )?;
    }
    env.add_member_overload(
        "isGreaterThan",
        "quantity_is_greater_than",
        q(),
        vec![q()],
        |a| {
            boolean(
                arg::<Quantity>(&a, 0, "isGreaterThan")? > arg::<Quantity>(&a, 1, "isGreaterThan")?,
            )
        },
    )?;
    env.add_member_overload("isLessThan", "quantity_is_less_than", q(), vec![q()], |a| {
        boolean(arg::<Quantity>(&a, 0, "isLessThan")? < arg::<Quantity>(&a, 1, "isLessThan")?)
    })?;
    env.add_member_overload("compareTo", "quantity_compare_to", q(), vec![q()], |a| {
        ordering(arg::<Quantity>(&a, 0, "compareTo")?.cmp(arg::<Quantity>(&a, 1, "compareTo")?))
    })?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// semver

/// A semantic version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Semver(semver::Version);
opaque!(Semver, "kubernetes.Semver", SEMVER);

fn parse_semver(s: &str, normalize: bool) -> Result<semver::Version, String> {
    let mut s = s.to_owned();
    if normalize {
        s = s.strip_prefix('v').map(str::to_owned).unwrap_or(s);
        let (core, rest) = match s.find(['-', '+']) {
            Some(i) => (s[..i].to_owned(), s[i..].to_owned()),
            None => (s.clone(), String::new()),
        };
        let mut parts: Vec<String> = core
            .split('.')
            .map(|p| p.trim_start_matches('0').to_owned())
            .map(|p| if p.is_empty() { "0".to_owned() } else { p })
            .collect();
        while parts.len() < 3 {
            parts.push("0".into());
        }
        s = format!("{}{rest}", parts.join("."));
    }
    semver::Version::parse(&s).map_err(|e| e.to_string())
}

fn semver_lib(env: &mut Env) -> Result<(), DeclarationError> {
    let v = || SEMVER.to_owned();
    env.add_overload(
        "semver",
        "string_to_semver",
        vec![types::STRING_TYPE],
        |a| {
            let s = text(&a, 0, "semver")?;
            ret(Semver(
                parse_semver(s, false).map_err(|e| fail("semver", format!("{s:?}: {e}")))?,
            ))
        },
    )?;
    env.add_overload(
        "semver",
        "string_bool_to_semver",
        vec![types::STRING_TYPE, types::BOOL_TYPE],
        |a| {
            let s = text(&a, 0, "semver")?;
            let n = a
                .get(1)
                .and_then(|b| b.downcast_ref::<CelBool>())
                .is_some_and(|b| *b.inner());
            ret(Semver(
                parse_semver(s, n).map_err(|e| fail("semver", format!("{s:?}: {e}")))?,
            ))
        },
    )?;
    env.add_overload(
        "isSemver",
        "is_semver_string",
        vec![types::STRING_TYPE],
        |a| boolean(parse_semver(text(&a, 0, "isSemver")?, false).is_ok()),
    )?;
    env.add_overload(
        "isSemver",
        "is_semver_string_bool",
        vec![types::STRING_TYPE, types::BOOL_TYPE],
        |a| {
            let n = a
                .get(1)
                .and_then(|b| b.downcast_ref::<CelBool>())
                .is_some_and(|b| *b.inner());
            boolean(parse_semver(text(&a, 0, "isSemver")?, n).is_ok())
        },
    )?;
    env.add_member_overload("major", "semver_major", v(), vec![], |a| {
        ret(CelInt::from(arg::<Semver>(&a, 0, "major")?.0.major as i64))
    })?;
    env.add_member_overload("minor", "semver_minor", v(), vec![], |a| {
        ret(CelInt::from(arg::<Semver>(&a, 0, "minor")?.0.minor as i64))
    })?;
    env.add_member_overload("patch", "semver_patch", v(), vec![], |a| {
        ret(CelInt::from(arg::<Semver>(&a, 0, "patch")?.0.patch as i64))
    })?;
    fn cmp(a: &[CowVal<'_, '_>], f: &str) -> Result<Ordering, ExecutionError> {
        Ok(arg::<Semver>(a, 0, f)?
            .0
            .cmp_precedence(&arg::<Semver>(a, 1, f)?.0))
    }
    env.add_member_overload(
        "isGreaterThan",
        "semver_is_greater_than",
        v(),
        vec![v()],
        |a| boolean(cmp(&a, "isGreaterThan")? == Ordering::Greater),
    )?;
    env.add_member_overload("isLessThan", "semver_is_less_than", v(), vec![v()], |a| {
        boolean(cmp(&a, "isLessThan")? == Ordering::Less)
    })?;
    env.add_member_overload("compareTo", "semver_compare_to", v(), vec![v()], |a| {
        ordering(cmp(&a, "compareTo")?)
    })?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// ip / cidr

/// An IP address (no zone, no IPv4-mapped IPv6, as the Kubernetes library requires).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ip(IpAddr);
opaque!(Ip, "net.IP", IP);

/// A CIDR: an address and a prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cidr(IpAddr, u8);
opaque!(Cidr, "net.CIDR", CIDR);

fn parse_ip(s: &str) -> Result<IpAddr, String> {
    let ip: IpAddr = s
        .parse()
        .map_err(|_| format!("IP address {s:?} is not valid"))?;
    if let IpAddr::V6(v6) = ip
        && v6.to_ipv4_mapped().is_some()
    {
        return Err(format!("IPv4-mapped IPv6 address {s:?} is not allowed"));
    }
    Ok(ip)
}

fn parse_cidr(s: &str) -> Result<Cidr, String> {
    let (addr, len) = s
        .split_once('/')
        .ok_or_else(|| format!("network address {s:?} is not a CIDR"))?;
    let ip = parse_ip(addr)?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let len: u8 = len
        .parse()
        .ok()
        .filter(|l| *l <= max)
        .ok_or_else(|| format!("network address {s:?} has an invalid prefix length"))?;
    Ok(Cidr(ip, len))
}

fn bits(ip: IpAddr) -> (u128, u8) {
    match ip {
        IpAddr::V4(v) => (u128::from(u32::from(v)), 32),
        IpAddr::V6(v) => (u128::from(v), 128),
    }
}

fn mask(ip: IpAddr, len: u8) -> IpAddr {
    let (b, width) = bits(ip);
    let m = if len == 0 {
        0
    } else {
        (!0u128) << (width - len) & if width == 32 { 0xffff_ffff } else { !0u128 }
    };
    let v = b & m;
    match ip {
        IpAddr::V4(_) => IpAddr::V4(std::net::Ipv4Addr::from(v as u32)),
        IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::from(v)),
    }
}

fn cidr_contains(c: &Cidr, ip: IpAddr) -> bool {
    c.0.is_ipv4() == ip.is_ipv4() && mask(ip, c.1) == mask(c.0, c.1)
}

fn net(env: &mut Env) -> Result<(), DeclarationError> {
    let ip = || IP.to_owned();
    let cidr = || CIDR.to_owned();
    env.add_overload("ip", "string_to_ip", vec![types::STRING_TYPE], |a| {
        ret(Ip(parse_ip(text(&a, 0, "ip")?).map_err(|e| fail("ip", e))?))
    })?;
    env.add_overload("isIP", "is_ip_string", vec![types::STRING_TYPE], |a| {
        boolean(parse_ip(text(&a, 0, "isIP")?).is_ok())
    })?;
    env.add_overload(
        "ip.isCanonical",
        "ip_is_canonical_string",
        vec![types::STRING_TYPE],
        |a| {
            let s = text(&a, 0, "ip.isCanonical")?;
            let ip = parse_ip(s).map_err(|e| fail("ip.isCanonical", e))?;
            boolean(ip.to_string() == s)
        },
    )?;
    env.add_overload("string", "ip_to_string", vec![ip()], |a| {
        ret(CelString::from(arg::<Ip>(&a, 0, "string")?.0.to_string()))
    })?;
    env.add_member_overload("family", "ip_family", ip(), vec![], |a| {
        ret(CelInt::from(if arg::<Ip>(&a, 0, "family")?.0.is_ipv4() {
            4
        } else {
            6
        }))
    })?;
    env.add_member_overload("isUnspecified", "ip_is_unspecified", ip(), vec![], |a| {
        boolean(arg::<Ip>(&a, 0, "isUnspecified")?.0.is_unspecified())
    })?;
    env.add_member_overload("isLoopback", "ip_is_loopback", ip(), vec![], |a| {
        boolean(arg::<Ip>(&a, 0, "isLoopback")?.0.is_loopback())
    })?;
    env.add_member_overload(
        "isLinkLocalMulticast",
        "ip_is_link_local_multicast",
        ip(),
        vec![],
        |a| {
            boolean(match arg::<Ip>(&a, 0, "isLinkLocalMulticast")?.0 {
                IpAddr::V4(v) => v.octets()[..3] == [224, 0, 0],
                IpAddr::V6(v) => v.segments()[0] & 0xff0f == 0xff02,
            })
        },
    )?;
    env.add_member_overload(
        "isLinkLocalUnicast",
        "ip_is_link_local_unicast",
        ip(),
        vec![],
        |a| {
            boolean(match arg::<Ip>(&a, 0, "isLinkLocalUnicast")?.0 {
                IpAddr::V4(v) => v.is_link_local(),
                IpAddr::V6(v) => v.segments()[0] & 0xffc0 == 0xfe80,
            })
        },
    )?;
    env.add_member_overload(
        "isGlobalUnicast",
        "ip_is_global_unicast",
        ip(),
        vec![],
        |a| {
            let v = arg::<Ip>(&a, 0, "isGlobalUnicast")?.0;
            let special = v.is_unspecified() || v.is_loopback() || v.is_multicast();
            let link_local = match v {
                IpAddr::V4(x) => x.is_link_local() || x.is_broadcast(),
                IpAddr::V6(x) => x.segments()[0] & 0xffc0 == 0xfe80,
            };
            boolean(!special && !link_local)
        },
    )?;
    env.add_overload("cidr", "string_to_cidr", vec![types::STRING_TYPE], |a| {
        ret(parse_cidr(text(&a, 0, "cidr")?).map_err(|e| fail("cidr", e))?)
    })?;
    env.add_overload("isCIDR", "is_cidr_string", vec![types::STRING_TYPE], |a| {
        boolean(parse_cidr(text(&a, 0, "isCIDR")?).is_ok())
    })?;
    env.add_overload("string", "cidr_to_string", vec![cidr()], |a| {
        let c = arg::<Cidr>(&a, 0, "string")?;
        ret(CelString::from(format!("{}/{}", c.0, c.1)))
    })?;
    env.add_member_overload(
        "containsIP",
        "cidr_contains_ip_ip",
        cidr(),
        vec![ip()],
        |a| {
            boolean(cidr_contains(
                arg::<Cidr>(&a, 0, "containsIP")?,
                arg::<Ip>(&a, 1, "containsIP")?.0,
            ))
        },
    )?;
    env.add_member_overload(
        "containsIP",
        "cidr_contains_ip_string",
        cidr(),
        vec![types::STRING_TYPE],
        |a| {
            let ip = parse_ip(text(&a, 1, "containsIP")?).map_err(|e| fail("containsIP", e))?;
            boolean(cidr_contains(arg::<Cidr>(&a, 0, "containsIP")?, ip))
        },
    )?;
    fn contains_cidr(outer: &Cidr, inner: &Cidr) -> bool {
        inner.1 >= outer.1 && cidr_contains(outer, inner.0)
    }
    env.add_member_overload(
        "containsCIDR",
        "cidr_contains_cidr",
        cidr(),
        vec![cidr()],
        |a| {
            boolean(contains_cidr(
                arg::<Cidr>(&a, 0, "containsCIDR")?,
                arg::<Cidr>(&a, 1, "containsCIDR")?,
            ))
        },
    )?;
    env.add_member_overload(
        "containsCIDR",
        "cidr_contains_cidr_string",
        cidr(),
        vec![types::STRING_TYPE],
        |a| {
            let inner =
                parse_cidr(text(&a, 1, "containsCIDR")?).map_err(|e| fail("containsCIDR", e))?;
            boolean(contains_cidr(arg::<Cidr>(&a, 0, "containsCIDR")?, &inner))
        },
    )?;
    env.add_member_overload("ip", "cidr_ip", cidr(), vec![], |a| {
        ret(Ip(arg::<Cidr>(&a, 0, "ip")?.0))
    })?;
    env.add_member_overload("masked", "cidr_masked", cidr(), vec![], |a| {
        let c = arg::<Cidr>(&a, 0, "masked")?;
        ret(Cidr(mask(c.0, c.1), c.1))
    })?;
    env.add_member_overload("prefixLength", "cidr_prefix_length", cidr(), vec![], |a| {
        ret(CelInt::from(i64::from(
            arg::<Cidr>(&a, 0, "prefixLength")?.1,
        )))
    })?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// url

/// A parsed URL (`scheme://[userinfo@]host[:port]/path?query#fragment`, or an absolute path).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Url {
    scheme: String,
    host: String,
    path: String,
    query: String,
}
opaque!(Url, "kubernetes.URL", URL);

fn parse_url(s: &str) -> Result<Url, String> {
    let bad = || format!("URL {s:?} is not a valid absolute URI or absolute path");
    if s.is_empty() || s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad());
    }
    let no_fragment = s.split_once('#').map_or(s, |(a, _)| a);
    let (rest, query) = no_fragment
        .split_once('?')
        .map_or((no_fragment, ""), |(a, q)| (a, q));
    let (scheme, rest) = match rest.split_once(':') {
        Some((sch, r))
            if !sch.is_empty()
                && sch.starts_with(|c: char| c.is_ascii_alphabetic())
                && sch
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) =>
        {
            (sch.to_owned(), r)
        }
        _ if rest.starts_with('/') => (String::new(), rest),
        _ => return Err(bad()),
    };
    let (host, path) = match rest.strip_prefix("//") {
        Some(r) => {
            let end = r.find('/').unwrap_or(r.len());
            let authority = &r[..end];
            let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
            (host.to_owned(), r[end..].to_owned())
        }
        None => (String::new(), rest.to_owned()),
    };
    Ok(Url {
        scheme,
        host,
        path,
        query: query.to_owned(),
    })
}

fn split_host(host: &str) -> (&str, &str) {
    if let Some(rest) = host.strip_prefix('[') {
        return match rest.split_once(']') {
            Some((h, p)) => (h, p.strip_prefix(':').unwrap_or("")),
            None => (rest, ""),
        };
    }
    match host.rsplit_once(':') {
        Some((h, p)) if p.chars().all(|c| c.is_ascii_digit()) => (h, p),
        _ => (host, ""),
    }
}

fn url(env: &mut Env) -> Result<(), DeclarationError> {
    let u = || URL.to_owned();
    env.add_overload("url", "string_to_url", vec![types::STRING_TYPE], |a| {
        ret(parse_url(text(&a, 0, "url")?).map_err(|e| fail("url", e))?)
    })?;
    env.add_overload("isURL", "is_url_string", vec![types::STRING_TYPE], |a| {
        boolean(parse_url(text(&a, 0, "isURL")?).is_ok())
    })?;
    env.add_member_overload("getScheme", "url_get_scheme", u(), vec![], |a| {
        ret(CelString::from(
            arg::<Url>(&a, 0, "getScheme")?.scheme.clone(),
        ))
    })?;
    env.add_member_overload("getHost", "url_get_host", u(), vec![], |a| {
        ret(CelString::from(arg::<Url>(&a, 0, "getHost")?.host.clone()))
    })?;
    env.add_member_overload("getHostname", "url_get_hostname", u(), vec![], |a| {
        ret(CelString::from(
            split_host(&arg::<Url>(&a, 0, "getHostname")?.host)
                .0
                .to_owned(),
        ))
    })?;
    env.add_member_overload("getPort", "url_get_port", u(), vec![], |a| {
        ret(CelString::from(
            split_host(&arg::<Url>(&a, 0, "getPort")?.host).1.to_owned(),
        ))
    })?;
    env.add_member_overload("getEscapedPath", "url_get_escaped_path", u(), vec![], |a| {
        ret(CelString::from(
            arg::<Url>(&a, 0, "getEscapedPath")?.path.clone(),
        ))
    })?;
    env.add_member_overload("getQuery", "url_get_query", u(), vec![], |a| {
        let q = &arg::<Url>(&a, 0, "getQuery")?.query;
        let mut grouped: Vec<(String, Vec<String>)> = Vec::new();
        for pair in q.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            match grouped.iter_mut().find(|(key, _)| key == k) {
                Some((_, vs)) => vs.push(v.to_owned()),
                None => grouped.push((k.to_owned(), vec![v.to_owned()])),
            }
        }
        let map: HashMap<CelMapKey<'_>, Box<dyn Val>> = grouped
            .into_iter()
            .map(|(k, vs)| {
                let l: Vec<Box<dyn Val>> = vs
                    .into_iter()
                    .map(|v| Box::new(CelString::from(v)) as Box<dyn Val>)
                    .collect();
                (
                    CelMapKey::from(k),
                    Box::new(CelList::from(l)) as Box<dyn Val>,
                )
            })
            .collect();
        ret(CelMap::from(map))
    })?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// regex

/// Compiled patterns, shared by every evaluation: patterns are almost always literals, and
/// compiling one costs far more than matching it. Bounded: cleared when full.
fn compile_regex(
    pattern: &str,
    function: &str,
) -> Result<std::sync::Arc<regex::Regex>, ExecutionError> {
    use std::sync::{Arc, Mutex, OnceLock};
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<regex::Regex>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Mutex::default);
    if let Some(re) = cache.lock().ok().and_then(|c| c.get(pattern).cloned()) {
        return Ok(re);
    }
    let re = Arc::new(
        regex::RegexBuilder::new(pattern)
            .size_limit(1 << 20)
            .build()
            .map_err(|e| fail(function, e))?,
    );
    if let Ok(mut c) = cache.lock() {
        if c.len() >= 256 {
            c.clear();
        }
        c.insert(pattern.to_owned(), Arc::clone(&re));
    }
    Ok(re)
}

fn regex_lib(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_member_overload(
        "find",
        "string_find_string",
        types::STRING_TYPE,
        vec![types::STRING_TYPE],
        |a| {
            let re = compile_regex(text(&a, 1, "find")?, "find")?;
            ret(CelString::from(
                re.find(text(&a, 0, "find")?)
                    .map(|m| m.as_str().to_owned())
                    .unwrap_or_default(),
            ))
        },
    )?;
    fn find_all<'b, 'v>(a: &[CowVal<'b, 'v>], limit: i64) -> Ret<'b, 'v> {
        let re = compile_regex(text(a, 1, "findAll")?, "findAll")?;
        let limit = if limit < 0 {
            usize::MAX
        } else {
            usize::try_from(limit).unwrap_or(usize::MAX)
        };
        let found: Vec<Box<dyn Val>> = re
            .find_iter(text(a, 0, "findAll")?)
            .take(limit)
            .map(|m| Box::new(CelString::from(m.as_str().to_owned())) as Box<dyn Val>)
            .collect();
        ret(CelList::from(found))
    }
    env.add_member_overload(
        "findAll",
        "string_find_all_string",
        types::STRING_TYPE,
        vec![types::STRING_TYPE],
        |a| find_all(&a, -1),
    )?;
    env.add_member_overload(
        "findAll",
        "string_find_all_string_int",
        types::STRING_TYPE,
        vec![types::STRING_TYPE, types::INT_TYPE],
        |a| {
            let n = int(&a, 2, "findAll")?;
            find_all(&a, n)
        },
    )?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// lists and sets

fn compare(a: &dyn Val, b: &dyn Val, function: &str) -> Result<Ordering, ExecutionError> {
    a.as_comparer()
        .ok_or_else(|| {
            fail(
                function,
                format!("{} values are not comparable", a.get_type().name()),
            )
        })?
        .compare(b)
}

fn lists(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_member_overload(
        "isSorted",
        "list_is_sorted",
        types::LIST_TYPE,
        vec![],
        |a| {
            let l = list(&a, 0, "isSorted")?;
            for w in l.windows(2) {
                if compare(w[0].as_ref(), w[1].as_ref(), "isSorted")? == Ordering::Greater {
                    return boolean(false);
                }
            }
            boolean(true)
        },
    )?;
    env.add_member_overload("sum", "list_sum", types::LIST_TYPE, vec![], |a| {
        let l = list(&a, 0, "sum")?;
        if l.iter().all(|v| v.downcast_ref::<CelInt>().is_some()) {
            let mut s: i64 = 0;
            for v in l {
                let i = v.downcast_ref::<CelInt>().map_or(0, |i| *i.inner());
                s = s
                    .checked_add(i)
                    .ok_or_else(|| fail("sum", "integer overflow"))?;
            }
            return ret(CelInt::from(s));
        }
        if l.iter().all(|v| v.downcast_ref::<CelDouble>().is_some()) {
            return ret(CelDouble::from(
                l.iter()
                    .filter_map(|v| v.downcast_ref::<CelDouble>())
                    .map(|d| *d.inner())
                    .sum::<f64>(),
            ));
        }
        if l.iter().all(|v| v.downcast_ref::<Quantity>().is_some()) {
            let mut s: i128 = 0;
            for q in l.iter().filter_map(|v| v.downcast_ref::<Quantity>()) {
                s = s.checked_add(q.0).ok_or_else(|| fail("sum", "overflow"))?;
            }
            return ret(Quantity(s));
        }
        Err(fail(
            "sum",
            "list elements must all be int, all double or all quantities",
        ))
    })?;
    fn extreme<'b, 'v>(a: Vec<CowVal<'b, 'v>>, want: Ordering, function: &str) -> Ret<'b, 'v> {
        let l = list(&a, 0, function)?;
        let mut best = l
            .first()
            .ok_or_else(|| fail(function, "list is empty"))?
            .as_ref();
        for v in &l[1..] {
            if compare(v.as_ref(), best, function)? == want {
                best = v.as_ref();
            }
        }
        Ok(CowVal::Owned(best.clone_as_boxed()))
    }
    env.add_member_overload("min", "list_min", types::LIST_TYPE, vec![], |a| {
        extreme(a, Ordering::Less, "min")
    })?;
    env.add_member_overload("max", "list_max", types::LIST_TYPE, vec![], |a| {
        extreme(a, Ordering::Greater, "max")
    })?;
    env.add_member_overload(
        "indexOf",
        "list_index_of",
        types::LIST_TYPE,
        vec![types::DYN_TYPE],
        |a| {
            let l = list(&a, 0, "indexOf")?;
            let x = a
                .get(1)
                .ok_or_else(|| fail("indexOf", "missing argument"))?;
            ret(CelInt::from(
                l.iter()
                    .position(|v| v.equals(x.as_ref()))
                    .map_or(-1, |i| i as i64),
            ))
        },
    )?;
    env.add_member_overload(
        "lastIndexOf",
        "list_last_index_of",
        types::LIST_TYPE,
        vec![types::DYN_TYPE],
        |a| {
            let l = list(&a, 0, "lastIndexOf")?;
            let x = a
                .get(1)
                .ok_or_else(|| fail("lastIndexOf", "missing argument"))?;
            ret(CelInt::from(
                l.iter()
                    .rposition(|v| v.equals(x.as_ref()))
                    .map_or(-1, |i| i as i64),
            ))
        },
    )?;
    Ok(())
}

fn sets(env: &mut Env) -> Result<(), DeclarationError> {
    fn contains_all(outer: &[Box<dyn Val + '_>], inner: &[Box<dyn Val + '_>]) -> bool {
        inner
            .iter()
            .all(|x| outer.iter().any(|y| y.equals(x.as_ref())))
    }
    let two = || vec![types::LIST_TYPE, types::LIST_TYPE];
    env.add_overload("sets.contains", "list_sets_contains_list", two(), |a| {
        boolean(contains_all(
            list(&a, 0, "sets.contains")?,
            list(&a, 1, "sets.contains")?,
        ))
    })?;
    env.add_overload("sets.equivalent", "list_sets_equivalent_list", two(), |a| {
        let (x, y) = (
            list(&a, 0, "sets.equivalent")?,
            list(&a, 1, "sets.equivalent")?,
        );
        boolean(contains_all(x, y) && contains_all(y, x))
    })?;
    env.add_overload("sets.intersects", "list_sets_intersects_list", two(), |a| {
        let (x, y) = (
            list(&a, 0, "sets.intersects")?,
            list(&a, 1, "sets.intersects")?,
        );
        boolean(x.iter().any(|v| y.iter().any(|w| w.equals(v.as_ref()))))
    })?;
    Ok(())
}

fn escape_key<'b, 'v>(a: Vec<CowVal<'b, 'v>>) -> Ret<'b, 'v> {
    ret(CelString::from(
        text(&a, 0, "jsonpatch.escapeKey")?
            .replace('~', "~0")
            .replace('/', "~1"),
    ))
}
