
use flotilla_pdk::abi::{OverrideReply, OverrideRequest};

impl Plugin for Template {
    type Cluster = Cluster;
    type Binding = BindingRequest;

    fn new(init: InitRequest) -> Result<Self, String> {
        Ok(Template { label: label(&init)? })
    }

    /// Labels the manifest sent to each cluster with `label: <cluster name>` (JSON Patch `add`;
    /// the manifest's `metadata.labels` must exist, as it does in the scenario).
    fn override_manifest(
        &mut self,
        request: OverrideRequest<serde_json::Value, Cluster>,
    ) -> Result<OverrideReply, String> {
        if request.object["metadata"]["labels"].is_object() {
            let path = format!(
                "/metadata/labels/{}",
                self.label.replace('~', "~0").replace('/', "~1")
            );
            let op = serde_json::json!({"op": "add", "path": path, "value": request.cluster.metadata.name});
            return Ok(OverrideReply { patch: vec![op] });
        }
        Ok(OverrideReply::default())
    }
}

flotilla_pdk::export_plugin!(Template, name = "__NAME__", version = "0.1.0", points = [override_manifest]);
