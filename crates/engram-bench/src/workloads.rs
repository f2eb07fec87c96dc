//! Workload definitions shared by every implementation of a benchmark: the
//! Engram side reuses them, and the C peers in `peers/pmdk_peers.c` mirror
//! them line for line.
//!
//! What this module keeps true:
//!
//! - **binary-trees** (CLBG): [`binary_trees_node_count`] is the exact sum of
//!   the node counts every implementation must report for a given maximum
//!   depth, after [`binary_trees_max_depth`] has clamped it like CLBG does.
//! - **n-body** (CLBG): [`nbody_initial`], [`advance`] and [`energy`] perform
//!   the same floating-point operations in the same order as the C peer, so
//!   the energies agree to rounding (the tests check 1e-9).
//! - **sps**: [`XorShift64Star`] yields the same sequence as the C peer for
//!   the same seed, and [`sps_reference`] is the checksum every sps
//!   implementation must reach.
//!
//! Nothing here touches persistent memory; these are pure functions.

use std::num::NonZeroU64;

// ---------------------------------------------------------------------------
// binary-trees
// ---------------------------------------------------------------------------

/// Depth of the smallest trees built in the iteration phase.
pub const BINARY_TREES_MIN_DEPTH: u32 = 4;

/// Largest maximum depth the peers accept (2^41 nodes, beyond any machine).
pub const BINARY_TREES_MAX_DEPTH: u32 = 40;

/// The maximum depth CLBG actually uses for a requested one: at least
/// `MIN_DEPTH + 2`, and here also at most [`BINARY_TREES_MAX_DEPTH`].
pub fn binary_trees_max_depth(requested: u32) -> u32 {
    requested.clamp(BINARY_TREES_MIN_DEPTH + 2, BINARY_TREES_MAX_DEPTH)
}

/// Nodes in a complete tree of `depth` (a single leaf has depth 0).
pub fn tree_nodes(depth: u32) -> u64 {
    (1u64 << (depth + 1)) - 1
}

/// Number of trees built at `depth` in the iteration phase.
pub fn binary_trees_iterations(max_depth: u32, depth: u32) -> u64 {
    1u64 << (max_depth - depth + BINARY_TREES_MIN_DEPTH)
}

/// Sum of all node counts checked by the binary-trees program for
/// `max_depth` (already clamped): the stretch tree of `max_depth + 1`, the
/// iteration trees, and the long-lived tree of `max_depth`.
pub fn binary_trees_node_count(max_depth: u32) -> u64 {
    let stretch = tree_nodes(max_depth + 1);
    let long_lived = tree_nodes(max_depth);
    let iterations: u64 =
        (BINARY_TREES_MIN_DEPTH..=max_depth).step_by(2).map(|d| binary_trees_iterations(max_depth, d) * tree_nodes(d)).sum();
    stretch + iterations + long_lived
}

/// Most nodes alive at once: the long-lived tree plus the larger of the
/// stretch tree (built before it, counted anyway) and the deepest
/// iteration tree. An upper bound used to size pools.
pub fn binary_trees_peak_nodes(max_depth: u32) -> u64 {
    tree_nodes(max_depth + 1) + tree_nodes(max_depth)
}

// ---------------------------------------------------------------------------
// n-body
// ---------------------------------------------------------------------------

/// One body of the n-body system; layout identical to `struct body` in C.
/// Persistent, so the Engram implementation keeps the bodies in a pool array.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, engram::Persistent)]
pub struct Body {
    /// Position, x.
    pub x: f64,
    /// Position, y.
    pub y: f64,
    /// Position, z.
    pub z: f64,
    /// Velocity, x.
    pub vx: f64,
    /// Velocity, y.
    pub vy: f64,
    /// Velocity, z.
    pub vz: f64,
    /// Mass.
    pub mass: f64,
}

/// Number of bodies: sun, jupiter, saturn, uranus, neptune.
pub const NBODIES: usize = 5;

/// Time step of every n-body step.
pub const NBODY_DT: f64 = 0.01;

const PI: f64 = std::f64::consts::PI;
const SOLAR_MASS: f64 = 4.0 * PI * PI;
const DAYS_PER_YEAR: f64 = 365.24;

