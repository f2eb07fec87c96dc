//! `engram torture`: failure-atomic regions that keep checkable invariants,
//! run until the process is killed. The process-kill tests (`tests/kill.rs`)
//! SIGKILL it at random moments, reopen the pool and call [`verify`].
//!
//! The pool holds three roots, made together by one region (so after a crash
//! either all three exist or none does):
//!
//! - `accounts`: a `PArray<u64>` of [`ACCOUNTS`] balances whose sum is always
//!   [`TOTAL`]; every region moves money between random accounts, and now and
//!   then rotates the whole array with one slice write;
//! - `state`: a [`State`] heading a singly-linked list of [`Entry`] records.
//!   Every region appends one entry whose `seq` is the incremented `counter`;
//!   once the list is longer than [`MAX_LIST`] the oldest entry is unlinked,
//!   freed and counted in `dropped`. So the list always holds the entries
//!   `dropped + 1 ..= counter`, in order, each with `check == mix(seq)`, and
//!   `tail` is its last entry;
//! - `junk`: a `PArray<PPtr<Junk>>` of [`JUNK_SLOTS`] slots; every region
//!   frees one slot's [`Junk`] (and its data array) and puts a new one there
//!   whose `sum` is the sum of its data. Each region also allocates and frees
//!   a scratch object, and sometimes leaks one (left for the GC), and every
//!   [`COLLECT_EVERY`] regions the program collects garbage online.
//!
//! A kill at any point must leave a pool whose recovery restores all of this.

use crate::error::CliError;
use engram::{CreateOptions, Durability, Error, PArray, PPtr, Persistent, Pool, Tx};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::Path;

/// Layout name of torture pools.
pub const LAYOUT: &str = "engram-torture";
/// Number of accounts.
pub const ACCOUNTS: u64 = 64;
/// Opening balance of each account.
pub const OPENING_BALANCE: u64 = 1_000;
/// What the balances always sum to.
pub const TOTAL: u64 = ACCOUNTS * OPENING_BALANCE;
/// Longest the entry list gets before its oldest entry is dropped.
pub const MAX_LIST: u64 = 512;
/// Slots of the junk table.
pub const JUNK_SLOTS: u64 = 32;
/// Regions between online collections.
pub const COLLECT_EVERY: u64 = 256;

/// Head of the entry list and the counters the invariants relate.
#[derive(Clone, Copy, Debug, Default, Persistent)]
#[engram(name = "torture.State")]
pub struct State {
    /// Entries ever appended (the last entry's `seq`).
    pub counter: u64,
    /// Entries unlinked from the front.
    pub dropped: u64,
    /// Regions committed.
    pub regions: u64,
    /// Oldest entry.
    pub head: PPtr<Entry>,
    /// Newest entry.
    pub tail: PPtr<Entry>,
}

/// One list entry.
#[derive(Clone, Copy, Debug, Persistent)]
#[engram(name = "torture.Entry")]
pub struct Entry {
    /// Its position in the sequence of appended entries (1-based).
    pub seq: u64,
    /// `mix(seq)`: a torn or stale entry fails this.
    pub check: u64,
    /// The next newer entry.
    pub next: PPtr<Entry>,
}

/// A garbage-making object: a random array and its sum.
#[derive(Clone, Copy, Debug, Persistent)]
#[engram(name = "torture.Junk")]
pub struct Junk {
    /// Elements of `data`.
    pub len: u64,
    /// Sum of `data`.
    pub sum: u64,
    /// The array.
    pub data: PArray<u64>,
}

/// The checksum an entry with `seq` carries.
pub fn mix(seq: u64) -> u64 {
    seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x00C0_FFEE
}

/// What [`verify`] found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// The roots exist (false for a pool killed before its setup committed).
    pub set_up: bool,
    /// Regions committed so far.
    pub regions: u64,
    /// Entries ever appended.
    pub counter: u64,
    /// Entries in the list now.
    pub list_len: u64,
    /// Junk slots in use.
    pub junk: u64,
    /// Objects reachable from the roots.
    pub objects: u64,
}

#[derive(Clone, Copy)]
struct Roots {
    accounts: PArray<u64>,
    state: PPtr<State>,
    junk: PArray<PPtr<Junk>>,
}

/// Runs the torture loop on `path` (created if missing): forever, or for
/// `regions` regions followed by a clean close.
pub fn run(path: &Path, seed: u64, durability: Option<Durability>, regions: Option<u64>) -> Result<(), CliError> {
    let at = |e: CliError| e.at(path);
    let mut create = CreateOptions::new(LAYOUT);
    create.durability = durability;
    let pool = Pool::open_or_create(path, create).map_err(|e| at(e.into()))?;
    let roots = pool.txn(setup).map_err(at)?;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut done = 0u64;
    while regions.is_none_or(|n| done < n) {
        pool.txn(|tx| region(tx, roots, &mut rng)).map_err(|e| at(e.into()))?;
        done += 1;
        if done % COLLECT_EVERY == 0 {
            pool.collect().map_err(|e| at(e.into()))?;
        }
    }
    pool.close().map_err(|e| at(e.into()))
}

