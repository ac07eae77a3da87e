//! Replica division.