const fn body(p: [f64; 3], v: [f64; 3], mass: f64) -> Body {
    Body {
        x: p[0],
        y: p[1],
        z: p[2],
        vx: v[0] * DAYS_PER_YEAR,
        vy: v[1] * DAYS_PER_YEAR,
        vz: v[2] * DAYS_PER_YEAR,
        mass: mass * SOLAR_MASS,
    }
}

/// The CLBG bodies before the momentum offset. The literals are copied
/// verbatim from CLBG (and from `peers/pmdk_peers.c`) so the two can be
/// diffed; the compiler rounds both the same way.
#[allow(clippy::excessive_precision)]
const INITIAL_BODIES: [Body; NBODIES] = [
    // sun
    body([0.0, 0.0, 0.0], [0.0, 0.0, 0.0], 1.0),
    // jupiter
    body(
        [4.84143144246472090e+00, -1.16032004402742839e+00, -1.03622044471123109e-01],
        [1.66007664274403694e-03, 7.69901118419740425e-03, -6.90460016972063023e-05],
        9.54791938424326609e-04,
    ),
    // saturn
    body(
        [8.34336671824457987e+00, 4.12479856412430479e+00, -4.03523417114321381e-01],
        [-2.76742510726862411e-03, 4.99852801234917238e-03, 2.30417297573763929e-05],
        2.85885980666130812e-04,
    ),
    // uranus
    body(
        [1.28943695621391310e+01, -1.51111514016986312e+01, -2.23307578892655734e-01],
        [2.96460137564761618e-03, 2.37847173959480950e-03, -2.96589568540237556e-05],
        4.36624404335156298e-05,
    ),
    // neptune
    body(
        [1.53796971148509165e+01, -2.59193146099879641e+01, 1.79258772950371181e-01],
        [2.68067772490389322e-03, 1.62824170038242295e-03, -9.51592254519715870e-05],
        5.15138902046611451e-05,
    ),
];

/// The initial system, with the sun given the momentum that makes the
/// system's total momentum zero (CLBG `offset_momentum`).
pub fn nbody_initial() -> [Body; NBODIES] {
    let mut b = INITIAL_BODIES;
    let (mut px, mut py, mut pz) = (0.0, 0.0, 0.0);
    for body in &b {
        px += body.vx * body.mass;
        py += body.vy * body.mass;
        pz += body.vz * body.mass;
    }
    b[0].vx = -px / SOLAR_MASS;
    b[0].vy = -py / SOLAR_MASS;
    b[0].vz = -pz / SOLAR_MASS;
    b
}

/// Advances the system by one step of `dt`.
pub fn advance(b: &mut [Body; NBODIES], dt: f64) {
    for i in 0..NBODIES {
        for j in i + 1..NBODIES {
            let dx = b[i].x - b[j].x;
            let dy = b[i].y - b[j].y;
            let dz = b[i].z - b[j].z;
            let d2 = dx * dx + dy * dy + dz * dz;
            let mag = dt / (d2 * d2.sqrt());
            let (mi, mj) = (b[i].mass, b[j].mass);
            b[i].vx -= dx * mj * mag;
            b[i].vy -= dy * mj * mag;
            b[i].vz -= dz * mj * mag;
            b[j].vx += dx * mi * mag;
            b[j].vy += dy * mi * mag;
            b[j].vz += dz * mi * mag;
        }
    }
    for body in b.iter_mut() {
        body.x += dt * body.vx;
        body.y += dt * body.vy;
        body.z += dt * body.vz;
    }
}

/// Total energy of the system (kinetic minus gravitational potential).
pub fn energy(b: &[Body; NBODIES]) -> f64 {
    let mut e = 0.0;
    for i in 0..NBODIES {
        let v2 = b[i].vx * b[i].vx + b[i].vy * b[i].vy + b[i].vz * b[i].vz;
        e += 0.5 * b[i].mass * v2;
        for j in i + 1..NBODIES {
            let dx = b[i].x - b[j].x;
            let dy = b[i].y - b[j].y;
            let dz = b[i].z - b[j].z;
            e -= b[i].mass * b[j].mass / (dx * dx + dy * dy + dz * dz).sqrt();
        }
    }
    e
}

