//! Subcommands.

pub mod admission;
pub mod controllers;
pub mod explain;
pub mod input;
pub mod plan;
pub mod plugin;
pub mod profiles;
pub mod up;
pub mod validate;
