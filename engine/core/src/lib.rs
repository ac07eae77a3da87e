//! Flotilla's engine core: pure, synchronous, shared by the CLI, the controllers and the benchmarks.
//!
//! Where to start:
//! - [`framework`]: the extension-point traits (filter, score, select, assign, override), the
//!   contexts they read and the decisions they return, and [`framework::Profile`].
//! - [`scheduler`]: runs a profile over a binding and a cluster set, exactly as Karmada's generic
//!   scheduler does (filter → score → estimate → order → select → assign), including ordered
//!   `clusterAffinities` groups and overflow tiers.
//! - [`detector`]: resource templates + PropagationPolicies → ResourceBindings.
//! - [`overrides`]: Karmada's OverridePolicy engine lowered to JSON patch.
//! - [`render`]: ResourceBinding + schedule result → one Work per cluster.
//! - [`failover`]: NoExecute taint eviction.
//! - [`interpreter`]: the resource interpreter slot (replicas, status, health, dependencies).
//!
//! This crate never depends on tokio, a Kubernetes client, wasmtime or CEL: those backends implement
//! the traits in [`framework`] from their own crates.

pub mod autoscaling;
pub mod cluster_index;
pub mod component_sets;
pub mod detector;
pub mod division;
pub mod error;
pub mod estimator;
pub mod expression;
pub mod failover;
pub mod framework;
pub mod interpreter;
pub mod interpreter_webhook;
pub mod manifest;
pub mod overrides;
pub mod pipeline;
pub mod plan;
pub mod preemption;
pub mod priority;
pub mod profile;
pub mod quantity;
pub mod queue;
pub mod render;
pub mod scheduler;
pub mod selector;
pub mod spread;
pub mod time;
pub mod validate;

pub use error::PluginError;
