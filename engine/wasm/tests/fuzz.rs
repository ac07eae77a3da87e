//! Bounded fuzzing of the ABI boundary (runs in CI in seconds): random and mutated guest replies
//! of every kind (filter, score, select, assign in JSON and in binary `set_rows`, override, and
//! binding preemption's victims in JSON and binary) through the host's decode-and-validate path. Nothing may panic; structured replies are checked
//! against an independent oracle (accepted exactly when valid for the request), and whatever is
//! accepted must be valid for its request.

use flotilla_core::framework::{Assignment, Selection};
use flotilla_wasm::patch::{MAX_MANIFEST_BYTES, MAX_PATCH_OPS};
use flotilla_wasm::{
    FuzzDecoded, FuzzRequest, MAX_MESSAGE_BYTES, MAX_SCORE, MIN_SCORE, fuzz_decode,
    fuzz_decode_victims,
};
use serde_json::{Value, json};

use fastrand::Rng;

/// `n` random bytes.
fn bytes(rng: &mut Rng, n: usize) -> Vec<u8> {
    let mut v = vec![0; n];
    rng.fill(&mut v);
    v
}

const SEEDS: &[&[u8]] = &[
    br#"{"reasons":["a","b"]}"#,
    br#"{"reasons":[]}"#,
    br#"{"selected":[0,2,1]}"#,
    br#"{"failed":"no"}"#,
    br#""skip""#,
    br#"{"assigned":[[0,3],[1,-2],[4294967295,1]]}"#,
    br#"{"unschedulable":"x"}"#,
    br#"{"patch":[{"op":"add","path":"/a","value":1},{"op":"remove","path":"/b"}]}"#,
    br#"{"patch":[{"op":"bogus"}]}"#,
];

fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut v = seed.to_vec();
    for _ in 0..=rng.usize(..4) {
        match rng.usize(..4) {
            0 if !v.is_empty() => {
                let i = rng.usize(..v.len());
                v[i] = rng.u64(..) as u8;
            }
            1 if !v.is_empty() => {
                let i = rng.usize(..v.len());
                v.remove(i);
            }
            2 => {
                let i = rng.usize(..v.len() + 1);
                const ALPHABET: &[u8] = b"{}[]\",:0123456789-e\\u";
                v.insert(i, ALPHABET[rng.usize(..ALPHABET.len())]);
            }
            _ => v.truncate(rng.usize(..v.len() + 1)),
        }
    }
    v
}

/// Replies of each kind through the decoder, per test.
const PER_KIND: usize = 2_000;

const FILTER: usize = 0;
const SCORE: usize = 1;
const SELECT: usize = 2;
const ASSIGN: usize = 3;
const OVERRIDE: usize = 4;

/// The manifest override replies patch: one 100 KiB string to copy around, so that four
/// doublings pass the manifest bound.
fn manifest() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "web", "labels": {"app": "web"}},
           "spec": {"replicas": 2, "template": {"data": "x".repeat(100 << 10)}, "list": [1, 2, 3]}})
}

fn request(
    point: usize,
    rows: usize,
    replicas: i32,
    divided: bool,
    object: &Value,
) -> FuzzRequest<'_> {
    FuzzRequest {
        point,
        rows,
        replicas,
        divided,
        object,
    }
}

/// Length of `v` as compact JSON, for documents whose strings need no escapes (serializing
/// megabytes of manifests in a debug build would take most of the test's time).
fn json_len(v: &Value) -> usize {
    match v {
        Value::String(s) => s.len() + 2,
        Value::Array(a) => 2 + a.len().saturating_sub(1) + a.iter().map(json_len).sum::<usize>(),
        Value::Object(m) => {
            2 + m.len().saturating_sub(1)
                + m.iter()
                    .map(|(k, v)| k.len() + 3 + json_len(v))
                    .sum::<usize>()
        }
        scalar => scalar.to_string().len(),
    }
}

