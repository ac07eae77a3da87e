//! Built-in plugins.
