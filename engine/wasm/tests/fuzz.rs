//! Bounded fuzzing of the ABI boundary (runs in CI in well under a second): random and mutated
//! guest replies through the host's decoders, and random requests through a real guest. Nothing
//! may panic; whatever is accepted must have the right shape.

use flotilla_wasm::fuzz_decode;

/// xorshift64*: deterministic, so a failure is reproducible from the seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
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
    for _ in 0..=rng.below(4) {
        match rng.below(4) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] = rng.next() as u8;
            }
            1 if !v.is_empty() => {
                let i = rng.below(v.len());
                v.remove(i);
            }
            2 => {
                let i = rng.below(v.len() + 1);
                const ALPHABET: &[u8] = b"{}[]\",:0123456789-e\\u";
                v.insert(i, ALPHABET[rng.below(ALPHABET.len())]);
            }
            _ => v.truncate(rng.below(v.len() + 1)),
        }
    }
    v
}

#[test]
fn reply_decoding_never_panics_and_accepts_only_well_shaped_replies() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut accepted = 0;
    for _ in 0..100_000 {
        let point = rng.below(5);
        let n = rng.below(8);
        let result = match rng.below(3) {
            0 => None,
            1 => {
                let len = rng.below(32);
                Some(rng.bytes(len))
            }
            _ => {
                let seed = SEEDS[rng.below(SEEDS.len())];
                Some(mutate(&mut rng, seed))
            }
        };
        let rows = match rng.below(3) {
            0 => None,
            1 => Some(rng.bytes(n * if point == 1 { 8 } else { 1 })),
            _ => {
                let len = rng.below(80);
                Some(rng.bytes(len).iter().map(|b| b % 4).collect())
            }
        };
        if let Ok(len) = fuzz_decode(point, n, result.as_deref(), rows.as_deref()) {
            accepted += 1;
            if point <= 1 {
                assert_eq!(len, n, "filter/score must yield one entry per row");
            }
        }
    }
    assert!(
        accepted > 1000,
        "the fuzzer should also reach valid replies ({accepted})"
    );
}
