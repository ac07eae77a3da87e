
/** 100 for clusters labelled `label`, 0 for the others (0..100; the profile's weight multiplies). */
onScore((req: Value, clusters: Array<Value>): Array<i64> => {
  const out = new Array<i64>(clusters.length);
  for (let i = 0; i < clusters.length; i++) out[i] = labelled(clusters[i]) ? 100 : 0;
  return out;
});
