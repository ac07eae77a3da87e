//! Karmada-compatible API types for Flotilla.
//!
//! Start with [`policy`] (what users write: PropagationPolicy, OverridePolicy and their cluster-scoped
//! twins), [`cluster`] (member clusters) and [`work`] (what the engine produces: ResourceBindings and
//! Works). Field names, `omitempty` behaviour and enum strings follow Karmada v1.19 exactly, so
//! Karmada YAML round-trips unchanged. Unknown fields are rejected, as `kubectl` does with strict
//! field validation, so typos surface as errors instead of silently changing a placement.
//!
//! [`labels`] holds the well-known label and annotation keys; [`Object`] is an unstructured resource
//! template (any Kubernetes kind).

#![warn(missing_docs)]
#![allow(missing_docs)] // field-level docs live in Karmada's API reference; types are documented.

pub mod autoscaling;
pub mod cluster;
pub mod interpreter;
pub mod json_size;
pub mod labels;
pub mod meta;
mod object;
pub mod policy;
pub mod value_seed;
pub mod work;
pub mod yaml_scan;

pub use object::Object;
