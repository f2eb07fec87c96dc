//! What the memory-floor examples (`examples/hash_floor.rs`,
//! `examples/tree_floor.rs`) share: their key generator, the serialised
//! lookups of their `-dep` variants, and the loop
//! that times each variant's lookups in CPU time, round after round
//! alternately, and prints each variant's median, minimum and maximum.
//!
//! Keeps true: every variant runs over the same keys, once per round, in
//! the order given, so a load change during the run touches all of them.

use super::workload::thread_cpu_nanos;
use std::hint::black_box;

/// A named variant: the lookups of a slice of keys, returning a sum the
/// optimiser cannot drop.
pub type Variant<'a> = (&'a str, Box<dyn Fn(&[u64]) -> u64 + 'a>);

/// The examples' xorshift step: the next value of the state `s`.
pub fn rng(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

/// `f` over `keys`, each key made to depend on the previous result (`z` is
/// 0, unknown to the compiler): one lookup's misses in flight at a time.
pub fn serial(keys: &[u64], f: impl Fn(u64) -> Option<u64>) -> u64 {
    let (z, mut prev) = (black_box(0u64), 0u64);
    keys.iter()
        .map(|&k| {
            prev = f(k + (prev & z)).unwrap_or(0);
            prev
        })
        .sum()
}

/// CPU ns per lookup of `f` over `keys`.
pub fn time(keys: &[u64], mut f: impl FnMut(&[u64]) -> u64) -> f64 {
    let c0 = thread_cpu_nanos().unwrap_or(0);
    black_box(f(keys));
    let c1 = thread_cpu_nanos().unwrap_or(0);
    (c1 - c0) as f64 / keys.len() as f64
}

/// Times `variants` (only the one named `only`, if given) over `keys` for
/// `rounds` rounds, alternating, and prints the figures and the load.
pub fn run(mut variants: Vec<Variant<'_>>, keys: &[u64], rounds: usize, only: Option<&str>) {
    variants.retain(|(name, _)| only.is_none_or(|o| o == *name));
    let mut got: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    for _ in 0..rounds {
        for (i, (_, f)) in variants.iter().enumerate() {
            got[i].push(time(keys, f));
        }
    }
    println!("CPU ns per lookup ({} lookups per round, {rounds} rounds alternating): median [min, max]", keys.len());
    for ((name, _), mut v) in variants.iter().zip(got) {
        v.sort_by(f64::total_cmp);
        println!("{name:>14}: {:7.1} [{:.1}, {:.1}]", v[v.len() / 2], v[0], v[v.len() - 1]);
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average: {}", load.trim());
}