/// Finds the roots, or makes all three in this region.
fn setup(tx: &Tx<'_>) -> Result<Roots, CliError> {
    if let Some(r) = find_roots(tx)? {
        return Ok(r);
    }
    let accounts = tx.alloc_array::<u64>(ACCOUNTS)?;
    tx.write_slice(accounts, 0, &[OPENING_BALANCE; ACCOUNTS as usize])?;
    let state = tx.alloc(State::default())?;
    let junk = tx.alloc_array::<PPtr<Junk>>(JUNK_SLOTS)?;
    tx.set_root_array("accounts", accounts)?;
    tx.set_root("state", state)?;
    tx.set_root_array("junk", junk)?;
    Ok(Roots { accounts, state, junk })
}

/// All three roots, none, or an invariant error.
fn find_roots(tx: &Tx<'_>) -> Result<Option<Roots>, CliError> {
    let accounts = tx.root_array::<u64>("accounts")?;
    let state = tx.root::<State>("state")?;
    let junk = tx.root_array::<PPtr<Junk>>("junk")?;
    match (accounts, state, junk) {
        (Some(accounts), Some(state), Some(junk)) => Ok(Some(Roots { accounts, state, junk })),
        (None, None, None) => Ok(None),
        (a, s, j) => Err(CliError::invariant(format!(
            "only some roots exist (accounts {}, state {}, junk {})",
            a.is_some(),
            s.is_some(),
            j.is_some()
        ))),
    }
}

/// One region: transfers, an append, a junk replacement, scratch garbage.
fn region(tx: &Tx<'_>, r: Roots, rng: &mut StdRng) -> Result<(), Error> {
    transfers(tx, r.accounts, rng)?;
    let counter = append(tx, r.state)?;
    replace_junk(tx, r.junk, counter, rng)?;
    scratch(tx, rng)
}

fn transfers(tx: &Tx<'_>, acc: PArray<u64>, rng: &mut StdRng) -> Result<(), Error> {
    for _ in 0..rng.gen_range(1..=8) {
        let (from, to) = (rng.gen_range(0..ACCOUNTS), rng.gen_range(0..ACCOUNTS));
        let balance = tx.get(acc, from)?;
        let amount = rng.gen_range(0..=balance);
        tx.set(acc, from, balance - amount)?;
        let b = tx.get(acc, to)?;
        tx.set(acc, to, b + amount)?;
    }
    if rng.gen_ratio(1, 16) {
        let mut all = [0u64; ACCOUNTS as usize];
        tx.read_slice(acc, 0, &mut all)?;
        all.rotate_left(rng.gen_range(0..ACCOUNTS as usize));
        tx.write_slice(acc, 0, &all)?;
    }
    Ok(())
}

/// Appends entry `counter + 1`, dropping the oldest past [`MAX_LIST`].
fn append(tx: &Tx<'_>, state: PPtr<State>) -> Result<u64, Error> {
    let mut st = tx.read(state)?;
    let seq = st.counter + 1;
    let e = tx.alloc(Entry { seq, check: mix(seq), next: PPtr::null() })?;
    if st.tail.is_null() {
        st.head = e;
    } else {
        tx.update(st.tail, |t| t.next = e)?;
    }
    st.tail = e;
    st.counter = seq;
    if st.counter - st.dropped > MAX_LIST {
        let old = st.head;
        st.head = tx.read(old)?.next;
        tx.free(old)?;
        st.dropped += 1;
    }
    st.regions += 1;
    tx.write(state, st)?;
    Ok(seq)
}

fn new_junk(tx: &Tx<'_>, rng: &mut StdRng) -> Result<PPtr<Junk>, Error> {
    let len = if rng.gen_ratio(1, 16) { rng.gen_range(2048..16384) } else { rng.gen_range(1..64) };
    let vals: Vec<u64> = (0..len).map(|_| rng.gen::<u32>() as u64).collect();
    let data = tx.alloc_array::<u64>(len)?;
    tx.write_slice(data, 0, &vals)?;
    tx.alloc(Junk { len, sum: vals.iter().sum(), data })
}

fn free_junk(tx: &Tx<'_>, j: PPtr<Junk>) -> Result<(), Error> {
    let old = tx.read(j)?;
    tx.free_array(old.data)?;
    tx.free(j)
}