/// Whatever the decoder accepted must be valid for the request, whatever the reply was.
fn assert_valid(req: &FuzzRequest<'_>, decoded: &FuzzDecoded) {
    let n = req.rows;
    match decoded {
        FuzzDecoded::Filter(v) => {
            assert_eq!(v.len(), n, "one verdict per row");
            for r in v.iter().flatten() {
                assert!(r.len() <= MAX_MESSAGE_BYTES, "reason of {} bytes", r.len());
            }
        }
        FuzzDecoded::Score(v) => {
            assert_eq!(v.len(), n, "one score per row");
            assert!(
                v.iter().all(|s| (MIN_SCORE..=MAX_SCORE).contains(s)),
                "{v:?}"
            );
        }
        FuzzDecoded::Select(Selection::Selected(idx)) => {
            let mut seen = vec![false; n];
            for &i in idx {
                assert!(i < n, "selected {i} of {n}");
                assert!(!std::mem::replace(&mut seen[i], true), "selected {i} twice");
            }
        }
        FuzzDecoded::Select(Selection::Failed(m))
        | FuzzDecoded::Assign(Assignment::Unschedulable(m)) => {
            assert!(m.len() <= MAX_MESSAGE_BYTES, "message of {} bytes", m.len());
        }
        FuzzDecoded::Assign(Assignment::Assigned(t)) => {
            let mut seen = std::collections::BTreeSet::new();
            let mut sum = 0i64;
            for c in t {
                let row: usize = c.name[1..].parse().expect("row name");
                assert!(row < n, "row {row} of {n}");
                assert!(seen.insert(row), "row {row} twice");
                assert!(
                    (0..=req.replicas).contains(&c.replicas),
                    "{} of {}",
                    c.replicas,
                    req.replicas
                );
                sum += i64::from(c.replicas);
            }
            if req.divided {
                assert_eq!(
                    sum,
                    i64::from(req.replicas),
                    "divided replies place every replica"
                );
            }
        }
        FuzzDecoded::Assign(Assignment::Skip) => {}
        FuzzDecoded::Override(ops) => {
            assert!(ops.len() <= MAX_PATCH_OPS);
            let mut doc = req.object.clone();
            for op in ops {
                if json_patch::patch(&mut doc, std::slice::from_ref(op)).is_err() {
                    break;
                }
            }
            let size = json_len(&doc);
            assert!(
                size <= MAX_MANIFEST_BYTES,
                "accepted a patch growing the manifest to {size}"
            );
        }
    }
}

#[test]
fn mutated_replies_never_panic_and_whatever_is_accepted_is_valid_for_its_request() {
    let mut rng = Rng::with_seed(0x9E37_79B9_7F4A_7C15);
    let object = json!({"metadata": {"name": "web"}, "spec": {"replicas": 2}});
    let mut tried = [0usize; 5];
    let mut accepted = [0usize; 5];
    for _ in 0..PER_KIND * 5 {
        let point = rng.usize(..5);
        tried[point] += 1;
        let n = rng.usize(..8);
        let result = match rng.usize(..3) {
            0 => None,
            1 => {
                let len = rng.usize(..32);
                Some(bytes(&mut rng, len))
            }
            _ => {
                let seed = SEEDS[rng.usize(..SEEDS.len())];
                Some(mutate(&mut rng, seed))
            }
        };
        let rows = match rng.usize(..3) {
            0 => None,
            1 => Some(bytes(
                &mut rng,
                n * if point == SCORE || point == ASSIGN {
                    8
                } else {
                    1
                },
            )),
            _ => {
                let len = rng.usize(..80);
                Some(bytes(&mut rng, len).iter().map(|b| b % 4).collect())
            }
        };
        let req = request(
            point,
            n,
            rng.usize(..4) as i32,
            rng.usize(..2) == 0,
            &object,
        );
        if let Ok(d) = fuzz_decode(req, result.as_deref(), rows.as_deref()) {
            accepted[point] += 1;
            assert_valid(&req, &d);
        }
    }
    assert!(tried.iter().all(|&t| t >= 1_000), "{tried:?}");
    assert!(
        accepted.iter().sum::<usize>() > 100,
        "the fuzzer should also reach valid replies ({accepted:?})"
    );
}

/// A value for a replicas field: mostly small, sometimes at the edges of `i32`.
fn replicas(rng: &mut Rng, want: i32) -> i32 {
    match rng.usize(..8) {
        0 => -1,
        1 => i32::MAX,
        2 => i32::MIN,
        3 => want.saturating_add(1),
        _ => rng.usize(..want.max(0) as usize + 1) as i32,
    }
}

