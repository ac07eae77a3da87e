
/**
 * Labels the manifest sent to each cluster with `label: <cluster name>` (JSON Patch add; the
 * manifest's metadata.labels must exist, as it does in the scenario).
 */
onOverride((req: OverrideRequest): Array<PatchOp> => {
  const ops: Array<PatchOp> = [];
  const labels = req.object.path(["metadata", "labels"]);
  if (labels !== null && labels.kind == Kind.Object) {
    ops.push(PatchOp.add("/metadata/labels/" + pointerEscape(label), stringValue(clusterName(req.cluster))));
  }
  return ops;
});
