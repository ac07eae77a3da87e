// assemblyscript-shard-interpreter: a Flotilla resource interpreter in AssemblyScript for a
// `Shard` CRD (example.com/v1), served by flotilla_interpret_v1 (sdk/ABI.md §10).
//
//   InterpretReplica: {"replicas": spec.replicas}, 1 when unset;
//   InterpretHealth:  healthy when status.observedGeneration >= metadata.generation and
//                     status.readyReplicas >= spec.replicas.
// Other operations fail (the customization does not route them here).
import { onInterpret, fail, InterpretRequest, Value, Kind, Writer } from "@flotilla/plugin-sdk/assembly";
export {
  flotilla_abi_version, flotilla_alloc, flotilla_dealloc, flotilla_clusters_v1, flotilla_interpret_v1,
} from "@flotilla/plugin-sdk/assembly";

/** The number at `keys` of `v`, or `fallback`. */
function num(v: Value | null, keys: Array<string>, fallback: f64): f64 {
  if (v === null) return fallback;
  const n = v.path(keys);
  return n !== null && n.kind == Kind.Number ? n.num : fallback;
}

onInterpret((req: InterpretRequest): string => {
  if (req.operation == "InterpretReplica") {
    return new Writer().raw("{\"replicas\":").number(num(req.object, ["spec", "replicas"], 1)).raw("}").toString();
  }
  if (req.operation == "InterpretHealth") {
    const o = req.observedObject;
    const healthy = num(o, ["status", "observedGeneration"], 0) >= num(o, ["metadata", "generation"], 0)
      && num(o, ["status", "readyReplicas"], 0) >= num(o, ["spec", "replicas"], 1);
    return healthy ? "{\"healthy\":true}" : "{\"healthy\":false}";
  }
  fail(req.operation + " is not implemented by assemblyscript-shard-interpreter");
  return "";
});
