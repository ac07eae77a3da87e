
/**
 * InterpretReplica: the object's replicas are its label `label` when that holds a number, else
 * spec.replicas, else 1. Other operations are not implemented (the customization routes only
 * replicaResource here).
 */
onInterpret((req: InterpretRequest): string => {
  if (req.operation != "InterpretReplica") { fail(req.operation + " not implemented"); return ""; }
  let replicas: i64 = 1;
  const o = req.object;
  if (o !== null) {
    const r = o.path(["spec", "replicas"]);
    if (r !== null && r.kind == Kind.Number) replicas = <i64>r.num;
    const l = o.path(["metadata", "labels"]);
    const v = l !== null ? l.get(label) : null;
    if (v !== null && v.kind == Kind.String && v.str.length > 0) {
      const n = I64.parseInt(v.str, 10);
      if (n.toString() == v.str) replicas = n;
    }
  }
  return "{\"replicas\":" + replicas.toString() + "}";
});
