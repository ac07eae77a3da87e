// assemblyscript-image-override: a Flotilla override plugin in AssemblyScript. Rewrites container
// images of one registry to pull through another (a mirror), in every manifest sent to a cluster.
//
// Config: {"registry": "mirror.example.com", "from": "docker.io"}. "from" defaults to docker.io,
// which also covers images without a registry ("nginx:1.27" -> "mirror.example.com/library/nginx:1.27").
import { onInit, onOverride, fail, OverrideRequest, PatchOp, Value, Kind, stringValue } from "@flotilla/plugin-sdk/assembly";
export {
  flotilla_abi_version, flotilla_alloc, flotilla_dealloc, flotilla_init_v1, flotilla_clusters_v1, flotilla_override_v1,
} from "@flotilla/plugin-sdk/assembly";

let mirror = "";
let from = "docker.io";

onInit((name: string, config: Value): void => {
  mirror = config.getString("registry");
  from = config.getString("from", "docker.io");
  if (mirror.length == 0) fail("config: \"registry\" (the mirror host) is required");
});

/** The image's new name, or "" to leave it. */
function rewrite(image: string): string {
  const slash = image.indexOf("/");
  let registry = "docker.io";
  let rest = image;
  if (slash > 0) {
    const first = image.substring(0, slash);
    if (first.includes(".") || first.includes(":") || first == "localhost") {
      registry = first;
      rest = image.substring(slash + 1);
    }
  }
  if (registry == "index.docker.io") registry = "docker.io";
  if (registry != from) return "";
  if (registry == "docker.io" && !rest.includes("/")) rest = "library/" + rest;
  return mirror + "/" + rest;
}

/** Patches every container image in the pod spec at `path`. */
function pods(spec: Value | null, path: string, ops: Array<PatchOp>): void {
  if (spec === null) return;
  const lists = ["initContainers", "containers"];
  for (let l = 0; l < lists.length; l++) {
    const cs = spec.get(lists[l]);
    if (cs === null || cs.kind != Kind.Array) continue;
    for (let i = 0; i < cs.items.length; i++) {
      const image = cs.items[i].getString("image");
      const to = rewrite(image);
      if (to.length > 0) ops.push(PatchOp.replace(path + "/" + lists[l] + "/" + i.toString() + "/image", stringValue(to)));
    }
  }
}

onOverride((req: OverrideRequest): Array<PatchOp> => {
  const ops: Array<PatchOp> = [];
  const o = req.object;
  const kind = o.getString("kind");
  if (kind == "Pod") pods(o.get("spec"), "/spec", ops);
  else if (kind == "CronJob") pods(o.path(["spec", "jobTemplate", "spec", "template", "spec"]), "/spec/jobTemplate/spec/template/spec", ops);
  else pods(o.path(["spec", "template", "spec"]), "/spec/template/spec", ops);
  return ops;
});
