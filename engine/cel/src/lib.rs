//! CEL for Flotilla: the Kubernetes dialect of the Common Expression Language for placement
//! filters, placement scores and overrides.
//!
//! **Where to start.** [`Engine`] is the whole backend: build one ([`Engine::default`]), put it on
//! every scheduler profile (`Profile::expressions`) and pass it to
//! `flotilla_core::plan::admit_with`. The core then evaluates the CEL in policies' extension fields
//! through the [`ExpressionEngine`] trait it defines, and never depends on this crate.
//! [`CelFactory`] turns `cel:` entries of `SchedulerProfile` documents into plugins.
//!
//! **The dialect.** One environment: the CEL standard library and macros, optionals (`a.?b`,
//! `m[?k]`, `orValue`), the string extensions (`lowerAscii`, `split`, `replace`, `format`, ...),
//! the lists, math and base64 extensions, and the Kubernetes libraries: `quantity`, `semver`,
//! regex `find`/`findAll`, lists (`isSorted`, `sum`, `min`, `max`, `indexOf`), `sets.*`, `url`,
//! `ip`/`cidr`, `jsonpatch.escapeKey`.
//!
//! **Variables.** `object` is the resource template (in overrides: the manifest after the earlier
//! overriders; `null` where there is none), `cluster` the Karmada `Cluster` (capacities are
//! quantity strings: `quantity(cluster.status.resourceSummary.allocatable.cpu)`), `clusterName`
//! and `clusterLabels` shortcuts for `cluster.metadata.name` and `.labels`.
//!
//! **Conversion.** An object is converted to CEL values once per [`ExpressionEngine::bind`] (once
//! per binding for filters and scores, once per object revision for overrides) and a cluster once
//! per resource version (bounded cache); evaluations borrow both, nothing is re-converted per
//! cluster or per expression. Compiled programs are cached by expression text (bounded).
//!
//! **Bounds.** See [`Limits`]. At validation every expression is parsed, type-checked and given a
//! cost bound — a polynomial in the input's longest list, longest string and value count — which
//! must stay under [`Limits::static_cost`] for a typical input ([`Limits::reference`]). Before every
//! evaluation the same bound is evaluated at the actual sizes of the bound object and cluster and
//! must stay under [`Limits::runtime_cost`]; inputs are capped in size and depth; a bound object
//! has a wall-clock budget checked between evaluations. A refused or failed evaluation is a plugin
//! fault, handled by the plugin's `failurePolicy`.

#![warn(missing_docs)]

mod check;
mod convert;
mod engine;
pub mod interpreter;
mod library;
mod limits;
mod plugin;
mod scan;

pub use check::Poly;
pub use convert::{ConvertError, Sizes};
pub use engine::{Engine, Program};
pub use flotilla_core::expression::{
    ExpressionEngine, ExpressionError, ExpressionErrorKind, ExpressionKind,
};
pub use interpreter::CelRuleBackend;
pub use limits::Limits;
pub use plugin::{CelFactory, CelFilter, CelOverride, CelScore};
