// An asc transform that writes the optional `flotilla.plugin` custom section (sdk/ABI.md §1):
//
//   asc assembly/index.ts ... --transform @flotilla/plugin-sdk/metadata.js
//
// name and version come from the project's package.json (`flotilla.name` / `flotilla.version`
// override `name` / `version`); capabilities are derived from the module: the flotilla_*_v1
// extension points it exports, plus "log" / "wasi" when it imports them.
import { readFileSync } from "node:fs";
import { resolve } from "node:path";

const POINTS = [
  ["flotilla_filter_v1", "filter"],
  ["flotilla_score_v1", "score"],
  ["flotilla_select_v1", "select"],
  ["flotilla_assign_v1", "assign"],
  ["flotilla_override_v1", "override"],
  ["flotilla_interpret_v1", "interpret"],
];

export default class FlotillaMetadata {
  afterCompile(module) {
    const binaryen = this.binaryen;
    const pkg = JSON.parse(readFileSync(resolve(this.baseDir || ".", "package.json"), "utf8"));
    const own = pkg.flotilla || {};
    const exports = new Set();
    for (let i = 0; i < module.getNumExports(); i++) {
      exports.add(binaryen.getExportInfo(module.getExportByIndex(i)).name);
    }
    const capabilities = POINTS.filter(([e]) => exports.has(e)).map(([, c]) => c);
    let log = false, wasi = false;
    for (let i = 0; i < module.getNumFunctions(); i++) {
      const f = binaryen.getFunctionInfo(module.getFunctionByIndex(i));
      if (f.module === "flotilla:host/v1" && f.base === "log") log = true;
      if (f.module === "wasi_snapshot_preview1") wasi = true;
    }
    if (log) capabilities.push("log");
    if (wasi) capabilities.push("wasi");
    const meta = { abi: 1, name: own.name || pkg.name || "", version: own.version || pkg.version || "", capabilities };
    module.addCustomSection("flotilla.plugin", new TextEncoder().encode(JSON.stringify(meta)));
  }
}
