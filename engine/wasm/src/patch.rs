//! Bounds on override replies. A reply is a JSON patch the host applies to a manifest; without
//! bounds, a few dozen `copy` operations (each doubling the document) exhaust the host's memory.
//! The numbers follow kube-apiserver's: at most [`MAX_PATCH_OPS`] operations, `copy` operations
//! adding at most [`MAX_COPY_BYTES`] in all, and a result of at most [`MAX_MANIFEST_BYTES`] (the
//! object size etcd accepts) nested at most [`MAX_DEPTH`] levels. The patch is applied to a copy
//! of the manifest here, operation by operation, and every operation's effect is measured before
//! it runs, so a violation is found before anything large is built.

use flotilla_api::json_size::measure;
use json_patch::PatchOperation;
use serde_json::Value;

/// Most operations in one override reply (kube-apiserver's `maxJSONPatchOperations`).
pub const MAX_PATCH_OPS: usize = 10_000;
/// Most bytes the `copy` operations of one reply may add in all (kube-apiserver's
/// `JSONPatchMaxCopyBytes`).
pub const MAX_COPY_BYTES: usize = 3 << 20;
/// Largest manifest an override may produce, as JSON: 1.5 MiB, the object size etcd accepts
/// (a larger input manifest may be patched but not grown).
pub const MAX_MANIFEST_BYTES: usize = 3 << 19;
/// Deepest nesting an override may produce (a deeper input manifest may not be nested further).
pub const MAX_DEPTH: usize = 100;
/// Longest `path` or `from` of an operation, bytes (they appear in error messages).
pub const MAX_POINTER_BYTES: usize = 1024;

/// Why an override reply was refused (an invalid output of the plugin).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchBoundError {
    /// Too many operations.
    #[error("{count} patch operations, more than the limit of {MAX_PATCH_OPS}")]
    TooManyOps {
        /// Operations in the reply.
        count: usize,
    },
    /// A `path` or `from` is too long.
    #[error("operation {index}: a JSON pointer longer than {MAX_POINTER_BYTES} bytes")]
    PointerTooLong {
        /// The operation's position.
        index: usize,
    },
    /// `copy` operations would add too much.
    #[error("operation {index} (copy): copies would add more than {MAX_COPY_BYTES} bytes")]
    CopyTooLarge {
        /// The operation's position.
        index: usize,
    },
    /// The manifest would grow past its bound.
    #[error("operation {index} ({op}): the manifest would exceed {limit} bytes")]
    TooLarge {
        /// The operation's position.
        index: usize,
        /// The operation's name.
        op: &'static str,
        /// The bound.
        limit: usize,
    },
    /// Checking the patch would take too much work (operations measuring large values again and
    /// again).
    #[error("operation {index}: the patch touches more than {MAX_WORK_BYTES} bytes")]
    TooCostly {
        /// The operation's position.
        index: usize,
    },
    /// The manifest would nest too deeply.
    #[error("operation {index} ({op}): the manifest would nest more than {limit} levels")]
    TooDeep {
        /// The operation's position.
        index: usize,
        /// The operation's name.
        op: &'static str,
        /// The bound.
        limit: usize,
    },
}

