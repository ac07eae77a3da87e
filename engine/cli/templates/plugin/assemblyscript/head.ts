// __NAME__: a Flotilla __POINT__ plugin in AssemblyScript, on the vendored AssemblyScript SDK
// (flotilla-sdk/, package @flotilla/plugin-sdk). Build: ./build.sh (asc with `--use abort=`: the
// host refuses modules importing env.abort). What it does and how to test and load it: README.md.
import { onInit, fail, clusterLabel, Value, Kind, __IMPORTS__ } from "@flotilla/plugin-sdk/assembly";
export {
  flotilla_abi_version, flotilla_alloc, flotilla_dealloc, flotilla_init_v1, flotilla_clusters_v1, __EXPORT__,
} from "@flotilla/plugin-sdk/assembly";

/** The cluster label this plugin looks at; the profile's config.label overrides it. */
let label = "__LABEL__";

onInit((name: string, config: Value): void => {
  const l = config.get("label");
  if (l === null || l.kind == Kind.Null) return;
  if (l.kind != Kind.String || l.str.length == 0) { fail("config: \"label\" must be a non-empty string"); return; }
  label = l.str;
});

function labelled(cluster: Value): bool {
  return clusterLabel(cluster, label) !== null;
}
