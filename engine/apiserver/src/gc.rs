//! The garbage collector's job for owner references, done inline when an object leaves the
//! store (as [`super::ApiServer::purge_namespace`] does the namespace controller's): the
//! dependents naming the deleted owner's uid in `metadata.ownerReferences` lose that reference,
//! and those left with no owner are deleted (their finalizers honoured; their own dependents
//! collected in turn). With `propagationPolicy: Orphan` the references are only removed.
//!
//! kube-controller-manager does this for kube-apiserver; Karmada relies on it (a
//! ResourceBinding is owned by its resource template, and goes when the template goes), so
//! Karmada's controllers run against the embedded server need it. Scope: dependents in the same
//! logical cluster, in the owner's namespace for a namespaced owner and cluster-scoped ones for a
//! cluster-scoped owner, among the kinds the server serves; Foreground propagation is handled
//! as Background (the owner does not wait for its dependents).

use serde_json::Value;

use super::{ApiError, ApiServer, Op, Precondition, StoreError, Target, meta_mut, meta_str, rv_of};
use crate::registry;

/// How deep owner chains are followed (a chain longer than this is left for the next delete).
const MAX_DEPTH: usize = 8;
/// Attempts per dependent when concurrent writes conflict.
const ATTEMPTS: usize = 4;

/// `propagationPolicy` of the DeleteOptions: whether dependents are orphaned.
pub(super) fn orphans(opts: &Value) -> bool {
    opts.get("propagationPolicy").and_then(Value::as_str) == Some("Orphan")
        || opts.get("orphanDependents").and_then(Value::as_bool) == Some(true)
}

/// Whether `obj` names `uid` among its owner references.
fn owned_by(obj: &Value, uid: &str) -> bool {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| refs.iter().any(|r| r["uid"] == uid))
}

/// The object's references without `uid`'s.
fn without(obj: &Value, uid: &str) -> Vec<Value> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| refs.iter().filter(|r| r["uid"] != uid).cloned().collect())
        .unwrap_or_default()
}

impl ApiServer {
    /// Collect the dependents of `owner`, just removed from logical cluster `cluster`.
    pub(super) async fn collect_dependents(
        &self,
        cluster: &str,
        owner: &Value,
        orphan: bool,
    ) -> Result<(), ApiError> {
        let mut pending = vec![(owner.clone(), 0usize)];
        while let Some((owner, depth)) = pending.pop() {
            let Some(uid) = meta_str(&owner, "uid").map(str::to_owned) else {
                continue;
            };
            let namespace = meta_str(&owner, "namespace").map(str::to_owned);
            // JSON writes such a uid (a UUID, as every uid this server assigns) as is: only the
            // objects whose stored text contains it can name it, and the others are skipped
            // undecoded. Without this, deleting N objects of a namespace decoded N² of them
            // (1,000 Deployments deleted kept a member's server from answering for a minute).
            let plain = !uid.is_empty()
                && uid
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
            for res in registry::all()
                .into_iter()
                .filter(|r| r.namespaced == namespace.is_some())
            {
                let t = Target {
                    cluster: cluster.to_owned(),
                    res,
                    namespace: namespace.clone(),
                    name: None,
                    sub: None,
                    restricted: None,
                };
                let prefix = Self::prefix(&t);
                let page = if plain {
                    self.store.list_containing(&prefix, uid.as_bytes())
                } else {
                    self.store.list(&prefix, None, None)
                }
                .map_err(super::store_err)?;
                for (key, obj) in page.items {
                    if !owned_by(&obj, &uid) {
                        continue;
                    }
                    if let Some(gone) = self.release(&key, &obj, &uid, orphan).await?
                        && depth + 1 < MAX_DEPTH
                    {
                        pending.push((gone, depth + 1));
                    }
                }
            }
        }
        Ok(())
    }

    /// Drop `uid`'s reference from the dependent at `key`; delete it when no owner is left and
    /// dependents are not orphaned. Returns the dependent when it left the store.
    async fn release(
        &self,
        key: &str,
        obj: &Value,
        uid: &str,
        orphan: bool,
    ) -> Result<Option<Value>, ApiError> {
        let mut obj = obj.clone();
        for _ in 0..ATTEMPTS {
            let refs = without(&obj, uid);
            let has_finalizers = obj
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|f| !f.is_empty());
            let mut new = obj.clone();
            let m = meta_mut(&mut new);
            if refs.is_empty() {
                m.remove("ownerReferences");
            } else {
                m.insert("ownerReferences".into(), Value::Array(refs.clone()));
            }
            let delete = !orphan && refs.is_empty();
            let op = if delete && !has_finalizers {
                Op::Delete
            } else {
                if delete && !m.contains_key("deletionTimestamp") {
                    super::mark_deleting(m);
                }
                Op::Put(new)
            };
            let deleted = matches!(op, Op::Delete);
            match self
                .store
                .write(key.to_owned(), op, Precondition::ModRev(rv_of(&obj)))
                .await
            {
                Ok(c) => return Ok(deleted.then(|| (*c.object).clone())),
                Err(StoreError::Conflict { .. }) => {
                    match self.store.get(key).map_err(super::store_err)? {
                        Some((_, fresh)) if owned_by(&fresh, uid) => obj = fresh,
                        _ => return Ok(None),
                    }
                }
                Err(e) => return Err(super::store_err(e)),
            }
        }
        tracing::warn!(key, "garbage collection gave up after repeated conflicts");
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn orphan_options_and_owner_matching() {
        assert!(orphans(&json!({"propagationPolicy": "Orphan"})));
        assert!(orphans(&json!({"orphanDependents": true})));
        assert!(!orphans(&json!({"propagationPolicy": "Background"})));
        assert!(!orphans(&json!({})));
        let dep = json!({"metadata": {"ownerReferences": [{"uid": "a"}, {"uid": "b"}]}});
        assert!(owned_by(&dep, "a"));
        assert!(!owned_by(&dep, "c"));
        assert_eq!(without(&dep, "a"), vec![json!({"uid": "b"})]);
        assert!(without(&json!({"metadata": {}}), "a").is_empty());
    }
}
