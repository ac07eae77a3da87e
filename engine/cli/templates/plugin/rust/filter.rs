
impl Plugin for Template {
    type Cluster = Cluster;
    type Binding = BindingRequest;

    fn new(init: InitRequest) -> Result<Self, String> {
        Ok(Template { label: label(&init)? })
    }

    /// Clusters labelled `label` do not fit; every other cluster does (so with no labelled
    /// cluster nothing changes).
    fn filter(
        &mut self,
        _binding: &BindingRequest,
        clusters: &[&Cluster],
        out: &mut flotilla_pdk::FilterOut,
    ) -> Result<(), String> {
        for c in clusters {
            if c.has(&self.label) {
                out.unfit(&format!("cluster(s) had label {}", self.label));
            } else {
                out.fit();
            }
        }
        Ok(())
    }
}

flotilla_pdk::export_plugin!(Template, name = "__NAME__", version = "0.1.0", points = [filter]);
