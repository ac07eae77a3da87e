
use flotilla_pdk::Detail;
use flotilla_pdk::abi::AssignReply;

/// The part of a `Placement` this plugin reads.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Placement {
    /// `replicaScheduling`.
    pub replica_scheduling: Option<ReplicaScheduling>,
}

/// `replicaScheduling`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ReplicaScheduling {
    /// `Duplicated` or `Divided`.
    pub replica_scheduling_type: String,
}

impl Plugin for Template {
    type Cluster = Cluster;
    type Binding = BindingRequest<serde_json::Value, Placement>;

    fn new(init: InitRequest) -> Result<Self, String> {
        Ok(Template { label: label(&init)? })
    }

    /// Divided bindings: every replica goes to the clusters labelled `label`, split evenly (the
    /// first clusters take the remainder). Skips (the built-in assigners decide) for Duplicated
    /// bindings and when no selected cluster is labelled.
    fn assign(
        &mut self,
        binding: &Self::Binding,
        clusters: &[Detail<'_, Cluster>],
    ) -> Result<AssignReply, String> {
        let divided = binding
            .placement
            .replica_scheduling
            .as_ref()
            .is_some_and(|r| r.replica_scheduling_type == "Divided");
        let labelled: Vec<u32> = (0..clusters.len() as u32)
            .filter(|&i| clusters[i as usize].cluster.has(&self.label))
            .collect();
        if !divided || labelled.is_empty() {
            return Ok(AssignReply::Skip);
        }
        let replicas = binding.replicas.unwrap_or(0).max(0);
        let n = labelled.len() as i32;
        let out = labelled
            .iter()
            .enumerate()
            .map(|(k, &row)| (row, replicas / n + i32::from((k as i32) < replicas % n)))
            .collect();
        Ok(AssignReply::Assigned(out))
    }
}

flotilla_pdk::export_plugin!(Template, name = "__NAME__", version = "0.1.0", points = [assign]);
