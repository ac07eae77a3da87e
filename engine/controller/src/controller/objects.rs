//! Reads and API handles the controllers share (a leaf module: it imports no controller).

use std::sync::Arc;

use flotilla_api::work::ResourceBinding;
use kube::api::{Api, DynamicObject};

use crate::{Context, Error, api_resource};

/// An `Api` in `namespace`, or cluster-wide when it is empty.
pub fn namespaced_or_all(
    ctx: &Context,
    namespace: &str,
    resource: &kube::api::ApiResource,
) -> Api<DynamicObject> {
    if namespace.is_empty() {
        Api::all_with(ctx.client.clone(), resource)
    } else {
        Api::namespaced_with(ctx.client.clone(), namespace, resource)
    }
}

/// The template `rb` was made from: from the cache, else read live (a kind no cache holds, or
/// one the cache has not seen yet); `None` when it is gone or was replaced (another uid).
///
/// # Errors
/// Fails when the live read fails.
pub async fn template_of(
    ctx: &Context,
    rb: &ResourceBinding,
) -> Result<Option<Arc<DynamicObject>>, Error> {
    let res = &rb.spec.resource;
    let cached = ctx
        .templates
        .get(&(res.api_version.clone(), res.kind.clone()))
        .and_then(|c| c.get(&res.namespace, &res.name));
    let template = match cached {
        Some(t) => Some(t),
        None => namespaced_or_all(
            ctx,
            &res.namespace,
            &api_resource(&res.api_version, &res.kind),
        )
        .get_opt(&res.name)
        .await?
        .map(Arc::new),
    };
    Ok(template
        .filter(|t| res.uid.is_empty() || t.metadata.uid.as_deref() == Some(res.uid.as_str())))
}