/// Runs `steps` steps from [`nbody_initial`] in volatile memory; returns the
/// final energy.
pub fn nbody_run(steps: u64) -> f64 {
    let mut b = nbody_initial();
    for _ in 0..steps {
        advance(&mut b, NBODY_DT);
    }
    energy(&b)
}

// ---------------------------------------------------------------------------
// sps
// ---------------------------------------------------------------------------

/// The xorshift64* generator (Vigna); its state is never zero.
#[derive(Clone, Debug)]
pub struct XorShift64Star {
    state: u64,
}

impl XorShift64Star {
    /// A generator whose state starts at `seed`.
    pub fn new(seed: NonZeroU64) -> Self {
        Self { state: seed.get() }
    }

    /// The next value of the sequence.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// The sps checksum: wrapping sum over i of `a[i] * (i + 1)`.
pub fn sps_checksum(a: &[u64]) -> u64 {
    a.iter().zip(1u64..).fold(0u64, |sum, (&v, i)| sum.wrapping_add(v.wrapping_mul(i)))
}

/// Applies `swaps` random swaps to `a` in the sps order: `i` is drawn before
/// `j`, each as `next() % a.len()`. Does nothing when `a` is empty.
pub fn sps_swap(a: &mut [u64], swaps: u64, seed: NonZeroU64) {
    let n = a.len() as u64;
    if n == 0 {
        return;
    }
    let mut rng = XorShift64Star::new(seed);
    for _ in 0..swaps {
        // Both indices are below n = a.len(), so they fit in usize.
        let i = (rng.next_u64() % n) as usize;
        let j = (rng.next_u64() % n) as usize;
        a.swap(i, j);
    }
}

/// The reference sps result for an array of `n` with `a[i] = i`.
pub fn sps_reference(n: usize, swaps: u64, seed: NonZeroU64) -> u64 {
    let mut a: Vec<u64> = (0..n as u64).collect();
    sps_swap(&mut a, swaps, seed);
    sps_checksum(&a)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Node counts of the CLBG program by simulation, to check the formula.
    fn simulated_count(max_depth: u32) -> u64 {
        let mut count = tree_nodes(max_depth + 1);
        let mut d = BINARY_TREES_MIN_DEPTH;
        while d <= max_depth {
            for _ in 0..binary_trees_iterations(max_depth, d) {
                count += tree_nodes(d);
            }
            d += 2;
        }
        count + tree_nodes(max_depth)
    }

    #[test]
    fn node_count_formula_matches_simulation() {
        for depth in 6..=12 {
            assert_eq!(binary_trees_node_count(depth), simulated_count(depth));
        }
    }

    #[test]
    fn node_count_depth_6() {
        // stretch (depth 7) 255 + 64 trees of 31 + 16 trees of 127 + long-lived 127
        assert_eq!(binary_trees_node_count(6), 255 + 64 * 31 + 16 * 127 + 127);
    }

    #[test]
    fn max_depth_is_clamped_like_clbg() {
        assert_eq!(binary_trees_max_depth(0), 6);
        assert_eq!(binary_trees_max_depth(10), 10);
        assert_eq!(binary_trees_max_depth(99), BINARY_TREES_MAX_DEPTH);
    }

    #[test]
    fn nbody_matches_clbg_reference_output() {
        // The published CLBG outputs for n = 0 and n = 1000, to 9 decimals.
        assert!((nbody_run(0) - -0.169_075_164).abs() < 1e-9);
        assert!((nbody_run(1000) - -0.169_087_605).abs() < 1e-9);
    }

    #[test]
    fn xorshift_first_values_are_stable() {
        let mut rng = XorShift64Star::new(NonZeroU64::MIN);
        // x = 1 -> 1 ^ (1 << 25) = 0x2000001 -> ^ (>> 27) unchanged.
        assert_eq!(rng.next_u64(), 0x0200_0001u64.wrapping_mul(0x2545_F491_4F6C_DD1D));
    }

    #[test]
    fn sps_is_a_permutation() {
        let seed = NonZeroU64::new(42).unwrap();
        let mut a: Vec<u64> = (0..1000).collect();
        sps_swap(&mut a, 10_000, seed);
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert!(sorted.iter().copied().eq(0..1000));
        assert_eq!(sps_checksum(&a), sps_reference(1000, 10_000, seed));
    }
}
