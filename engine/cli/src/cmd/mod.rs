//! Subcommands.

pub mod admission;
pub mod agent;
pub mod controllers;
pub mod diagnose;
pub mod explain;
pub mod input;
pub mod interpret;
pub mod interpreters;
pub mod join;
pub mod plan;
pub mod plugin;
pub mod profile;
pub mod profiles;
pub mod scaffold;
pub mod up;
pub mod validate;
pub mod wasm_interpreters;
