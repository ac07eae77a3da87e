//! Static checks of a parsed expression: types (a light checker in the spirit of cel-go's, with
//! `dyn` for schemaless data) and a cost bound.
//!
//! The cost bound is a polynomial in three input sizes: `L`, the longest list or map; `S`, the
//! longest string (bytes); `N`, the number of values in the input. Every operation is charged an
//! upper bound of the work the interpreter does for it (a comprehension: its range's size times
//! its body; a string function: a tenth of a unit per byte, as Kubernetes charges; copying a value
//! into a new list: its size). With non-negative coefficients the polynomial is monotone, so:
//! at validation it is evaluated at [`Limits::reference`](crate::Limits) sizes and compared with
//! the static limit; before every evaluation it is evaluated at the actual sizes of the bound
//! object and cluster (known from their conversion) and compared with the runtime limit.

use cel::common::ast::{EntryExpr, Expr, LiteralValue, operators};
use cel::parser::Expression;

use crate::convert::Sizes;

/// A polynomial in (L, S, N) with non-negative coefficients.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Poly(Vec<([u8; 3], f64)>);

const MAX_DEGREE: u8 = 12;

impl Poly {
    /// The constant `c`.
    pub fn constant(c: f64) -> Poly {
        if c == 0.0 {
            Poly::default()
        } else {
            Poly(vec![([0, 0, 0], c)])
        }
    }

    fn var(i: usize) -> Poly {
        let mut e = [0; 3];
        e[i] = 1;
        Poly(vec![(e, 1.0)])
    }

    /// `L`.
    pub fn l() -> Poly {
        Poly::var(0)
    }

    /// `S`.
    pub fn s() -> Poly {
        Poly::var(1)
    }

    /// `N`.
    pub fn n() -> Poly {
        Poly::var(2)
    }

    /// Unbounded: any evaluation exceeds every limit.
    pub fn infinite() -> Poly {
        Poly::constant(f64::INFINITY)
    }

    fn push(&mut self, e: [u8; 3], c: f64) {
        if c == 0.0 {
            return;
        }
        if e.iter().any(|d| *d > MAX_DEGREE) {
            self.push([0, 0, 0], f64::INFINITY);
            return;
        }
        match self.0.iter_mut().find(|(x, _)| *x == e) {
            Some((_, k)) => *k += c,
            None => self.0.push((e, c)),
        }
    }

    /// `self + other`.
    pub fn add(&self, other: &Poly) -> Poly {
        let mut out = self.clone();
        for (e, c) in &other.0 {
            out.push(*e, *c);
        }
        out
    }

    /// `self × other`.
    pub fn mul(&self, other: &Poly) -> Poly {
        let mut out = Poly::default();
        for (a, x) in &self.0 {
            for (b, y) in &other.0 {
                out.push([a[0] + b[0], a[1] + b[1], a[2] + b[2]], x * y);
            }
        }
        out
    }

    /// `k × self`.
    pub fn scale(&self, k: f64) -> Poly {
        let mut out = Poly::default();
        for (e, c) in &self.0 {
            out.push(*e, c * k);
        }
        out
    }

    /// An upper bound of `max(self, other)`: the coefficient-wise maximum (valid because sizes are
    /// at least 1 and coefficients are non-negative).
    pub fn max(&self, other: &Poly) -> Poly {
        let mut out = self.clone();
        for (e, c) in &other.0 {
            match out.0.iter_mut().find(|(x, _)| x == e) {
                Some((_, k)) => *k = k.max(*c),
                None => out.0.push((*e, *c)),
            }
        }
        out
    }

    /// The value at `sizes` (each size at least 1).
    pub fn eval(&self, sizes: Sizes) -> f64 {
        let v = [
            sizes.list.max(1) as f64,
            sizes.string.max(1) as f64,
            sizes.nodes.max(1) as f64,
        ];
        self.0
            .iter()
            .map(|(e, c)| {
                c * v[0].powi(e[0].into()) * v[1].powi(e[1].into()) * v[2].powi(e[2].into())
            })
            .sum()
    }
}

/// A static type. `Dyn` is anything (schemaless input, mixed lists).
#[derive(Debug, Clone, PartialEq)]
pub enum Ty {
    /// Unknown until run time.
    Dyn,
    /// `null`.
    Null,
    /// `bool`.
    Bool,
    /// `int`.
    Int,
    /// `uint`.
    Uint,
    /// `double`.
    Double,
    /// `string`.
    String,
    /// `bytes`.
    Bytes,
    /// `list(T)`.
    List(Box<Ty>),
    /// `map(K, V)`.
    Map(Box<Ty>, Box<Ty>),
    /// `optional(T)`.
    Opt(Box<Ty>),
    /// A type value (`int`, `string`, ...).
    Type,
    /// `duration`.
    Duration,
    /// `timestamp`.
    Timestamp,
    /// A library type (`kubernetes.Quantity`, `net.IP`, ...).
    Opaque(&'static str),
}

impl Ty {
    fn name(&self) -> String {
        match self {
            Ty::Dyn => "dyn".into(),
            Ty::Null => "null_type".into(),
            Ty::Bool => "bool".into(),
            Ty::Int => "int".into(),
            Ty::Uint => "uint".into(),
            Ty::Double => "double".into(),
            Ty::String => "string".into(),
            Ty::Bytes => "bytes".into(),
            Ty::List(e) => format!("list({})", e.name()),
            Ty::Map(k, v) => format!("map({}, {})", k.name(), v.name()),
            Ty::Opt(e) => format!("optional_type({})", e.name()),
            Ty::Type => "type".into(),
            Ty::Duration => "google.protobuf.Duration".into(),
            Ty::Timestamp => "google.protobuf.Timestamp".into(),
            Ty::Opaque(n) => (*n).into(),
        }
    }

