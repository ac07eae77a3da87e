
use flotilla_pdk::abi::{InterpretReply, InterpretRequest};

impl Plugin for Template {
    type Cluster = Cluster;
    type Binding = BindingRequest;

    fn new(init: InitRequest) -> Result<Self, String> {
        Ok(Template { label: label(&init)? })
    }

    /// InterpretReplica: the object's replicas are its label `label` when that holds a number,
    /// else `spec.replicas`, else 1. Other operations are not implemented (the customization
    /// routes only replicaResource here).
    fn interpret(&mut self, request: InterpretRequest) -> Result<InterpretReply, String> {
        if request.operation != "InterpretReplica" {
            return Err(format!("{} not implemented", request.operation));
        }
        let object = request.object.unwrap_or_default();
        let from_label = object["metadata"]["labels"][self.label.as_str()]
            .as_str()
            .and_then(|v| v.parse::<i64>().ok());
        let replicas = from_label
            .or_else(|| object["spec"]["replicas"].as_i64())
            .unwrap_or(1);
        Ok(InterpretReply {
            replicas: Some(replicas),
            ..Default::default()
        })
    }
}

flotilla_pdk::export_plugin!(Template, name = "__NAME__", version = "0.1.0", points = [interpret]);