/// Check that `patch` applied to `object` stays within the bounds. An operation that fails to
/// apply (a missing path, a failed `test`) ends the check successfully: applying the patch stops
/// there too, with that error, so nothing after it can have an effect.
///
/// # Errors
/// The first bound the patch would break.
pub fn check(object: &Value, patch: &[PatchOperation]) -> Result<(), PatchBoundError> {
    if patch.len() > MAX_PATCH_OPS {
        return Err(PatchBoundError::TooManyOps { count: patch.len() });
    }
    for (index, op) in patch.iter().enumerate() {
        let long = |p: &str| p.len() > MAX_POINTER_BYTES;
        let too_long = match op {
            PatchOperation::Move(m) => long(m.from.as_str()) || long(m.path.as_str()),
            PatchOperation::Copy(c) => long(c.from.as_str()) || long(c.path.as_str()),
            other => long(path_of(other)),
        };
        if too_long {
            return Err(PatchBoundError::PointerTooLong { index });
        }
    }
    let mut meter = Meter::default();
    let (mut size, depth0) = meter.measure(object, usize::MAX, 0)?;
    let size_limit = MAX_MANIFEST_BYTES.max(size);
    let depth_limit = MAX_DEPTH.max(depth0);
    let mut copied = 0usize;
    let mut doc = object.clone();
    for (index, op) in patch.iter().enumerate() {
        let name = op_name(op);
        let cap = size_limit.saturating_add(1);
        // The entry a value added at `path` makes, beyond the value.
        let entry = |path: &str| path.rsplit('/').next().map_or(0, str::len) + 4;
        let (added, removed, nest) = match op {
            PatchOperation::Add(a) => {
                let path = a.path.as_str();
                let (n, d) = meter.measure(&a.value, cap, index)?;
                let old = meter.replaced(&doc, path, index)?;
                (n + entry(path), old, tokens(path) + d)
            }
            PatchOperation::Replace(r) => {
                let path = r.path.as_str();
                let (n, d) = meter.measure(&r.value, cap, index)?;
                let old = meter.at(&doc, path, index)?.0;
                (n, old, tokens(path) + d)
            }
            PatchOperation::Remove(r) => (0, meter.at(&doc, r.path.as_str(), index)?.0, 0),
            PatchOperation::Move(m) => {
                let path = m.path.as_str();
                let d = meter.at(&doc, m.from.as_str(), index)?.1;
                let old = meter.replaced(&doc, path, index)?;
                (entry(path), old, tokens(path) + d)
            }
            PatchOperation::Copy(c) => {
                let budget = MAX_COPY_BYTES - copied;
                let (n, d) = match doc.pointer(c.from.as_str()) {
                    Some(v) => meter.measure(v, budget.saturating_add(1), index)?,
                    None => (0, 0),
                };
                if n > budget {
                    return Err(PatchBoundError::CopyTooLarge { index });
                }
                copied += n;
                let path = c.path.as_str();
                let old = meter.replaced(&doc, path, index)?;
                (n + entry(path), old, tokens(path) + d)
            }
            PatchOperation::Test(_) => (0, 0, 0),
        };
        if nest > depth_limit {
            return Err(PatchBoundError::TooDeep {
                index,
                op: name,
                limit: depth_limit,
            });
        }
        let after = size.saturating_add(added).saturating_sub(removed);
        if after > size_limit {
            return Err(PatchBoundError::TooLarge {
                index,
                op: name,
                limit: size_limit,
            });
        }
        if json_patch::patch_unsafe(&mut doc, std::slice::from_ref(op)).is_err() {
            return Ok(());
        }
        size = after;
    }
    Ok(())
}

/// Most bytes measured while checking one reply: sizes are measured per operation, and an
/// operation like `move` there and back costs a measure each time without growing anything.
const MAX_WORK_BYTES: usize = 32 * MAX_MANIFEST_BYTES;

/// Measures values, counting the work against [`MAX_WORK_BYTES`].
#[derive(Default)]
struct Meter {
    work: usize,
}

impl Meter {
    fn measure(
        &mut self,
        v: &Value,
        limit: usize,
        index: usize,
    ) -> Result<(usize, usize), PatchBoundError> {
        let left = MAX_WORK_BYTES.saturating_sub(self.work);
        let (n, d) = measure(v, limit.min(left.saturating_add(1)));
        self.work = self.work.saturating_add(n);
        if self.work > MAX_WORK_BYTES {
            return Err(PatchBoundError::TooCostly { index });
        }
        Ok((n, d))
    }

    /// Size and depth of the value at `path` (zero when there is none).
    fn at(
        &mut self,
        doc: &Value,
        path: &str,
        index: usize,
    ) -> Result<(usize, usize), PatchBoundError> {
        match doc.pointer(path) {
            Some(v) => self.measure(v, usize::MAX, index),
            None => Ok((0, 0)),
        }
    }