fn replace_junk(tx: &Tx<'_>, junk: PArray<PPtr<Junk>>, counter: u64, rng: &mut StdRng) -> Result<(), Error> {
    let slot = (counter.wrapping_mul(7) ^ rng.gen_range(0..JUNK_SLOTS)) % JUNK_SLOTS;
    let old = tx.get(junk, slot)?;
    if !old.is_null() {
        free_junk(tx, old)?;
    }
    let fresh = new_junk(tx, rng)?;
    tx.set(junk, slot, fresh)
}

/// Allocates and frees a scratch object; one region in eight leaks one.
fn scratch(tx: &Tx<'_>, rng: &mut StdRng) -> Result<(), Error> {
    let tmp = new_junk(tx, rng)?;
    free_junk(tx, tmp)?;
    if rng.gen_ratio(1, 8) {
        tx.alloc(Entry { seq: 0, check: 0, next: PPtr::null() })?;
    }
    Ok(())
}

/// Checks every invariant of a torture pool (see the module docs).
pub fn verify(pool: &Pool) -> Result<Summary, CliError> {
    pool.txn(|tx| {
        let Some(r) = find_roots(tx)? else { return Ok(Summary::default()) };
        check_accounts(tx, r.accounts)?;
        let (st, list_len) = check_list(tx, r.state)?;
        let junk = check_junk(tx, r.junk)?;
        let objects = 3 + list_len + 2 * junk;
        Ok(Summary { set_up: true, regions: st.regions, counter: st.counter, list_len, junk, objects })
    })
}

fn check_accounts(tx: &Tx<'_>, acc: PArray<u64>) -> Result<(), CliError> {
    let len = tx.len(acc)?;
    if len != ACCOUNTS {
        return Err(CliError::invariant(format!("{len} accounts, expected {ACCOUNTS}")));
    }
    let mut all = [0u64; ACCOUNTS as usize];
    tx.read_slice(acc, 0, &mut all)?;
    let sum = all.iter().try_fold(0u64, |s, &b| s.checked_add(b));
    if sum != Some(TOTAL) {
        return Err(CliError::invariant(format!("balances sum to {sum:?}, expected {TOTAL}")));
    }
    Ok(())
}

fn check_list(tx: &Tx<'_>, state: PPtr<State>) -> Result<(State, u64), CliError> {
    let st = tx.read(state)?;
    if st.regions != st.counter || st.dropped > st.counter {
        return Err(CliError::invariant(format!(
            "state says {} regions, {} entries appended, {} dropped",
            st.regions, st.counter, st.dropped
        )));
    }
    let (mut p, mut last, mut n) = (st.head, PPtr::null(), 0u64);
    while !p.is_null() {
        let e = tx.read(p)?;
        let want = st.dropped + n + 1;
        if e.seq != want || e.check != mix(e.seq) {
            return Err(CliError::invariant(format!("list entry {n} has seq {} (check {:#x}), expected seq {want}", e.seq, e.check)));
        }
        if n > st.counter {
            return Err(CliError::invariant("the entry list is longer than the counter (a cycle?)"));
        }
        (last, p, n) = (p, e.next, n + 1);
    }
    if n != st.counter - st.dropped || last != st.tail {
        return Err(CliError::invariant(format!(
            "list holds {n} entries ending at {last:?}; counter {} - dropped {} and tail {:?}",
            st.counter, st.dropped, st.tail
        )));
    }
    Ok((st, n))
}

fn check_junk(tx: &Tx<'_>, junk: PArray<PPtr<Junk>>) -> Result<u64, CliError> {
    let mut used = 0;
    for i in 0..tx.len(junk)? {
        let p = tx.get(junk, i)?;
        if p.is_null() {
            continue;
        }
        let j = tx.read(p)?;
        let len = tx.len(j.data)?;
        if len != j.len || array_sum(tx, j.data, len)? != j.sum {
            return Err(CliError::invariant(format!("junk slot {i}: array of {len} (recorded {}) does not sum to {}", j.len, j.sum)));
        }
        used += 1;
    }
    Ok(used)
}

/// Sum of `a[..len]`, read in chunks (no allocation sized by pool data).
fn array_sum(tx: &Tx<'_>, a: PArray<u64>, len: u64) -> Result<u64, Error> {
    let mut buf = [0u64; 512];
    let (mut sum, mut i) = (0u64, 0u64);
    while i < len {
        let n = (len - i).min(buf.len() as u64);
        let chunk = &mut buf[..n as usize];
        tx.read_slice(a, i, chunk)?;
        sum = chunk.iter().fold(sum, |s, &v| s.wrapping_add(v));
        i += n;
    }
    Ok(sum)
}
