
/**
 * Divided bindings: every replica goes to the clusters labelled `label`, split evenly (the first
 * take the remainder). Skips (the built-in assigners decide) for Duplicated bindings and when no
 * selected cluster is labelled.
 */
onAssign((req: Value, rows: Array<DetailRow>): AssignResult => {
  const type = req.path(["placement", "replicaScheduling"]);
  const divided = type !== null && type.getString("replicaSchedulingType") == "Divided";
  const picked: Array<i32> = [];
  for (let i = 0; i < rows.length; i++) if (labelled(rows[i].cluster)) picked.push(i);
  if (!divided || picked.length == 0) return AssignResult.skip();
  const r = req.get("replicas");
  const replicas = r !== null && r.kind == Kind.Number ? <i32>r.num : 0;
  const n = picked.length;
  const counts: Array<i32> = [];
  for (let k = 0; k < n; k++) counts.push(replicas / n + (k < replicas % n ? 1 : 0));
  return AssignResult.assigned(picked, counts);
});
