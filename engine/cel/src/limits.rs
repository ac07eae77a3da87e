//! The bounds every compilation and evaluation runs under.

use std::time::Duration;

use crate::convert::Sizes;

/// Compile-time and run-time bounds. [`Limits::default`] is what `flotilla` uses.
///
/// Cost is counted in abstract units (about one interpreter step; string work costs a tenth of a
/// unit per byte, as in Kubernetes). Measured on the bench machine a unit is 5–30 ns, so the
/// default runtime limit bounds one evaluation to well under 100 ms even in the worst case.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Limits {
    /// Longest expression accepted, bytes.
    pub max_expression_bytes: usize,
    /// Deepest bracket nesting accepted (the parser recurses per level).
    pub max_nesting: usize,
    /// Deepest syntax tree accepted, as bounded by a scan of the text before parsing: operators,
    /// `.` members, `in`, calls and brackets each count a level (arguments of one call do not
    /// add up). The parser, the checker and the interpreter recurse per level.
    pub max_depth: usize,
    /// Static limit: the cost bound evaluated at [`Limits::reference`] sizes must not exceed it.
    pub static_cost: f64,
    /// The input sizes the static limit is checked at: a typical object.
    pub reference: Sizes,
    /// Runtime limit: the cost bound evaluated at the actual sizes of the bound object and cluster
    /// must not exceed it, or the evaluation is refused before it starts.
    pub runtime_cost: f64,
    /// Most values in an object or cluster handed to CEL.
    pub max_input_nodes: u64,
    /// Deepest nesting of an object or cluster handed to CEL.
    pub max_input_depth: u32,
    /// Wall-clock budget of one bound object (one plugin call for filters and scores): checked
    /// before each evaluation, so a batch over many clusters stops once it is spent.
    pub deadline: Duration,
    /// Compiled programs kept (by expression text).
    pub program_cache: usize,
    /// Converted clusters kept (by name and resource version, or content hash).
    pub cluster_cache: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_expression_bytes: 10 * 1024,
            max_nesting: 64,
            max_depth: 250,
            static_cost: 1_000_000.0,
            reference: Sizes {
                list: 100,
                string: 1024,
                nodes: 2_000,
            },
            runtime_cost: 5_000_000.0,
            max_input_nodes: 200_000,
            max_input_depth: 64,
            deadline: Duration::from_secs(1),
            program_cache: 4_096,
            cluster_cache: 4_096,
        }
    }
}