    fn is_dyn(&self) -> bool {
        matches!(self, Ty::Dyn)
    }

    fn elem(&self) -> Ty {
        match self {
            Ty::List(e) | Ty::Opt(e) => (**e).clone(),
            Ty::Map(k, _) => (**k).clone(),
            _ => Ty::Dyn,
        }
    }

    fn join(a: &Ty, b: &Ty) -> Ty {
        if a == b {
            a.clone()
        } else if *a == Ty::Null {
            b.clone()
        } else if *b == Ty::Null {
            a.clone()
        } else {
            Ty::Dyn
        }
    }
}

/// What is known of a node: its type and size bounds, and the cost bound of evaluating it.
#[derive(Debug, Clone)]
pub struct Info {
    /// Static type.
    pub ty: Ty,
    /// Cost bound.
    pub cost: Poly,
    size: Size,
}

/// Size bounds of a value: elements (`len`), string bytes (`bytes`), values in total (`deep`), and
/// the size of its elements (`None`: as big as the input, for values taken from the input).
#[derive(Debug, Clone)]
struct Size {
    len: Poly,
    bytes: Poly,
    deep: Poly,
    elem: Option<Box<Size>>,
}

impl Size {
    fn input() -> Size {
        Size {
            len: Poly::l(),
            bytes: Poly::s(),
            deep: Poly::n(),
            elem: None,
        }
    }

    fn scalar() -> Size {
        Size {
            len: Poly::default(),
            bytes: Poly::default(),
            deep: Poly::constant(1.0),
            elem: None,
        }
    }

    fn string(bytes: Poly) -> Size {
        Size {
            len: Poly::default(),
            bytes,
            deep: Poly::constant(1.0),
            elem: None,
        }
    }

    fn elem(&self) -> Size {
        match &self.elem {
            Some(e) => (**e).clone(),
            None => Size::input(),
        }
    }

    fn max(&self, o: &Size) -> Size {
        let elem = match (&self.elem, &o.elem) {
            (Some(a), Some(b)) => Some(Box::new(a.max(b))),
            _ => None,
        };
        Size {
            len: self.len.max(&o.len),
            bytes: self.bytes.max(&o.bytes),
            deep: self.deep.max(&o.deep),
            elem,
        }
    }

    fn list_of(len: Poly, elem: Size) -> Size {
        let deep = Poly::constant(1.0).add(&len.mul(&elem.deep));
        Size {
            len,
            bytes: Poly::default(),
            deep,
            elem: Some(Box::new(elem)),
        }
    }
}

/// A static error, with the 0-based character offset of the offending node.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckError {
    /// Offset in the source, when known.
    pub offset: Option<u32>,
    /// What is wrong.
    pub message: String,
}

/// Variables in scope, innermost last.
struct Scope(Vec<(String, Ty, Size)>);

/// Type-check `expr` and bound its cost. `offset` maps a node id to its source offset.
///
/// # Errors
/// The first ill-typed node.
pub fn check(expr: &Expression, offset: &dyn Fn(u64) -> Option<u32>) -> Result<Info, CheckError> {
    let mut scope = Scope(vec![
        ("object".into(), Ty::Dyn, Size::input()),
        ("cluster".into(), Ty::Dyn, Size::input()),
        ("clusterName".into(), Ty::String, Size::string(Poly::s())),
        (
            "clusterLabels".into(),
            Ty::Map(Box::new(Ty::String), Box::new(Ty::String)),
            Size {
                len: Poly::l(),
                bytes: Poly::default(),
                deep: Poly::n(),
                elem: Some(Box::new(Size::string(Poly::s()))),
            },
        ),
    ]);
    walk(expr, &mut scope, offset)
}

/// Type-check `expr` and bound its cost with `vars` in scope instead of the placement variables
/// (the resource interpreter's `object`, `observedObject`, `desiredReplicas`, …). A `dyn` or
/// collection variable is sized as an input; a scalar one as a scalar.
///
/// # Errors
/// The first ill-typed node (an unknown variable is `undeclared reference to 'x'`).
pub(crate) fn check_with(
    expr: &Expression,
    offset: &dyn Fn(u64) -> Option<u32>,
    vars: &[(&str, Ty)],
) -> Result<Info, CheckError> {
    let mut scope = Scope(
        vars.iter()
            .map(|(name, ty)| {
                let size = match ty {
                    Ty::Bool | Ty::Int | Ty::Uint | Ty::Double | Ty::Null => Size::scalar(),
                    _ => Size::input(),
                };
                ((*name).to_owned(), ty.clone(), size)
            })
            .collect(),
    );
    walk(expr, &mut scope, offset)
}

fn err(e: &Expression, offset: &dyn Fn(u64) -> Option<u32>, message: String) -> CheckError {
    CheckError {
        offset: offset(e.id),
        message,
    }
}

const TYPE_NAMES: &[&str] = &[
    "bool",
    "int",
    "uint",
    "double",
    "string",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
    "dyn",
    "kubernetes.Quantity",
    "kubernetes.Semver",
    "kubernetes.URL",
    "net.IP",
    "net.CIDR",
];

fn info(ty: Ty, cost: Poly, size: Size) -> Info {
    Info { ty, cost, size }
}

