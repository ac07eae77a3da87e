//! Subcommands.

pub mod explain;
pub mod plan;
pub mod up;
pub mod validate;
