
/** Keeps only the clusters labelled `label`, in the order given; when none is, keeps them all. */
onSelect((req: Value, rows: Array<DetailRow>): SelectResult => {
  const keep: Array<i32> = [];
  const all: Array<i32> = [];
  for (let i = 0; i < rows.length; i++) {
    all.push(i);
    if (labelled(rows[i].cluster)) keep.push(i);
  }
  return new SelectResult(keep.length > 0 ? keep : all);
});
