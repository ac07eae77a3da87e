
use flotilla_pdk::Detail;
use flotilla_pdk::abi::SelectReply;

impl Plugin for Template {
    type Cluster = Cluster;
    type Binding = BindingRequest;

    fn new(init: InitRequest) -> Result<Self, String> {
        Ok(Template { label: label(&init)? })
    }

    /// Keeps only the clusters labelled `label`, in the order given; when none is labelled,
    /// keeps them all.
    fn select(
        &mut self,
        _binding: &BindingRequest,
        clusters: &[Detail<'_, Cluster>],
    ) -> Result<SelectReply, String> {
        let labelled: Vec<u32> = (0..clusters.len() as u32)
            .filter(|&i| clusters[i as usize].cluster.has(&self.label))
            .collect();
        if labelled.is_empty() {
            return Ok(SelectReply::Selected((0..clusters.len() as u32).collect()));
        }
        Ok(SelectReply::Selected(labelled))
    }
}

flotilla_pdk::export_plugin!(Template, name = "__NAME__", version = "0.1.0", points = [select]);
