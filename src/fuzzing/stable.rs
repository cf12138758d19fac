//! Stable mode: each target on its committed seeds, then on seeded
//! random mutations of them (flips, inserts, deletes, splices), a
//! bounded count. A failure names the input to add to the corpus.

use super::xorshift;

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let seeds: Vec<Vec<u8>> = files.iter().map(|p| std::fs::read(p).unwrap()).collect();
    assert!(!seeds.is_empty(), "no seeds in {}", dir.display());
    seeds
}

fn mutate(seeds: &[Vec<u8>], next: &mut impl FnMut() -> u64) -> Vec<u8> {
    let pick = |n: u64, len: usize| (n % (len as u64 + 1)) as usize;
    let mut data = seeds[(next() % seeds.len() as u64) as usize].clone();
    for _ in 0..1 + next() % 4 {
        match next() % 6 {
            0 if !data.is_empty() => {
                let i = pick(next(), data.len() - 1);
                data[i] ^= 1 << (next() % 8);
            }
            1 => {
                let i = pick(next(), data.len());
                let bytes: Vec<u8> = (0..1 + next() % 8).map(|_| next() as u8).collect();
                data.splice(i..i, bytes);
            }
            2 if !data.is_empty() => {
                let i = pick(next(), data.len() - 1);
                let j = (i + 1 + pick(next(), 16)).min(data.len());
                data.drain(i..j);
            }
            3 => {
                let other = &seeds[(next() % seeds.len() as u64) as usize];
                let i = pick(next(), data.len());
                let j = pick(next(), other.len());
                data.truncate(i);
                data.extend_from_slice(&other[j..]);
            }
            4 => {
                let i = pick(next(), data.len());
                let interesting: &[&[u8]] = &[
                    b"\n",
                    b"\r\n",
                    "\u{e9}".as_bytes(),
                    "\u{1f600}".as_bytes(),
                    b"\xff",
                    b"\x80",
                    b"\"",
                    b"{}",
                    b"0",
                ];
                let piece = interesting[(next() % interesting.len() as u64) as usize];
                data.splice(i..i, piece.iter().copied());
            }
            _ => {
                let i = pick(next(), data.len());
                data.truncate(i);
            }
        }
    }
    data
}

pub(super) fn drive(target: &str, run: fn(&[u8]), mutations: usize) {
    let seeds = corpus(target);
    for seed in &seeds {
        run(seed);
    }
    let mut next = xorshift(target.len() as u64 * 7919);
    for _ in 0..mutations {
        let data = mutate(&seeds, &mut next);
        let shown = data.clone();
        let outcome = std::panic::catch_unwind(|| run(&data));
        assert!(outcome.is_ok(), "{target} failed on {shown:?}");
    }
}