#[test]
fn structured_replies_are_accepted_exactly_when_valid_for_their_request() {
    let mut rng = Rng::with_seed(0xD1B5_4A32_D192_ED03);
    let object = manifest();
    let long = "m".repeat(128 << 10);
    let mut outcomes = [[0usize; 2]; 5];
    for point in [FILTER, SCORE, SELECT, ASSIGN] {
        for _ in 0..PER_KIND {
            let n = rng.usize(..7);
            let (result, rows, valid, want_replicas, divided): (
                Option<Vec<u8>>,
                Option<Vec<u8>>,
                bool,
                i32,
                bool,
            ) = match point {
                FILTER => {
                    let len = if rng.usize(..6) == 0 { n + 1 } else { n };
                    let reasons = rng.usize(..3);
                    let verdicts: Vec<u8> = (0..len).map(|_| rng.usize(..4) as u8).collect();
                    let list: Vec<String> = (0..reasons)
                        .map(|i| {
                            if rng.usize(..8) == 0 {
                                long.clone()
                            } else {
                                format!("reason {i}")
                            }
                        })
                        .collect();
                    let valid = len == n && verdicts.iter().all(|&v| usize::from(v) <= reasons);
                    let result = serde_json::to_vec(&json!({"reasons": list})).expect("json");
                    (Some(result), Some(verdicts), valid, 0, false)
                }
                SCORE => {
                    let len = if rng.usize(..6) == 0 {
                        n.saturating_sub(1)
                    } else {
                        n
                    };
                    let scores: Vec<i64> = (0..len)
                        .map(|_| match rng.usize(..6) {
                            0 => -1,
                            1 => 101,
                            2 => i64::MIN,
                            _ => rng.usize(..101) as i64,
                        })
                        .collect();
                    let valid = len == n && scores.iter().all(|s| (0..=100).contains(s));
                    let rows = scores.iter().flat_map(|s| s.to_le_bytes()).collect();
                    (None, Some(rows), valid, 0, false)
                }
                SELECT => {
                    if rng.usize(..10) == 0 {
                        let r = serde_json::to_vec(&json!({"failed": long})).expect("json");
                        (Some(r), None, true, 0, false)
                    } else {
                        let k = rng.usize(..n + 2);
                        let idx: Vec<u32> = (0..k).map(|_| rng.usize(..n + 1) as u32).collect();
                        let mut sorted = idx.clone();
                        sorted.sort_unstable();
                        sorted.dedup();
                        let valid =
                            sorted.len() == idx.len() && idx.iter().all(|&i| (i as usize) < n);
                        let r = serde_json::to_vec(&json!({"selected": idx})).expect("json");
                        (Some(r), None, valid, 0, false)
                    }
                }
                _ => {
                    let want = if rng.usize(..10) == 0 {
                        i32::MAX
                    } else {
                        rng.usize(..6) as i32
                    };
                    let divided = rng.usize(..2) == 0;
                    let k = rng.usize(..n + 2);
                    let pairs: Vec<(u32, i32)> = (0..k)
                        .map(|_| (rng.usize(..n + 1) as u32, replicas(&mut rng, want)))
                        .collect();
                    let mut rows: Vec<u32> = pairs.iter().map(|p| p.0).collect();
                    rows.sort_unstable();
                    rows.dedup();
                    let sum: i64 = pairs.iter().map(|p| i64::from(p.1)).sum();
                    let valid = rows.len() == pairs.len()
                        && pairs
                            .iter()
                            .all(|&(r, v)| (r as usize) < n && (0..=want).contains(&v))
                        && (!divided || sum == i64::from(want));
                    let json = serde_json::to_vec(&json!({"assigned": pairs})).expect("json");
                    let binary: Vec<u8> = pairs
                        .iter()
                        .flat_map(|&(r, v)| r.to_le_bytes().into_iter().chain(v.to_le_bytes()))
                        .collect();
                    match rng.usize(..5) {
                        0 | 1 => (Some(json), None, valid, want, divided),
                        2 | 3 => (None, Some(binary), valid, want, divided),
                        _ => (Some(json), Some(binary), false, want, divided),
                    }
                }
            };
            let req = request(point, n, want_replicas, divided, &object);
            let got = fuzz_decode(req, result.as_deref(), rows.as_deref());
            assert_eq!(
                got.is_ok(),
                valid,
                "point {point}, {n} rows, replicas {want_replicas}, divided {divided}: {:?} / {:?} -> {got:?}",
                result
                    .as_deref()
                    .map(String::from_utf8_lossy)
                    .map(|s| s.chars().take(200).collect::<String>()),
                rows
            );
            if let Ok(d) = &got {
                assert_valid(&req, d);
            }
            outcomes[point][usize::from(valid)] += 1;
        }
    }
    // Override: random operations over the manifest's paths, copies of the whole document among
    // them; accepted patches must keep the manifest within bounds when applied.
    for _ in 0..1_000 {
        let ops: Vec<Value> = (0..rng.usize(..12))
            .map(|i| {
                let j = rng.usize(..i + 1);
                match rng.usize(..10) {
                    // Doubling the whole manifest into a new top-level member.
                    0..=3 => json!({"op": "copy", "from": "", "path": format!("/k{i}")}),
                    4 | 5 => json!({"op": "add", "path": format!("/k{i}"), "value": {"v": i}}),
                    6 => json!({"op": "remove", "path": format!("/k{j}")}),
                    7 => json!({"op": "replace", "path": "/spec/replicas", "value": i}),
                    8 => json!({"op": "move", "from": format!("/k{j}"), "path": format!("/m{i}")}),
                    _ => json!({"op": "test", "path": "/kind", "value": "Deployment"}),
                }
            })
            .collect();
        let reply = serde_json::to_vec(&json!({"patch": ops})).expect("json");
        let req = request(OVERRIDE, 0, 0, false, &object);
        let got = fuzz_decode(req, Some(&reply), None);
        if let Ok(d) = &got {
            assert_valid(&req, d);
        }
        outcomes[OVERRIDE][usize::from(got.is_ok())] += 1;
    }
    for (point, [invalid, valid]) in outcomes.iter().enumerate() {
        assert!(invalid + valid >= 1_000, "point {point}: {outcomes:?}");
        assert!(
            *invalid > 50 && *valid > 50,
            "point {point} must see both: {outcomes:?}"
        );
    }
}

