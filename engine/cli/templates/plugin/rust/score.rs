
impl Plugin for Template {
    type Cluster = Cluster;
    type Binding = BindingRequest;

    fn new(init: InitRequest) -> Result<Self, String> {
        Ok(Template { label: label(&init)? })
    }

    /// 100 for clusters labelled `label`, 0 for the others (scores are 0..=100; the profile's
    /// weight multiplies them).
    fn score(
        &mut self,
        _binding: &BindingRequest,
        clusters: &[&Cluster],
        out: &mut Vec<i64>,
    ) -> Result<(), String> {
        out.extend(clusters.iter().map(|c| if c.has(&self.label) { 100 } else { 0 }));
        Ok(())
    }
}

flotilla_pdk::export_plugin!(Template, name = "__NAME__", version = "0.1.0", points = [score]);