fn walk(
    e: &Expression,
    scope: &mut Scope,
    off: &dyn Fn(u64) -> Option<u32>,
) -> Result<Info, CheckError> {
    let one = Poly::constant(1.0);
    match &e.expr {
        Expr::Literal(l) => Ok(match l {
            LiteralValue::Boolean(_) => info(Ty::Bool, Poly::default(), Size::scalar()),
            LiteralValue::Int(_) => info(Ty::Int, Poly::default(), Size::scalar()),
            LiteralValue::UInt(_) => info(Ty::Uint, Poly::default(), Size::scalar()),
            LiteralValue::Double(_) => info(Ty::Double, Poly::default(), Size::scalar()),
            LiteralValue::Null => info(Ty::Null, Poly::default(), Size::scalar()),
            LiteralValue::String(s) => info(
                Ty::String,
                Poly::default(),
                Size::string(Poly::constant(s.inner().len() as f64)),
            ),
            LiteralValue::Bytes(_) => info(
                Ty::Bytes,
                Poly::default(),
                Size::string(Poly::constant(64.0)),
            ),
        }),
        Expr::Ident(name) => {
            if let Some((_, ty, size)) = scope.0.iter().rev().find(|(n, _, _)| n == name) {
                return Ok(info(ty.clone(), one, size.clone()));
            }
            if TYPE_NAMES.contains(&name.as_str()) {
                return Ok(info(Ty::Type, one, Size::scalar()));
            }
            Err(err(e, off, format!("undeclared reference to '{name}'")))
        }
        Expr::Select(s) => {
            // A qualified type name (`net.IP`).
            if let Expr::Ident(root) = &s.operand.expr {
                let q = format!("{root}.{}", s.field);
                if TYPE_NAMES.contains(&q.as_str()) && !scope.0.iter().any(|(n, _, _)| n == root) {
                    return Ok(info(Ty::Type, one, Size::scalar()));
                }
            }
            let o = walk(&s.operand, scope, off)?;
            let ty = match &o.ty {
                Ty::Dyn => Ty::Dyn,
                Ty::Map(_, v) => (**v).clone(),
                other if s.test => {
                    return Err(err(
                        e,
                        off,
                        format!("has() cannot test a field of type '{}'", other.name()),
                    ));
                }
                other => {
                    return Err(err(
                        e,
                        off,
                        format!("type '{}' does not support field selection", other.name()),
                    ));
                }
            };
            let ty = if s.test { Ty::Bool } else { ty };
            Ok(info(ty, o.cost.add(&one), o.size.elem()))
        }
        Expr::List(l) => {
            let mut cost = one.clone();
            let mut elem: Option<(Ty, Size)> = None;
            for x in &l.elements {
                let i = walk(x, scope, off)?;
                cost = cost.add(&i.cost).add(&i.size.deep);
                elem = Some(match elem {
                    None => (i.ty, i.size),
                    Some((t, s)) => (Ty::join(&t, &i.ty), s.max(&i.size)),
                });
            }
            let (t, s) = elem.unwrap_or((Ty::Dyn, Size::scalar()));
            let len = Poly::constant(l.elements.len() as f64);
            Ok(info(Ty::List(Box::new(t)), cost, Size::list_of(len, s)))
        }
        Expr::Map(m) => {
            let mut cost = one.clone();
            let mut kv: Option<(Ty, Ty, Size)> = None;
            for entry in &m.entries {
                let EntryExpr::MapEntry(me) = &entry.expr else {
                    return Err(err(e, off, "struct fields in a map literal".into()));
                };
                let k = walk(&me.key, scope, off)?;
                let v = walk(&me.value, scope, off)?;
                if !matches!(k.ty, Ty::String | Ty::Int | Ty::Uint | Ty::Bool | Ty::Dyn) {
                    return Err(err(
                        &me.key,
                        off,
                        format!("unsupported map key type '{}'", k.ty.name()),
                    ));
                }
                cost = cost.add(&k.cost).add(&v.cost).add(&v.size.deep).add(&one);
                kv = Some(match kv {
                    None => (k.ty, v.ty, v.size),
                    Some((kt, vt, s)) => {
                        (Ty::join(&kt, &k.ty), Ty::join(&vt, &v.ty), s.max(&v.size))
                    }
                });
            }
            let (kt, vt, s) = kv.unwrap_or((Ty::Dyn, Ty::Dyn, Size::scalar()));
            let len = Poly::constant(m.entries.len() as f64);
            Ok(info(
                Ty::Map(Box::new(kt), Box::new(vt)),
                cost,
                Size::list_of(len, s),
            ))
        }
        Expr::Struct(s) => Err(err(
            e,
            off,
            format!(
                "unknown type '{}': message construction is not supported",
                s.type_name
            ),
        )),
        Expr::Comprehension(c) => {
            let range = walk(&c.iter_range, scope, off)?;
            let (iter_ty, iter_ty2) = match &range.ty {
                Ty::List(t) => (Ty::Int, (**t).clone()),
                Ty::Map(k, v) => ((**k).clone(), (**v).clone()),
                Ty::Dyn => (Ty::Dyn, Ty::Dyn),
                other => {
                    return Err(err(
                        &c.iter_range,
                        off,
                        format!(
                            "expression of type '{}' cannot be the range of a comprehension (must be list, map, or dynamic)",
                            other.name()
                        ),
                    ));
                }
            };
            let n = range.size.len.clone();
            let elem = range.size.elem();
            let (first, second) = match &c.iter_var2 {
                Some(_) => (iter_ty, iter_ty2),
                None if matches!(range.ty, Ty::List(_)) => (iter_ty2, Ty::Dyn),
                None => (iter_ty, Ty::Dyn),
            };
            let init = walk(&c.accu_init, scope, off)?;
            // The accumulator: a list grows by at most one element per iteration (map, filter).
            let accu_size = if matches!(init.ty, Ty::List(_)) {
                Size::list_of(n.clone(), elem.clone().max(&init.size.elem()))
            } else {
                init.size.clone()
            };
            let depth = scope.0.len();
            scope
                .0
                .push((c.accu_var.clone(), init.ty.clone(), accu_size.clone()));
            scope.0.push((c.iter_var.clone(), first, elem.clone()));
            if let Some(v2) = &c.iter_var2 {
                scope.0.push((v2.clone(), second, elem.clone()));
            }
            let cond = walk(&c.loop_cond, scope, off);
            let step = walk(&c.loop_step, scope, off);
            scope.0.truncate(depth + 1);
            let result = walk(&c.result, scope, off);
            scope.0.truncate(depth);
            let (cond, step, result) = (cond?, step?, result?);
            // Per iteration the condition and the step run; every item is cloned once, which
            // costs at most the range's size in total (items are disjoint parts of it).
            let per = one.add(&cond.cost).add(&step.cost);
            let cost = range
                .cost
                .add(&init.cost)
                .add(&range.size.deep)
                .add(&n.mul(&per))
                .add(&result.cost);
            let ty = if result.ty.is_dyn() {
                step.ty.clone()
            } else {
                result.ty.clone()
            };
            let ty = match (&ty, &step.ty) {
                (Ty::List(a), Ty::List(b)) if a.is_dyn() => Ty::List(b.clone()),
                _ => ty,
            };
            Ok(info(
                ty,
                cost,
                if matches!(result.ty, Ty::List(_)) {
                    accu_size
                } else {
                    result.size
                },
            ))
        }
        Expr::Call(call) => call_info(e, call, scope, off),
        Expr::Unspecified => Err(err(e, off, "empty expression".into())),
    }
}

