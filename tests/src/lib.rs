//! Test-only package.
