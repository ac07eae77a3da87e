//! Size and nesting bounds on what clients send and what the server stores, so that no request
//! can make the server allocate without bound or recurse deep enough to overflow a stack.
//!
//! The numbers are kube-apiserver's where it has one: a request body is at most 3 MiB
//! (`MaxRequestBodyBytes`), a JSON patch has at most 10,000 operations and its `copy` operations
//! may add at most 3 MiB (`JSONPatchMaxCopyBytes`). kube-apiserver stores objects in etcd, which
//! refuses requests over 1.5 MiB of protobuf; this server stores JSON, so the bound is the 3 MiB
//! kube-apiserver allows a JSON body for that reason.
//!
//! Nesting is bounded far below kube-apiserver's 10,000 levels: every stored object must decode
//! with serde_json's default limit of 128 levels inside every envelope it is served in (a list, a
//! watch event, a Table row, the store's log record) — the limit kube-rs clients, this
//! project's controllers among them, decode with. A body may nest [`MAX_BODY_DEPTH`] levels; a
//! YAML body is scanned for that before it is parsed, as libyaml's cost is quadratic in the
//! nesting of flow collections.

use serde_json::Value;

pub(crate) use flotilla_api::json_size::measure;

use crate::error::ApiError;

/// The largest request body accepted (kube-apiserver's `MaxRequestBodyBytes`).
pub(crate) const MAX_BODY: usize = 3 * 1024 * 1024;
/// The largest object stored, as (estimated) JSON.
pub(crate) const MAX_OBJECT: usize = MAX_BODY;
/// The most operations in one JSON patch (kube-apiserver's `maxJSONPatchOperations`).
pub(crate) const MAX_JSON_PATCH_OPS: usize = 10_000;
/// The most bytes the `copy` operations of one JSON patch may add (kube-apiserver's
/// `JSONPatchMaxCopyBytes`).
pub(crate) const MAX_JSON_PATCH_COPY: usize = 3 * 1024 * 1024;
/// The deepest nesting of a stored object: with managedFields and the envelopes it is served in,
/// it stays under serde_json's 128 levels.
pub(crate) const MAX_OBJECT_DEPTH: usize = 112;

/// The deepest nesting of a decoded request body. The YAML pre-scan ([`yaml_flow_too_deep`]) holds
/// flow collections to it too.
pub(crate) const MAX_BODY_DEPTH: usize = 100;

/// `413 RequestEntityTooLarge`, worded as kube-apiserver does.
pub(crate) fn too_large(limit: usize) -> ApiError {
    ApiError::new(
        413,
        "RequestEntityTooLarge",
        format!("Request entity too large: limit is {limit}"),
    )
}

/// Refuse an object too large (413) or too deeply nested (422) to store.
pub(crate) fn check_object(obj: &Value) -> Result<(), ApiError> {
    let (size, depth) = measure(obj, MAX_OBJECT);
    if size > MAX_OBJECT {
        return Err(too_large(MAX_OBJECT));
    }
    if depth > MAX_OBJECT_DEPTH {
        return Err(ApiError::invalid(format!(
            "the server rejected our request due to an error in our request: the object nests {depth} levels deep, more than the limit of {MAX_OBJECT_DEPTH}"
        )));
    }
    Ok(())
}

/// Refuse a decoded request body nested deeper than [`MAX_BODY_DEPTH`] (400).
pub(crate) fn check_body_depth(v: &Value) -> Result<(), ApiError> {
    let depth = measure(v, usize::MAX).1;
    if depth > MAX_BODY_DEPTH {
        return Err(ApiError::bad_request(format!(
            "the body of the request could not be decoded: it nests {depth} levels deep, more than the limit of {MAX_BODY_DEPTH}"
        )));
    }
    Ok(())
}

pub(crate) use flotilla_api::yaml_scan::flow_too_deep as yaml_flow_too_deep;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn deep_documents_are_measured_without_recursion() {
        let mut v = json!(null);
        for _ in 0..100_000 {
            v = Value::Array(vec![v]);
        }
        assert_eq!(measure(&v, usize::MAX).1, 100_000);
        assert_eq!(check_object(&v).unwrap_err().code, 422);
        // Dropping a value this deep recurses; take it apart iteratively.
        let mut cur = v;
        while let Value::Array(mut a) = cur {
            cur = a.pop().unwrap_or(Value::Null);
        }
    }
}