fn numeric(t: &Ty) -> bool {
    matches!(t, Ty::Int | Ty::Uint | Ty::Double | Ty::Dyn)
}

fn call_info(
    e: &Expression,
    call: &cel::common::ast::CallExpr,
    scope: &mut Scope,
    off: &dyn Fn(u64) -> Option<u32>,
) -> Result<Info, CheckError> {
    let one = Poly::constant(1.0);
    let tenth = |p: &Poly| p.scale(0.1);
    // `sets.contains(a, b)` parses as a member call on an identifier `sets`: a namespaced function
    // unless a variable of that name is in scope.
    let qualified;
    let (name, target) = match call.target.as_deref().map(|t| &t.expr) {
        Some(Expr::Ident(ns))
            if NAMESPACES.contains(&ns.as_str()) && !scope.0.iter().any(|(n, _, _)| n == ns) =>
        {
            qualified = format!("{ns}.{}", call.func_name);
            (qualified.as_str(), None)
        }
        _ => (call.func_name.as_str(), call.target.as_deref()),
    };
    // The accumulator of map/filter is appended to in place by the interpreter: charge only the
    // appended list, not a copy of the accumulator.
    let accu_append = name == operators::ADD
        && call.target.is_none()
        && matches!(call.args.first().map(|a| &a.expr), Some(Expr::Ident(n)) if n.starts_with('@'));
    let mut args = Vec::with_capacity(call.args.len() + 1);
    if let Some(t) = target {
        args.push(walk(t, scope, off)?);
    }
    for a in &call.args {
        args.push(walk(a, scope, off)?);
    }
    let member = target.is_some();
    let mut cost = one.clone();
    for a in &args {
        cost = cost.add(&a.cost);
    }
    let tys: Vec<&Ty> = args.iter().map(|a| &a.ty).collect();
    let no_overload = || {
        let list = tys.iter().map(|t| t.name()).collect::<Vec<_>>();
        let sig = if member {
            format!("{}.({})", list[0], list[1..].join(", "))
        } else {
            format!("({})", list.join(", "))
        };
        err(
            e,
            off,
            format!(
                "found no matching overload for '{}' applied to '{sig}'",
                display_name(name)
            ),
        )
    };
    let a0 = args.first();
    let bytes = |i: usize| {
        args.get(i)
            .map(|a| a.size.bytes.clone())
            .unwrap_or_default()
    };
    let len = |i: usize| args.get(i).map(|a| a.size.len.clone()).unwrap_or_default();
    let deep = |i: usize| args.get(i).map(|a| a.size.deep.clone()).unwrap_or_default();
    let scalar = |ty: Ty, extra: Poly| Ok(info(ty, cost.add(&extra), Size::scalar()));
    let string_out =
        |extra: Poly, out: Poly| Ok(info(Ty::String, cost.add(&extra), Size::string(out)));
    let opaque = |t: &Ty, n: &str| matches!(t, Ty::Opaque(x) if *x == n) || t.is_dyn();
    let is = |t: &Ty, want: &Ty| t == want || t.is_dyn();
    let all_args =
        |want: &[Ty]| tys.len() == want.len() && tys.iter().zip(want).all(|(t, w)| is(t, w));
    match (name, member, args.len()) {
        (operators::LOGICAL_AND | operators::LOGICAL_OR, false, 2)
        | (operators::LOGICAL_NOT, false, 1)
        | (operators::NOT_STRICTLY_FALSE, false, 1) => {
            if tys.iter().all(|t| is(t, &Ty::Bool)) {
                scalar(Ty::Bool, Poly::default())
            } else {
                Err(no_overload())
            }
        }
        (operators::CONDITIONAL, false, 3) => {
            if !is(tys[0], &Ty::Bool) {
                return Err(no_overload());
            }
            let (t, f) = (&args[1], &args[2]);
            let cost = args[0].cost.add(&t.cost.max(&f.cost)).add(&one);
            Ok(info(Ty::join(&t.ty, &f.ty), cost, t.size.max(&f.size)))
        }
        (operators::EQUALS | operators::NOT_EQUALS, false, 2) => {
            let comparable = tys[0].is_dyn()
                || tys[1].is_dyn()
                || tys[0] == tys[1]
                || (numeric(tys[0]) && numeric(tys[1]))
                || *tys[0] == Ty::Null
                || *tys[1] == Ty::Null
                || matches!(
                    (tys[0], tys[1]),
                    (Ty::List(_), Ty::List(_)) | (Ty::Map(..), Ty::Map(..))
                );
            if !comparable {
                return Err(no_overload());
            }
            scalar(
                Ty::Bool,
                deep(0).max(&deep(1)).add(&tenth(&bytes(0).max(&bytes(1)))),
            )
        }
        (
            operators::LESS
            | operators::LESS_EQUALS
            | operators::GREATER
            | operators::GREATER_EQUALS,
            false,
            2,
        ) => {
            let ok = (numeric(tys[0]) && numeric(tys[1]))
                || matches!(
                    (tys[0], tys[1]),
                    (Ty::String | Ty::Dyn, Ty::String | Ty::Dyn)
                        | (Ty::Bytes, Ty::Bytes)
                        | (Ty::Bool, Ty::Bool)
                        | (Ty::Timestamp, Ty::Timestamp)
                        | (Ty::Duration, Ty::Duration)
                );
            if ok {
                scalar(Ty::Bool, tenth(&bytes(0).max(&bytes(1))))
            } else {
                Err(no_overload())
            }
        }
        (operators::ADD, false, 2) => {
            let (x, y) = (tys[0], tys[1]);
            let ty = match (x, y) {
                (Ty::Dyn, t) | (t, Ty::Dyn) => t.clone(),
                (a, b)
                    if a == b
                        && matches!(
                            a,
                            Ty::Int | Ty::Uint | Ty::Double | Ty::String | Ty::Bytes | Ty::Duration
                        ) =>
                {
                    a.clone()
                }
                (Ty::List(a), Ty::List(b)) => Ty::List(Box::new(Ty::join(a, b))),
                (Ty::Timestamp, Ty::Duration) | (Ty::Duration, Ty::Timestamp) => Ty::Timestamp,
                _ => return Err(no_overload()),
            };
            let size = Size {
                len: len(0).add(&len(1)),
                bytes: bytes(0).add(&bytes(1)),
                deep: deep(0).add(&deep(1)),
                elem: match (&args[0].size.elem, &args[1].size.elem) {
                    (Some(a), Some(b)) => Some(Box::new(a.max(b))),
                    _ => None,
                },
            };
            let copy = if accu_append {
                deep(1)
            } else {
                deep(0).add(&deep(1)).add(&tenth(&bytes(0).add(&bytes(1))))
            };
            Ok(info(ty, cost.add(&copy), size))
        }
        (
            operators::SUBSTRACT | operators::MULTIPLY | operators::DIVIDE | operators::MODULO,
            false,
            2,
        ) => {
            let (x, y) = (tys[0], tys[1]);
            let ty = match (x, y) {
                (Ty::Dyn, t) | (t, Ty::Dyn)
                    if numeric(t) || matches!(t, Ty::Duration | Ty::Timestamp) =>
                {
                    t.clone()
                }
                (a, b)
                    if a == b && numeric(a) && !(name == operators::MODULO && *a == Ty::Double) =>
                {
                    a.clone()
                }
                (Ty::Timestamp, Ty::Timestamp) if name == operators::SUBSTRACT => Ty::Duration,
                (Ty::Timestamp | Ty::Duration, Ty::Duration) if name == operators::SUBSTRACT => {
                    x.clone()
                }
                _ => return Err(no_overload()),
            };
            scalar(ty, Poly::default())
        }
        (operators::NEGATE, false, 1) if numeric(tys[0]) || *tys[0] == Ty::Duration => {
            scalar(tys[0].clone(), Poly::default())
        }
        (operators::IN, false, 2) => match tys[1] {
            Ty::List(_) | Ty::Dyn => scalar(Ty::Bool, deep(1).add(&tenth(&bytes(0)))),
            Ty::Map(..) => scalar(Ty::Bool, tenth(&bytes(0))),
            _ => Err(no_overload()),
        },
        (operators::INDEX | operators::OPT_INDEX, false, 2) => {
            let ty = match (tys[0], tys[1]) {
                (Ty::List(t), Ty::Int | Ty::Uint | Ty::Dyn) => (**t).clone(),
                (Ty::Map(_, v), _) => (**v).clone(),
                (Ty::Dyn, _) => Ty::Dyn,
                (Ty::Opt(_), _) if name == operators::OPT_INDEX => Ty::Dyn,
                _ => return Err(no_overload()),
            };
            let ty = if name == operators::OPT_INDEX {
                Ty::Opt(Box::new(ty))
            } else {
                ty
            };
            Ok(info(ty, cost, args[0].size.elem()))
        }
        (operators::OPT_SELECT, false, 2) => {
            let inner = match tys[0] {
                Ty::Map(_, v) => (**v).clone(),
                Ty::Opt(_) | Ty::Dyn => Ty::Dyn,
                _ => return Err(no_overload()),
            };
            Ok(info(Ty::Opt(Box::new(inner)), cost, args[0].size.elem()))
        }
        ("size", _, 1) => match tys[0] {
            Ty::String | Ty::Bytes => scalar(Ty::Int, tenth(&bytes(0))),
            Ty::List(_) | Ty::Map(..) | Ty::Dyn => scalar(Ty::Int, Poly::default()),
            _ => Err(no_overload()),
        },
        ("int" | "uint" | "double" | "string" | "bool" | "bytes" | "dyn" | "type", false, 1) => {
            let ty = match name {
                "int" => Ty::Int,
                "uint" => Ty::Uint,
                "double" => Ty::Double,
                "string" => Ty::String,
                "bool" => Ty::Bool,
                "bytes" => Ty::Bytes,
                "type" => Ty::Type,
                _ => Ty::Dyn,
            };
            if name == "string" {
                return string_out(
                    tenth(&bytes(0)).add(&deep(0)),
                    bytes(0).add(&Poly::constant(64.0)),
                );
            }
            if matches!(name, "dyn") {
                return Ok(info(Ty::Dyn, cost, args[0].size.clone()));
            }
            scalar(ty, tenth(&bytes(0)))
        }
        ("duration" | "timestamp", false, 1) if is(tys[0], &Ty::String) || *tys[0] == Ty::Int => {
            scalar(
                if name == "duration" {
                    Ty::Duration
                } else {
                    Ty::Timestamp
                },
                tenth(&bytes(0)),
            )
        }
        ("contains" | "startsWith" | "endsWith" | "matches", true, 2)
            if all_args(&[Ty::String, Ty::String]) =>
        {
            let work = if name == "matches" || name == "contains" {
                bytes(0).add(&bytes(1))
            } else {
                bytes(1)
            };
            scalar(Ty::Bool, tenth(&work).add(&bytes(1)))
        }
        ("matches", false, 2) if all_args(&[Ty::String, Ty::String]) => {
            scalar(Ty::Bool, tenth(&bytes(0)).add(&bytes(1)))
        }
        ("lowerAscii" | "upperAscii" | "trim" | "reverse" | "quote" | "strings.quote", _, 1)
            if is(tys[0], &Ty::String) =>
        {
            string_out(
                tenth(&bytes(0)),
                bytes(0).scale(2.0).add(&Poly::constant(2.0)),
            )
        }
        ("charAt", true, 2) if all_args(&[Ty::String, Ty::Int]) => {
            string_out(tenth(&bytes(0)), Poly::constant(4.0))
        }
        ("indexOf" | "lastIndexOf", true, 2 | 3)
            if is(tys[0], &Ty::String) && is(tys[1], &Ty::String) =>
        {
            scalar(Ty::Int, tenth(&bytes(0).mul(&bytes(1).add(&one))))
        }
        ("substring", true, 2 | 3) if is(tys[0], &Ty::String) => {
            string_out(tenth(&bytes(0)), bytes(0))
        }
        ("replace", true, 3 | 4)
            if is(tys[0], &Ty::String) && is(tys[1], &Ty::String) && is(tys[2], &Ty::String) =>
        {
            let out = bytes(0).mul(&bytes(2).add(&one));
            string_out(
                tenth(&bytes(0).mul(&bytes(1).add(&one))).add(&tenth(&out)),
                out,
            )
        }
        ("split", true, 2 | 3) if is(tys[0], &Ty::String) && is(tys[1], &Ty::String) => Ok(info(
            Ty::List(Box::new(Ty::String)),
            cost.add(&bytes(0)),
            Size::list_of(bytes(0).add(&one), Size::string(bytes(0))),
        )),
        ("join", true, 1 | 2) if matches!(tys[0], Ty::List(_) | Ty::Dyn) => {
            let elem = args[0].size.elem();
            let out = len(0).mul(&elem.bytes.add(&bytes(1)).add(&one));
            string_out(tenth(&out), out)
        }
        ("format", true, 2)
            if is(tys[0], &Ty::String) && matches!(tys[1], Ty::List(_) | Ty::Dyn) =>
        {
            let out = bytes(0)
                .add(&deep(1).scale(32.0))
                .add(&len(1).mul(&args[1].size.elem().bytes));
            string_out(tenth(&out).add(&deep(1)), out)
        }
        ("find", true, 2) if all_args(&[Ty::String, Ty::String]) => {
            string_out(tenth(&bytes(0)).add(&bytes(1)), bytes(0))
        }
        ("findAll", true, 2 | 3) if is(tys[0], &Ty::String) && is(tys[1], &Ty::String) => Ok(info(
            Ty::List(Box::new(Ty::String)),
            cost.add(&bytes(0)).add(&bytes(1)),
            Size::list_of(bytes(0).add(&one), Size::string(bytes(0))),
        )),
        ("base64.encode" | "base64.decode", false, 1) => string_out(
            tenth(&bytes(0)),
            bytes(0).scale(2.0).add(&Poly::constant(4.0)),
        ),
        ("jsonpatch.escapeKey", false, 1) if is(tys[0], &Ty::String) => {
            string_out(tenth(&bytes(0)), bytes(0).scale(2.0))
        }
        (
            "quantity" | "isQuantity" | "semver" | "isSemver" | "ip" | "isIP" | "cidr" | "isCIDR"
            | "url" | "isURL" | "ip.isCanonical",
            false,
            1 | 2,
        ) if is(tys[0], &Ty::String) => {
            let ty = match name {
                "quantity" => Ty::Opaque("kubernetes.Quantity"),
                "semver" => Ty::Opaque("kubernetes.Semver"),
                "ip" => Ty::Opaque("net.IP"),
                "cidr" => Ty::Opaque("net.CIDR"),
                "url" => Ty::Opaque("kubernetes.URL"),
                _ => Ty::Bool,
            };
            scalar(ty, tenth(&bytes(0)).add(&one))
        }
        ("sign" | "asInteger", true, 1) if opaque(tys[0], "kubernetes.Quantity") => {
            scalar(Ty::Int, Poly::default())
        }
        ("isInteger", true, 1) if opaque(tys[0], "kubernetes.Quantity") => {
            scalar(Ty::Bool, Poly::default())
        }
        ("asApproximateFloat", true, 1) if opaque(tys[0], "kubernetes.Quantity") => {
            scalar(Ty::Double, Poly::default())
        }
        ("add" | "sub", true, 2)
            if opaque(tys[0], "kubernetes.Quantity")
                && (opaque(tys[1], "kubernetes.Quantity") || *tys[1] == Ty::Int) =>
        {
            scalar(Ty::Opaque("kubernetes.Quantity"), Poly::default())
        }
        ("isGreaterThan" | "isLessThan" | "compareTo", true, 2)
            if tys[0] == tys[1]
                && matches!(
                    tys[0],
                    Ty::Opaque("kubernetes.Quantity" | "kubernetes.Semver")
                )
                || (tys[0].is_dyn() || tys[1].is_dyn()) =>
        {
            scalar(
                if name == "compareTo" {
                    Ty::Int
                } else {
                    Ty::Bool
                },
                Poly::default(),
            )
        }
        ("major" | "minor" | "patch", true, 1) if opaque(tys[0], "kubernetes.Semver") => {
            scalar(Ty::Int, Poly::default())
        }
        ("family" | "prefixLength", true, 1)
            if opaque(tys[0], "net.IP") || opaque(tys[0], "net.CIDR") =>
        {
            scalar(Ty::Int, Poly::default())
        }
        (
            "isUnspecified"
            | "isLoopback"
            | "isLinkLocalMulticast"
            | "isLinkLocalUnicast"
            | "isGlobalUnicast",
            true,
            1,
        ) if opaque(tys[0], "net.IP") => scalar(Ty::Bool, Poly::default()),
        ("containsIP" | "containsCIDR", true, 2) if opaque(tys[0], "net.CIDR") => {
            scalar(Ty::Bool, tenth(&bytes(1)).add(&one))
        }
        ("ip", true, 1) if opaque(tys[0], "net.CIDR") => {
            scalar(Ty::Opaque("net.IP"), Poly::default())
        }
        ("masked", true, 1) if opaque(tys[0], "net.CIDR") => {
            scalar(Ty::Opaque("net.CIDR"), Poly::default())
        }
        ("getScheme" | "getHost" | "getHostname" | "getPort" | "getEscapedPath", true, 1)
            if opaque(tys[0], "kubernetes.URL") =>
        {
            string_out(Poly::default(), Poly::s())
        }
        ("getQuery", true, 1) if opaque(tys[0], "kubernetes.URL") => Ok(info(
            Ty::Map(
                Box::new(Ty::String),
                Box::new(Ty::List(Box::new(Ty::String))),
            ),
            cost.add(&Poly::s()),
            Size::list_of(Poly::s(), Size::list_of(Poly::s(), Size::string(Poly::s()))),
        )),
        ("isSorted" | "sum" | "min" | "max", true, 1)
            if matches!(tys[0], Ty::List(_) | Ty::Dyn) =>
        {
            let ty = if name == "isSorted" {
                Ty::Bool
            } else {
                tys[0].elem()
            };
            Ok(info(
                ty,
                cost.add(&len(0)).add(&deep(0)),
                args[0].size.elem(),
            ))
        }
        ("indexOf" | "lastIndexOf", true, 2) if matches!(tys[0], Ty::List(_)) => {
            scalar(Ty::Int, deep(0).add(&len(0)))
        }
        ("sets.contains" | "sets.equivalent" | "sets.intersects", false, 2)
            if tys.iter().all(|t| matches!(t, Ty::List(_) | Ty::Dyn)) =>
        {
            scalar(Ty::Bool, len(0).mul(&len(1)).add(&deep(0)).add(&deep(1)))
        }
        ("distinct" | "sort", true, 1) if matches!(tys[0], Ty::List(_) | Ty::Dyn) => Ok(info(
            tys[0].clone(),
            cost.add(&len(0).mul(&len(0))).add(&deep(0)),
            args[0].size.clone(),
        )),
        ("reverse" | "flatten" | "slice", true, _) if matches!(tys[0], Ty::List(_) | Ty::Dyn) => {
            let size = if name == "flatten" {
                Size {
                    len: deep(0),
                    bytes: Poly::default(),
                    deep: deep(0),
                    elem: None,
                }
            } else {
                args[0].size.clone()
            };
            Ok(info(
                if name == "flatten" {
                    Ty::List(Box::new(Ty::Dyn))
                } else {
                    tys[0].clone()
                },
                cost.add(&deep(0)).add(&len(0)),
                size,
            ))
        }
        ("lists.range", false, 1) if is(tys[0], &Ty::Int) => {
            // Only a literal bound is bounded.
            let n = match &call.args[0].expr {
                Expr::Literal(LiteralValue::Int(i)) => Poly::constant((*i.inner()).max(0) as f64),
                _ => Poly::infinite(),
            };
            Ok(info(
                Ty::List(Box::new(Ty::Int)),
                cost.add(&n),
                Size::list_of(n.clone(), Size::scalar()),
            ))
        }
        ("hasValue", true, 1) if matches!(tys[0], Ty::Opt(_) | Ty::Dyn) => {
            scalar(Ty::Bool, Poly::default())
        }
        ("value", true, 1) if matches!(tys[0], Ty::Opt(_) | Ty::Dyn) => {
            Ok(info(tys[0].elem(), cost, args[0].size.clone()))
        }
        ("orValue", true, 2) if matches!(tys[0], Ty::Opt(_) | Ty::Dyn) => Ok(info(
            Ty::join(&tys[0].elem(), tys[1]),
            cost,
            args[0].size.max(&args[1].size),
        )),
        ("or", true, 2) if matches!(tys[0], Ty::Opt(_) | Ty::Dyn) => {
            Ok(info(tys[0].clone(), cost, args[0].size.max(&args[1].size)))
        }
        ("optional.of" | "optional.ofNonZeroValue", false, 1) => Ok(info(
            Ty::Opt(Box::new(tys[0].clone())),
            cost,
            args[0].size.clone(),
        )),
        ("optional.none", false, 0) => scalar(Ty::Opt(Box::new(Ty::Dyn)), Poly::default()),
        (
            "math.greatest" | "math.least" | "math.abs" | "math.ceil" | "math.floor" | "math.round"
            | "math.trunc" | "math.sign",
            false,
            _,
        ) => scalar(
            tys.first().map_or(Ty::Dyn, |t| {
                if matches!(t, Ty::List(_)) {
                    t.elem()
                } else {
                    (*t).clone()
                }
            }),
            len(0),
        ),
        (
            "getDayOfMonth" | "getDayOfWeek" | "getDayOfYear" | "getFullYear" | "getHours"
            | "getMilliseconds" | "getMinutes" | "getMonth" | "getSeconds",
            true,
            _,
        ) if matches!(tys[0], Ty::Timestamp | Ty::Duration | Ty::Dyn) => {
            scalar(Ty::Int, Poly::default())
        }
        _ => {
            let known = KNOWN_FUNCTIONS.contains(&name);
            let _ = a0;
            if known {
                Err(no_overload())
            } else {
                Err(err(
                    e,
                    off,
                    format!("undeclared reference to '{}'", display_name(name)),
                ))
            }
        }
    }
}

