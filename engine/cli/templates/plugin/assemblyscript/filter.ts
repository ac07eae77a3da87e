
/** Clusters labelled `label` do not fit; every other cluster does. */
onFilter((req: Value, clusters: Array<Value>): Array<string> => {
  const reasons = new Array<string>(clusters.length);
  for (let i = 0; i < clusters.length; i++) reasons[i] = labelled(clusters[i]) ? "cluster(s) had label " + label : "";
  return reasons;
});