#[test]
fn a_doubling_override_is_refused_without_building_the_document() {
    let object = manifest();
    let mut ops = vec![json!({"op": "copy", "from": "/spec", "path": "/d0"})];
    for i in 1..22 {
        ops.push(json!({"op": "copy", "from": "", "path": format!("/d{i}")}));
    }
    let reply = serde_json::to_vec(&json!({"patch": ops})).expect("json");
    let e = fuzz_decode(request(OVERRIDE, 0, 0, false, &object), Some(&reply), None).unwrap_err();
    assert!(
        e.contains("would exceed") || e.contains("copies would add"),
        "{e}"
    );
}

const VICTIM_SEEDS: &[&[u8]] = &[
    br#"{"victims":[0,2,1]}"#,
    br#"{"victims":[]}"#,
    br#"{"victims":[1,1]}"#,
    br#"{"victims":[4294967295]}"#,
    br#"{"victims":[-1,0.5,"0"]}"#,
    br#"{"victims":[0],"extra":1}"#,
];

/// A candidate count: mostly small, sometimes up to the host's per-cluster bound.
fn candidates(rng: &mut Rng) -> usize {
    match rng.usize(..4) {
        0 => 0,
        1 => rng.usize(..10_001),
        _ => rng.usize(..16),
    }
}

/// Positions for `n` candidates, of random length: mostly a prefix of a shuffled `0..n`, with a
/// duplicate, one out of range (sometimes `u32::MAX`) or one too many now and then.
fn positions(rng: &mut Rng, n: usize) -> Vec<u32> {
    let mut all: Vec<u32> = (0..n)
        .map(|i| u32::try_from(i).expect("n fits u32"))
        .collect();
    rng.shuffle(&mut all);
    all.truncate(rng.usize(..=n));
    match rng.usize(..6) {
        0 if !all.is_empty() => {
            let dup = all[rng.usize(..all.len())];
            all.insert(rng.usize(..=all.len()), dup);
        }
        1 => {
            let out = if rng.bool() {
                u32::MAX
            } else {
                u32::try_from(n).expect("n fits u32") + rng.u32(..4)
            };
            all.insert(rng.usize(..=all.len()), out);
        }
        _ => {}
    }
    all
}