fn display_name(name: &str) -> &str {
    match name {
        operators::ADD => "_+_",
        other => other,
    }
}

const NAMESPACES: &[&str] = &[
    "sets",
    "lists",
    "jsonpatch",
    "base64",
    "strings",
    "math",
    "optional",
    "ip",
];

const KNOWN_FUNCTIONS: &[&str] = &[
    "_&&_",
    "_||_",
    "!_",
    "_?_:_",
    "_==_",
    "_!=_",
    "_<_",
    "_<=_",
    "_>_",
    "_>=_",
    "_+_",
    "_-_",
    "_*_",
    "_/_",
    "_%_",
    "-_",
    "@in",
    "_[_]",
    "_[?_]",
    "_?._",
    "size",
    "int",
    "uint",
    "double",
    "string",
    "bool",
    "bytes",
    "dyn",
    "type",
    "duration",
    "timestamp",
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "lowerAscii",
    "upperAscii",
    "trim",
    "reverse",
    "quote",
    "strings.quote",
    "charAt",
    "indexOf",
    "lastIndexOf",
    "substring",
    "replace",
    "split",
    "join",
    "format",
    "find",
    "findAll",
    "base64.encode",
    "base64.decode",
    "jsonpatch.escapeKey",
    "quantity",
    "isQuantity",
    "semver",
    "isSemver",
    "ip",
    "isIP",
    "cidr",
    "isCIDR",
    "url",
    "isURL",
    "ip.isCanonical",
    "sign",
    "asInteger",
    "isInteger",
    "asApproximateFloat",
    "add",
    "sub",
    "isGreaterThan",
    "isLessThan",
    "compareTo",
    "major",
    "minor",
    "patch",
    "family",
    "prefixLength",
    "isUnspecified",
    "isLoopback",
    "isLinkLocalMulticast",
    "isLinkLocalUnicast",
    "isGlobalUnicast",
    "containsIP",
    "containsCIDR",
    "masked",
    "getScheme",
    "getHost",
    "getHostname",
    "getPort",
    "getEscapedPath",
    "getQuery",
    "isSorted",
    "sum",
    "min",
    "max",
    "sets.contains",
    "sets.equivalent",
    "sets.intersects",
    "distinct",
    "sort",
    "flatten",
    "slice",
    "lists.range",
    "hasValue",
    "value",
    "orValue",
    "or",
    "optional.of",
    "optional.ofNonZeroValue",
    "optional.none",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poly_arithmetic_and_evaluation() {
        let p = Poly::l().mul(&Poly::s()).add(&Poly::constant(2.0));
        assert_eq!(
            p.eval(Sizes {
                list: 3,
                string: 5,
                nodes: 1
            }),
            17.0
        );
        let q = Poly::l().max(&Poly::l().scale(3.0));
        assert_eq!(
            q.eval(Sizes {
                list: 2,
                string: 1,
                nodes: 1
            }),
            6.0
        );
        let mut big = Poly::l();
        for _ in 0..20 {
            big = big.mul(&Poly::l());
        }
        assert!(
            big.eval(Sizes::default()).is_infinite(),
            "degree cap makes the bound unbounded"
        );
    }
}