    /// Size of the member a new value at `path` would replace (0 when it would be inserted).
    fn replaced(
        &mut self,
        doc: &Value,
        path: &str,
        index: usize,
    ) -> Result<usize, PatchBoundError> {
        if parent_is_object(doc, path) {
            Ok(self.at(doc, path, index)?.0)
        } else {
            Ok(0)
        }
    }
}

fn path_of(op: &PatchOperation) -> &str {
    match op {
        PatchOperation::Add(o) => o.path.as_str(),
        PatchOperation::Remove(o) => o.path.as_str(),
        PatchOperation::Replace(o) => o.path.as_str(),
        PatchOperation::Move(o) => o.path.as_str(),
        PatchOperation::Copy(o) => o.path.as_str(),
        PatchOperation::Test(o) => o.path.as_str(),
    }
}

fn op_name(op: &PatchOperation) -> &'static str {
    match op {
        PatchOperation::Add(_) => "add",
        PatchOperation::Remove(_) => "remove",
        PatchOperation::Replace(_) => "replace",
        PatchOperation::Move(_) => "move",
        PatchOperation::Copy(_) => "copy",
        PatchOperation::Test(_) => "test",
    }
}

/// Reference tokens in a JSON pointer: the depth at which it places a value.
fn tokens(pointer: &str) -> usize {
    pointer.matches('/').count()
}

/// Whether the parent of `pointer` is an object (where a new value replaces a same-named member).
fn parent_is_object(doc: &Value, pointer: &str) -> bool {
    let parent = pointer.rfind('/').map_or("", |i| &pointer[..i]);
    matches!(doc.pointer(parent), Some(Value::Object(_)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ops(v: Value) -> Vec<PatchOperation> {
        serde_json::from_value(v).expect("patch")
    }

    #[test]
    fn doubling_copies_are_refused_before_the_document_grows() {
        let object = json!({"data": "x".repeat(64 << 10)});
        let mut patch = vec![json!({"op": "copy", "from": "/data", "path": "/d0"})];
        for i in 1..22 {
            patch.push(json!({"op": "copy", "from": "", "path": format!("/d{i}")}));
        }
        let e = check(&object, &ops(Value::Array(patch))).unwrap_err();
        assert!(
            matches!(
                e,
                PatchBoundError::TooLarge { .. } | PatchBoundError::CopyTooLarge { .. }
            ),
            "{e}"
        );
    }

    #[test]
    fn ordinary_patches_pass_and_replacing_a_member_does_not_count_twice() {
        let object = json!({"metadata": {"labels": {}}, "spec": {"replicas": 1}});
        let big = "v".repeat(1 << 20);
        let patch = ops(json!([
            {"op": "add", "path": "/metadata/labels/a", "value": big},
            {"op": "add", "path": "/metadata/labels/a", "value": big},
            {"op": "replace", "path": "/metadata/labels/a", "value": big},
            {"op": "test", "path": "/spec/replicas", "value": 1},
            {"op": "move", "from": "/metadata/labels/a", "path": "/metadata/labels/b"},
            {"op": "remove", "path": "/metadata/labels/b"},
        ]));
        check(&object, &patch).expect("within bounds");
    }

    #[test]
    fn too_many_operations_long_pointers_and_deep_values_are_refused() {
        let object = json!({});
        let many = vec![json!({"op": "test", "path": "", "value": {}}); MAX_PATCH_OPS + 1];
        assert_eq!(
            check(&object, &ops(Value::Array(many))),
            Err(PatchBoundError::TooManyOps {
                count: MAX_PATCH_OPS + 1
            })
        );
        let long = format!("/{}", "k".repeat(MAX_POINTER_BYTES));
        assert_eq!(
            check(
                &object,
                &ops(json!([{"op": "add", "path": long, "value": 1}]))
            ),
            Err(PatchBoundError::PointerTooLong { index: 0 })
        );
        let mut deep = json!(1);
        for _ in 0..60 {
            deep = json!([deep]);
        }
        let patch = ops(json!([
            {"op": "add", "path": "/a", "value": deep},
            {"op": "copy", "from": "/a", "path": "/a/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0"},
        ]));
        assert!(matches!(
            check(&object, &patch),
            Err(PatchBoundError::TooDeep { index: 1, .. })
        ));
    }
}