/// The independent oracle: positions are a valid victims reply for `n` candidates exactly when
/// each is below `n` and none repeats.
fn valid_victims(n: usize, positions: &[u32]) -> bool {
    let mut seen = std::collections::HashSet::new();
    positions
        .iter()
        .all(|&p| (p as usize) < n && seen.insert(p))
}

fn le_bytes(positions: &[u32]) -> Vec<u8> {
    positions.iter().flat_map(|p| p.to_le_bytes()).collect()
}

#[test]
fn victims_replies_never_panic_and_whatever_is_accepted_is_in_range_and_unique() {
    let mut rng = Rng::with_seed(0x5EED_0F71_C71A_5EED);
    // [invalid, valid] per reply kind: structured JSON, structured binary, mutated or random.
    let mut outcomes = [[0usize; 2]; 3];
    for i in 0..6_000 {
        let n = candidates(&mut rng);
        let kind = i % 3;
        let (result, rows, expected) = match kind {
            0 => {
                let ps = positions(&mut rng, n);
                let json = serde_json::to_vec(&json!({ "victims": ps })).expect("json");
                let ok = valid_victims(n, &ps);
                (Some(json), None, Some((ps, ok)))
            }
            1 => {
                let ps = positions(&mut rng, n);
                let ok = valid_victims(n, &ps);
                (None, Some(le_bytes(&ps)), Some((ps, ok)))
            }
            _ => {
                let result = match rng.usize(..3) {
                    0 => None,
                    1 => {
                        let len = rng.usize(..64);
                        Some(bytes(&mut rng, len))
                    }
                    _ => {
                        let seed = VICTIM_SEEDS[rng.usize(..VICTIM_SEEDS.len())];
                        Some(mutate(&mut rng, seed))
                    }
                };
                let rows = match rng.usize(..3) {
                    0 => None,
                    // Random bytes of a random size, often not a whole number of positions.
                    1 => {
                        let len = rng.usize(..4 * 64 + 4);
                        Some(bytes(&mut rng, len))
                    }
                    // Small positions, so that some are in range.
                    _ => {
                        let len = rng.usize(..32);
                        let ps: Vec<u32> = (0..len).map(|_| rng.u32(..20)).collect();
                        Some(le_bytes(&ps))
                    }
                };
                (result, rows, None)
            }
        };
        let got = fuzz_decode_victims(n, result.as_deref(), rows.as_deref());
        if let Ok(chosen) = &got {
            assert!(
                chosen.len() <= n && chosen.iter().all(|&p| p < n),
                "out of range for {n} candidates: {chosen:?}"
            );
            let mut unique = chosen.clone();
            unique.sort_unstable();
            unique.dedup();
            assert_eq!(unique.len(), chosen.len(), "repeated: {chosen:?}");
        }
        match (&expected, &rows, &result) {
            // Structured: accepted exactly when valid, and then as given.
            (Some((ps, ok)), ..) => {
                assert_eq!(got.is_ok(), *ok, "{n} candidates, {ps:?}: {got:?}");
                if let Ok(chosen) = &got {
                    let want: Vec<usize> = ps.iter().map(|&p| p as usize).collect();
                    assert_eq!(*chosen, want);
                }
            }
            // A binary reply alone is decided by its bytes: whole positions, valid ones.
            (None, Some(bin), None) => {
                let ps: Vec<u32> = bin
                    .chunks_exact(4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect();
                let ok = bin.len() % 4 == 0 && valid_victims(n, &ps);
                assert_eq!(got.is_ok(), ok, "{n} candidates, {bin:?}: {got:?}");
            }
            // Both or neither: never accepted.
            (None, Some(_), Some(_)) | (None, None, None) => {
                assert!(got.is_err(), "{got:?}");
            }
            (None, None, Some(_)) => {}
        }
        outcomes[kind][usize::from(got.is_ok())] += 1;
    }
    // Random and mutated replies are mostly invalid; they must still reach the accepting path.
    for (kind, [invalid, valid]) in outcomes.iter().enumerate() {
        let least = if kind == 2 { 10 } else { 100 };
        assert!(
            *invalid > 100 && *valid > least,
            "reply kind {kind} must see both: {outcomes:?}"
        );
    }
}
