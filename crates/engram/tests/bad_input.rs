//! Bad input gets a typed error, never a panic and never undefined behaviour.
//!
//! Every way a pool file or a program can be wrong that `Pool::open`,
//! `Pool::create` or a region can see must arrive as a variant of
//! [`engram::Error`]: missing, empty, foreign, truncated, torn, future-version
//! or foreign-layout files, a pool that is already open, a full pool, a root
//! read with the wrong type, a type whose layout changed. Then two seeded
//! random-mutation sweeps: bytes flipped in the pool's metadata (header
//! copies, root table, type table, log area, span table and bitmaps), and in
//! heap objects (their headers and pointer fields). Each mutated copy either
//! opens, and then walking it, `check`ing it and running a small region each
//! give `Ok` or a typed error, or it is refused with a typed error. The
//! sweeps count the outcomes and print them.
//!
//! A few checks need a process of their own because the failure they guard
//! against is a crash (an abort, a SIGBUS): those re-run this test binary on
//! one `child_*` test with `ENGRAM_BAD_INPUT_CHILD=1` and look at how it ended.

mod common;
use common::TempPool;
use engram::format::*;
use engram::{CreateOptions, Durability, Error, OpenOptions, PArray, PPtr, Persistent, Pool};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

const LAYOUT: &str = "bad-input";

#[derive(Clone, Copy, Debug, PartialEq, Persistent)]
struct Node {
    value: u64,
    next: PPtr<Node>,
}

// ----- helpers ----------------------------------------------------------------

/// Small pools (5.25 MiB, growing to 16 MiB at most), so the mutation
/// sweeps copy little.
fn create_opts() -> CreateOptions {
    CreateOptions::new(LAYOUT).durability(Durability::Process).initial_size(MIN_POOL_SIZE + 8 * SPAN_SIZE).max_size(16 << 20)
}

fn open_opts() -> OpenOptions {
    OpenOptions::new(LAYOUT).durability(Durability::Process)
}

fn create(t: &TempPool) -> Pool {
    Pool::create(&t.0, create_opts()).unwrap()
}

fn open(path: &Path) -> Result<Pool, Error> {
    Pool::open(path, open_opts())
}

/// A list of `n` nodes (values 0..n) under root "list", built in regions of
/// 20 so the log holds entries of earlier generations.
fn build_list(pool: &Pool, n: u64) {
    let mut v = 0;
    while v < n {
        pool.txn(|tx| {
            let mut head = tx.root::<Node>("list")?.unwrap_or_default();
            for value in v..(v + 20).min(n) {
                head = tx.alloc(Node { value, next: head })?;
            }
            tx.set_root("list", head)
        })
        .unwrap();
        v += 20;
    }
}

/// An array of `len` u64 (element i = i * 3) under root `name`.
fn build_array(pool: &Pool, name: &str, len: u64) {
    pool.txn(|tx| {
        let a = tx.alloc_array::<u64>(len)?;
        let vals: Vec<u64> = (0..len).map(|i| i * 3).collect();
        tx.write_slice(a, 0, &vals)?;
        tx.set_root_array(name, a)
    })
    .unwrap();
}

/// Walks the list (at most `limit` nodes): (length, sum of values).
fn walk_list(pool: &Pool, limit: u64) -> Result<(u64, u64), Error> {
    pool.txn(|tx| {
        let mut p = tx.root::<Node>("list")?.unwrap_or_default();
        let (mut len, mut sum) = (0u64, 0u64);
        while !p.is_null() && len < limit {
            let n = tx.read(p)?;
            sum = sum.wrapping_add(n.value);
            len += 1;
            p = n.next;
        }
        Ok((len, sum))
    })
}

/// Reads array root `name` (at most `limit` elements): (length, sum).
fn walk_array(pool: &Pool, name: &str, limit: u64) -> Result<(u64, u64), Error> {
    pool.txn(|tx| {
        let Some(a) = tx.root_array::<u64>(name)? else { return Ok((0, 0)) };
        let len = tx.len(a)?;
        let mut buf = vec![0u64; len.min(limit) as usize];
        tx.read_slice(a, 0, &mut buf)?;
        Ok((len, buf.iter().fold(0u64, |s, &v| s.wrapping_add(v))))
    })
}

fn read_file(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap()
}

fn write_file(p: &Path, bytes: &[u8]) {
    std::fs::write(p, bytes).unwrap()
}

fn header_at(bytes: &[u8], slot: usize) -> PoolHeader {
    let off = slot * HEADER_SLOT as usize;
    PoolHeader::from_bytes(bytes[off..off + 512].try_into().unwrap())
}

fn put_header(bytes: &mut [u8], slot: usize, h: &PoolHeader) {
    let off = slot * HEADER_SLOT as usize;
    bytes[off..off + 512].copy_from_slice(h.as_bytes());
}

/// Index of the header copy with the larger sequence number.
fn current_slot(bytes: &[u8]) -> usize {
    if header_at(bytes, 0).seq > header_at(bytes, 1).seq {
        0
    } else {
        1
    }
}

/// A closed pool with a 200-node list, a small array and a large array.
fn sample_pool(tag: &str) -> TempPool {
    let t = TempPool::new(tag);
    let pool = create(&t);
    build_list(&pool, 200);
    build_array(&pool, "arr", 500);
    build_array(&pool, "big", 12_000); // 96 KB: a large (multi-span) object
    pool.close().unwrap();
    t
}

const LIST: (u64, u64) = (200, 199 * 200 / 2);
const ARR: (u64, u64) = (500, 3 * 499 * 500 / 2);
const BIG: (u64, u64) = (12_000, 3 * 11_999 * 12_000 / 2);

fn assert_sample_intact(pool: &Pool) {
    assert_eq!(walk_list(pool, 1_000).unwrap(), LIST);
    assert_eq!(walk_array(pool, "arr", 1_000).unwrap(), ARR);
    assert_eq!(walk_array(pool, "big", 20_000).unwrap(), BIG);
    let st = pool.check().unwrap();
    assert_eq!(st.objects, 202);
}

fn is_child() -> bool {
    std::env::var_os("ENGRAM_BAD_INPUT_CHILD").is_some()
}

/// Runs test `name` of this binary in a child process; returns how it ended
/// and what it printed.
fn run_child(name: &str) -> (std::process::ExitStatus, String) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--include-ignored", "--nocapture", "--test-threads=1"])
        .env("ENGRAM_BAD_INPUT_CHILD", "1")
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status, text)
}

// ----- Pool::open on bad files ---------------------------------------------------

#[test]
fn missing_file_is_io() {
    let t = TempPool::new("missing");
    let e = open(&t.0).err().unwrap();
    assert!(matches!(e, Error::Io { .. }), "{e:?}");
}

#[test]
fn empty_file_is_not_a_pool() {
    let t = TempPool::new("empty");
    write_file(&t.0, &[]);
    let e = open(&t.0).err().unwrap();
    assert!(matches!(e, Error::NotAPool { .. }), "{e:?}");
}

#[test]
fn random_bytes_are_not_a_pool() {
    let mut rng = StdRng::seed_from_u64(7);
    for len in [1usize, 7, 8, 100, 511, 512, 4096, 8192, 10_000, MIN_POOL_SIZE as usize] {
        let t = TempPool::new("random");
        let mut bytes = vec![0u8; len];
        rng.fill(&mut bytes[..]);
        write_file(&t.0, &bytes);
        let e = open(&t.0).err().unwrap();
        assert!(matches!(e, Error::NotAPool { .. }), "{len} random bytes: {e:?}");
    }
}

#[test]
fn truncated_pool_is_truncated() {
    let t = sample_pool("trunc");
    let full = read_file(&t.0);
    for len in [full.len() / 2, 5000, 4100, 600, 100, 8] {
        let c = TempPool::new("trunc-copy");
        write_file(&c.0, &full[..len]);
        let e = open(&c.0).err().unwrap();
        match e {
            Error::Truncated { actual, expected, .. } => {
                assert_eq!(actual, len as u64);
                assert!(expected > actual, "{e}");
            }
            other => panic!("truncated to {len} bytes: {other:?}"),
        }
    }
}

#[test]
fn both_header_copies_flipped_is_bad_checksum() {
    let t = sample_pool("crc");
    let mut bytes = read_file(&t.0);
    // Byte 40 is in the layout name: covered by the CRC, not the magic.
    for (slot, at) in [(0usize, 40usize), (1, 300)] {
        bytes[slot * HEADER_SLOT as usize + at] ^= 0x10;
    }
    write_file(&t.0, &bytes);
    let e = open(&t.0).err().unwrap();
    assert!(matches!(e, Error::BadChecksum { .. }), "{e:?}");
}

#[test]
fn one_header_copy_corrupted_opens_from_the_other() {
    let t = sample_pool("onecopy");
    let orig = read_file(&t.0);
    let cur = current_slot(&orig);
    for slot in [0usize, 1] {
        let c = TempPool::new("onecopy-copy");
        let mut bytes = orig.clone();
        // Scribble over the CRC-covered part of this copy.
        for b in &mut bytes[slot * HEADER_SLOT as usize + 16..slot * HEADER_SLOT as usize + 80] {
            *b ^= 0xA5;
        }
        write_file(&c.0, &bytes);
        let pool = open(&c.0).unwrap_or_else(|e| panic!("copy {slot} corrupted: {e}"));
        // The surviving copy is the older one when the current one is hit: it
        // says "not clean", so the pool is recovered (and still intact).
        assert_eq!(pool.open_report().was_clean, slot != cur, "{:?}", pool.open_report());
        assert_sample_intact(&pool);
        pool.close().unwrap();
        let pool = open(&c.0).unwrap();
        assert_sample_intact(&pool);
        pool.close().unwrap();
    }
}

#[test]
fn future_version_is_unsupported() {
    let t = sample_pool("version");
    let mut bytes = read_file(&t.0);
    for slot in [0, 1] {
        let mut h = header_at(&bytes, slot);
        h.version = 99;
        h.crc = h.compute_crc();
        put_header(&mut bytes, slot, &h);
    }
    write_file(&t.0, &bytes);
    match open(&t.0).err().unwrap() {
        Error::UnsupportedVersion { found, supported, .. } => {
            assert_eq!(found, 99);
            assert_eq!(supported, FORMAT_VERSION);
        }
        other => panic!("{other:?}"),
    }
}

/// Format 3 reads version 2 pools (their logs hold no commit record and
/// start every generation at the slot's first entry): a read-only open
/// leaves the file at version 2, a writable open upgrades the header to 3
/// before any region runs. Version 1 stays refused.
#[test]
fn version_2_is_read_and_upgraded() {
    let t = sample_pool("version2");
    let set_version = |v: u32| {
        let mut bytes = read_file(&t.0);
        for slot in [0, 1] {
            let mut h = header_at(&bytes, slot);
            h.version = v;
            h.crc = h.compute_crc();
            put_header(&mut bytes, slot, &h);
        }
        write_file(&t.0, &bytes);
    };
    set_version(2);
    let ro = Pool::open(&t.0, open_opts().read_only()).unwrap();
    drop(ro);
    let bytes = read_file(&t.0);
    assert_eq!(header_at(&bytes, current_slot(&bytes)).version, 2, "a read-only open writes nothing");
    let pool = open(&t.0).unwrap();
    assert_eq!(pool.info().version, FORMAT_VERSION);
    let sum = pool.txn(|tx| {
        let a = tx.root_array::<u64>("arr")?.unwrap();
        tx.set(a, 1, 7)?; // a 2-fence commit on the upgraded pool
        (0..tx.len(a)?).map(|i| tx.get(a, i)).sum::<Result<u64, Error>>()
    });
    assert_eq!(sum.unwrap(), (0..500).map(|i| i * 3).sum::<u64>() - 3 + 7);
    pool.close().unwrap();
    assert_eq!(header_at(&read_file(&t.0), current_slot(&read_file(&t.0))).version, FORMAT_VERSION);
    set_version(1);
    assert!(matches!(open(&t.0).err().unwrap(), Error::UnsupportedVersion { found: 1, .. }));
}

#[test]
fn wrong_layout_is_refused() {
    let t = sample_pool("layout");
    match Pool::open(&t.0, OpenOptions::new("someone-else").durability(Durability::Process)).err().unwrap() {
        Error::WrongLayout { path, expected, found } => {
            assert_eq!(path, t.0);
            assert_eq!(expected, "someone-else");
            assert_eq!(found, LAYOUT);
        }
        other => panic!("{other:?}"),
    }
    // and the refused open left the pool usable
    let pool = open(&t.0).unwrap();
    assert_sample_intact(&pool);
}

#[test]
fn second_open_is_locked() {
    let t = sample_pool("locked");
    let pool = open(&t.0).unwrap();
    let e = open(&t.0).err().unwrap();
    assert!(matches!(e, Error::AlreadyOpen { .. }), "{e:?}");
    let e = Pool::open(&t.0, OpenOptions::any().read_only()).err().unwrap();
    assert!(matches!(e, Error::AlreadyOpen { .. }), "read-only while open: {e:?}");
    assert_sample_intact(&pool);
    pool.close().unwrap();
    let pool = open(&t.0).unwrap();
    assert_sample_intact(&pool);
}

#[test]
fn create_on_existing_file_is_exists() {
    let t = sample_pool("exists");
    let before = read_file(&t.0);
    let e = Pool::create(&t.0, create_opts()).err().unwrap();
    assert!(matches!(e, Error::Exists { .. }), "{e:?}");
    assert!(read_file(&t.0) == before, "a refused create changed the file");
    let pool = open(&t.0).unwrap();
    assert_sample_intact(&pool);
}

/// `create(..overwrite())` of a pool that is open must be refused *without*
/// touching the file: the open handle has the file mapped, and shortening a
/// mapped file turns the next access into SIGBUS.
#[test]
fn overwrite_of_an_open_pool_leaves_it_alone() {
    let t = sample_pool("overwrite-open");
    let pool = open(&t.0).unwrap();
    let len = std::fs::metadata(&t.0).unwrap().len();
    let r = Pool::create(&t.0, create_opts().overwrite()).map(std::mem::forget);
    let after = std::fs::metadata(&t.0).unwrap().len();
    if after != len {
        // The mapping now reaches past the end of the file: touching it (even
        // dropping the handle, which writes the clean-close state) would
        // SIGBUS this test process.
        std::mem::forget(pool);
        panic!("create(overwrite) of an open pool returned {r:?} but truncated the file from {len} to {after} bytes");
    }
    assert!(matches!(r, Err(Error::AlreadyOpen { .. })), "{r:?}");
    assert_sample_intact(&pool);
}

#[test]
fn layout_name_length_is_checked() {
    let t = TempPool::new("name");
    for bad in [String::new(), "x".repeat(LAYOUT_MAX + 1)] {
        let e = Pool::create(&t.0, CreateOptions::new(&bad).durability(Durability::Process)).err().unwrap();
        assert!(matches!(e, Error::InvalidArgument { .. }), "{} bytes: {e:?}", bad.len());
        assert!(!t.0.exists(), "a refused create left a file behind");
    }
    let ok = "y".repeat(LAYOUT_MAX);
    let pool = Pool::create(&t.0, CreateOptions::new(&ok).durability(Durability::Process).max_size(64 << 20)).unwrap();
    pool.close().unwrap();
    let pool = Pool::open(&t.0, OpenOptions::new(&ok).durability(Durability::Process)).unwrap();
    assert_eq!(pool.info().layout, ok);
}

/// A read-only open changes nothing: reads work, writes and collection are
/// `ReadOnly`, and the file is byte-for-byte the same afterwards.
#[test]
fn read_only_open_writes_nothing() {
    let t = sample_pool("readonly");
    let before = read_file(&t.0);
    let pool = Pool::open(&t.0, OpenOptions::new(LAYOUT).read_only()).unwrap();
    assert_sample_intact(&pool);
    let head = pool.txn(|tx| tx.root::<Node>("list")).unwrap().unwrap();
    let e = pool.txn(|tx| tx.write(head, Node { value: 9, next: PPtr::null() })).err().unwrap();
    assert!(matches!(e, Error::ReadOnly), "{e:?}");
    let e = pool.txn(|tx| tx.set_root("other", head)).err().unwrap();
    assert!(matches!(e, Error::ReadOnly), "{e:?}");
    assert!(matches!(pool.collect(), Err(Error::ReadOnly)));
    assert_sample_intact(&pool);
    pool.close().unwrap();
    assert!(read_file(&t.0) == before, "a read-only open changed the pool file");
}

// ----- a full pool ---------------------------------------------------------------

/// 1008 bytes: with its header exactly one 1 KiB slot.
#[derive(Clone, Copy, Persistent)]
struct Blob {
    next: PPtr<Blob>,
    data: [u64; 125],
}

fn blob(v: u64, next: PPtr<Blob>) -> Blob {
    Blob { next, data: [v; 125] }
}

/// (blobs, sum of data[0]) of the "blobs" list, checking every word.
fn walk_blobs(pool: &Pool) -> (u64, u64) {
    pool.txn(|tx| {
        let mut p = tx.root::<Blob>("blobs")?.unwrap_or_default();
        let (mut n, mut sum) = (0, 0);
        while !p.is_null() {
            let b = tx.read(p)?;
            assert!(b.data.iter().all(|&w| w == b.data[0]), "blob {n} torn");
            sum += b.data[0];
            n += 1;
            p = b.next;
        }
        Ok::<_, Error>((n, sum))
    })
    .unwrap()
}

fn push_blobs(pool: &Pool, first: u64, n: u64) -> Result<(), Error> {
    pool.txn(|tx| {
        let mut head = tx.root::<Blob>("blobs")?.unwrap_or_default();
        for v in first..first + n {
            head = tx.alloc(blob(v, head))?;
        }
        tx.set_root("blobs", head)
    })
}

fn pop_blobs(pool: &Pool, n: u64) -> u64 {
    pool.txn(|tx| {
        let mut head = tx.root::<Blob>("blobs")?.unwrap_or_default();
        let mut sum = 0;
        for _ in 0..n {
            let b = tx.read(head)?;
            sum += b.data[0];
            tx.free(head)?;
            head = b.next;
        }
        tx.set_root("blobs", head)?;
        Ok::<_, Error>(sum)
    })
    .unwrap()
}

#[test]
fn full_pool_is_pool_full_and_still_works() {
    let t = TempPool::new("full");
    let max = 8 << 20;
    let pool = Pool::create(&t.0, create_opts().max_size(max)).unwrap();
    // Two large objects first (100 KiB each: two spans).
    for name in ["large0", "large1"] {
        build_array(&pool, name, 100 * 1024 / 8);
    }
    let (mut pushed, mut sum) = (0u64, 0u64);
    let err = loop {
        match push_blobs(&pool, pushed, 16) {
            Ok(()) => {
                sum += (pushed..pushed + 16).sum::<u64>();
                pushed += 16;
            }
            Err(e) => break e,
        }
        assert!(pushed < 10_000, "an 8 MiB pool never filled up");
    };
    match err {
        Error::PoolFull { max_size, .. } => assert_eq!(max_size, max),
        other => panic!("{other:?}"),
    }
    assert!(pushed >= 2000, "only {pushed} KiB fit in an 8 MiB pool");
    assert_eq!(pool.info().size, max);
    // The failed region rolled back.
    assert_eq!(walk_blobs(&pool), (pushed, sum));
    // Accounting: every object in use is reachable (2 arrays + the blobs).
    let live_before_gc = pool.info().live_objects;
    // A large object cannot be had either.
    let e = pool.txn(|tx| tx.alloc_array::<u64>(100 * 1024 / 8).map(|_| ())).err().unwrap();
    assert!(matches!(e, Error::PoolFull { .. }), "{e:?}");

    // Free some blobs: the same number fits again.
    let gone = pop_blobs(&pool, 32);
    sum -= gone;
    push_blobs(&pool, 1_000_000, 32).unwrap();
    sum += (1_000_000..1_000_032).sum::<u64>();
    assert_eq!(walk_blobs(&pool), (pushed, sum));
    // Free a large object: another one fits.
    pool.txn(|tx| {
        let a = tx.root_array::<u64>("large0")?.unwrap();
        tx.free_array(a)?;
        tx.remove_root("large0").map(|_| ())
    })
    .unwrap();
    build_array(&pool, "large2", 100 * 1024 / 8);

    let st = pool.collect().unwrap();
    assert_eq!(st.objects, pushed + 2);
    assert_eq!(pool.info().live_objects, pushed + 2);
    assert_eq!(walk_blobs(&pool), (pushed, sum));
    pool.close().unwrap();

    let pool = open(&t.0).unwrap();
    assert_eq!(walk_blobs(&pool), (pushed, sum));
    assert_eq!(walk_array(&pool, "large1", 1 << 20).unwrap().0, 100 * 1024 / 8);
    assert_eq!(walk_array(&pool, "large2", 1 << 20).unwrap().0, 100 * 1024 / 8);
    assert_eq!(pool.check().unwrap().objects, pushed + 2);
    assert_eq!(pool.info().live_objects, pushed + 2);
    pool.close().unwrap();
    // Checked last so the behaviour above is verified even when this fails.
    assert_eq!(
        live_before_gc,
        pushed + 2,
        "after PoolFull, info().live_objects counts {} objects that nothing holds",
        live_before_gc as i64 - (pushed + 2) as i64
    );
}

/// 32 bytes: a 48-byte slot, 1365 to a span (not a multiple of the
/// allocator's refill batch of 32).
#[derive(Clone, Copy, Persistent)]
struct Small {
    next: PPtr<Small>,
    v: [u64; 3],
}

/// Running out of space while refilling a thread cache must not lose the
/// slots already taken for it: afterwards every object the allocator counts
/// as live is one the program holds.
#[test]
fn pool_full_does_not_leak_slots() {
    let t = TempPool::new("full-leak");
    let pool = Pool::create(&t.0, create_opts().max_size(6 << 20)).unwrap();
    let mut linked = 0u64;
    let err = loop {
        let r = pool.txn(|tx| {
            let mut head = tx.root::<Small>("smalls")?.unwrap_or_default();
            for i in 0..100 {
                head = tx.alloc(Small { next: head, v: [i; 3] })?;
            }
            tx.set_root("smalls", head)
        });
        match r {
            Ok(()) => linked += 100,
            Err(e) => break e,
        }
    };
    assert!(matches!(err, Error::PoolFull { .. }), "{err:?}");
    let counted = pool.info().live_objects;
    let reachable = pool.collect().unwrap().objects;
    assert_eq!(reachable, linked);
    assert_eq!(pool.info().live_objects, linked);
    assert_eq!(counted, linked, "after PoolFull the allocator counted {} more live objects than exist", counted as i64 - linked as i64);
}

// ----- typed roots and changed layouts ------------------------------------------

#[test]
fn root_of_another_type_is_root_type() {
    let t = TempPool::new("roottype");
    let pool = create(&t);
    pool.txn(|tx| {
        let n = tx.alloc(5u64)?;
        tx.set_root("n", n)?;
        let a = tx.alloc_array::<u32>(4)?;
        tx.set_root_array("a", a)
    })
    .unwrap();
    let check = |pool: &Pool| {
        pool.txn(|tx| {
            match tx.root::<u32>("n").err().unwrap() {
                Error::RootType { name, expected, found } => {
                    assert_eq!((name.as_str(), expected.as_str(), found.as_str()), ("n", "u32", "u64"))
                }
                other => panic!("{other:?}"),
            }
            assert!(matches!(tx.root::<Node>("n"), Err(Error::RootType { .. })));
            // an object root read as an array, and the other way round
            assert!(matches!(tx.root_array::<u64>("n"), Err(Error::RootType { .. })));
            assert!(matches!(tx.root::<u32>("a"), Err(Error::RootType { .. })));
            assert!(matches!(tx.root_array::<u64>("a"), Err(Error::RootType { .. })));
            // the right type still works
            assert_eq!(tx.read(tx.root::<u64>("n")?.unwrap())?, 5);
            assert_eq!(tx.len(tx.root_array::<u32>("a")?.unwrap())?, 4);
            assert_eq!(tx.root::<u64>("missing")?, None);
            Ok::<_, Error>(())
        })
        .unwrap()
    };
    check(&pool);
    pool.close().unwrap();
    check(&open(&t.0).unwrap());
}

mod shape_v1 {
    #[derive(Clone, Copy, engram::Persistent)]
    #[engram(name = "bad_input::Shape")]
    pub struct Shape {
        pub w: u64,
    }
}

mod shape_v2 {
    /// The same name, one more field.
    #[derive(Clone, Copy, engram::Persistent)]
    #[engram(name = "bad_input::Shape")]
    pub struct Shape {
        pub w: u64,
        pub h: u64,
    }
}

mod shape_v3 {
    /// The same name and size, a renamed field.
    #[derive(Clone, Copy, engram::Persistent)]
    #[engram(name = "bad_input::Shape")]
    pub struct Shape {
        pub width: u64,
    }
}

fn assert_layout_mismatch<T>(r: Result<T, Error>) {
    match r.err().expect("a changed layout was accepted") {
        Error::LayoutMismatch { type_name, changed, .. } => {
            assert_eq!(type_name, "bad_input::Shape");
            assert!(!changed.is_empty());
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn changed_layout_is_layout_mismatch() {
    let t = TempPool::new("layoutmm");
    let pool = create(&t);
    pool.txn(|tx| {
        let s = tx.alloc(shape_v1::Shape { w: 7 })?;
        tx.set_root("shape", s)
    })
    .unwrap();
    let check = |pool: &Pool| {
        assert_layout_mismatch(pool.txn(|tx| tx.root::<shape_v2::Shape>("shape")));
        assert_layout_mismatch(pool.txn(|tx| tx.root::<shape_v3::Shape>("shape")));
        assert_layout_mismatch(pool.txn(|tx| tx.alloc(shape_v2::Shape { w: 1, h: 2 })));
        assert_layout_mismatch(pool.txn(|tx| tx.alloc_array::<shape_v3::Shape>(3)));
        let w = pool.txn(|tx| tx.read(tx.root::<shape_v1::Shape>("shape")?.unwrap())).unwrap().w;
        assert_eq!(w, 7);
    };
    check(&pool);
    pool.close().unwrap();
    // A fresh open has no cached type ids: the pool's type table decides.
    check(&open(&t.0).unwrap());
}

// ----- bad pointers ---------------------------------------------------------------

#[test]
fn bad_pointers_are_bad_pointer() {
    let t = TempPool::new("badptr");
    let pool = create(&t);
    build_list(&pool, 3);
    let base = pool.info().base;
    let size = pool.info().size;
    let bad = [0, 8, base, base + 4096, base + LOG_OFF, base + size, base + size + 64, base + HEAP_OFF + 0x1_0003, u64::MAX - 7];
    pool.txn(|tx| {
        for &a in &bad {
            let p = PPtr::<Node>::from_addr(a);
            assert!(matches!(tx.read(p), Err(Error::BadPointer { .. })), "read at {a:#x}");
            assert!(matches!(tx.write(p, Node { value: 1, next: PPtr::null() }), Err(Error::BadPointer { .. })), "write at {a:#x}");
            assert!(matches!(tx.free(p), Err(Error::BadPointer { .. })), "free at {a:#x}");
            let arr = PArray::<u64>::from_addr(a);
            assert!(matches!(tx.len(arr), Err(Error::BadPointer { .. })), "len at {a:#x}");
            assert!(matches!(tx.get(arr, 0), Err(Error::BadPointer { .. })), "get at {a:#x}");
            assert!(a == 0 || tx.set_root("x", p).is_err(), "root to {a:#x}");
        }
        // a pointer into the middle of a live object is not an object
        let head = tx.root::<Node>("list")?.unwrap();
        assert!(matches!(tx.free(PPtr::<Node>::from_addr(head.addr() + 8)), Err(Error::BadPointer { .. })));
        // out-of-bounds indexes
        let a = tx.alloc_array::<u64>(10)?;
        assert!(matches!(tx.get(a, 10), Err(Error::OutOfBounds { index: 10, count: 1, len: 10 })));
        assert!(matches!(tx.get(a, u64::MAX), Err(Error::OutOfBounds { .. })));
        assert!(matches!(tx.read_slice(a, 5, &mut [0u64; 6]), Err(Error::OutOfBounds { .. })));
        assert!(matches!(tx.alloc_array::<u64>(u64::MAX / 4), Err(Error::InvalidArgument { .. })));
        assert!(matches!(tx.alloc_array::<u64>(u64::MAX), Err(Error::InvalidArgument { .. })));
        // more arenas than a pool may have; more than this pool's maximum size
        assert!(matches!(tx.alloc_array::<u64>(1 << 40), Err(Error::PoolFull { .. })));
        assert!(matches!(tx.alloc_array::<u64>(16 << 20), Err(Error::PoolFull { .. })));
        assert!(matches!(tx.set_root(&"r".repeat(ROOT_NAME_MAX + 1), head), Err(Error::InvalidArgument { .. })));
        assert!(matches!(tx.set_root("", head), Err(Error::InvalidArgument { .. })));
        Ok::<_, Error>(())
    })
    .unwrap();
    // nothing above changed the pool
    assert_eq!(walk_list(&pool, 10).unwrap(), (3, 3));
    assert_eq!(pool.check().unwrap().objects, 3);
}

/// Issue 15: reads are bounded to the object as writes are: a read that
/// starts inside an object but runs past its slot, or a type bigger than the
/// object, is `BadPointer`, never the neighbour's header bytes.
#[test]
fn reads_are_bounded_to_the_object() {
    let t = TempPool::new("readbounds");
    let pool = create(&t);
    build_list(&pool, 3);
    pool.txn(|tx| {
        let head = tx.root::<Node>("list")?.unwrap();
        // A 16-byte Node read 8 bytes in: its last 8 bytes are the next slot's header.
        let shifted = PPtr::<Node>::from_addr(head.addr() + 8);
        assert!(matches!(tx.read(shifted), Err(Error::BadPointer { .. })), "read at +8");
        assert!(matches!(tx.write(shifted, Node { value: 0, next: PPtr::null() }), Err(Error::BadPointer { .. })), "write at +8");
        // A 64-byte type through a 16-byte object.
        let wide = PPtr::<[u64; 8]>::from_addr(head.addr());
        assert!(matches!(tx.read(wide), Err(Error::BadPointer { .. })), "64-byte read of a 16-byte object");
        // Reads inside the object still work, whole or by field.
        assert_eq!(tx.read(PPtr::<u64>::from_addr(head.addr() + 8))?, tx.read(head)?.next.addr());
        Ok::<_, Error>(())
    })
    .unwrap();
}

/// A wild pointer that lands in an arena's metadata spans (span table,
/// bitmaps) is not an object: writing through it must be refused, or the
/// allocator's persistent state is overwritten.
#[test]
fn write_into_arena_metadata_is_bad_pointer() {
    let t = TempPool::new("metawrite");
    let pool = create(&t);
    build_list(&pool, 3);
    let base = pool.info().base;
    // The span-table entry of span 8, the first span holding objects.
    let wild = PPtr::<u64>::from_addr(base + HEAP_OFF + 8 * 4);
    let r = pool.txn(|tx| tx.write(wild, 0xdead_beef_dead_beef));
    let check = pool.check();
    assert!(matches!(r, Err(Error::BadPointer { .. })), "a write into the span table was accepted ({r:?}); check now says {check:?}");
}

/// Indexing an array whose header claims an absurd length (a corrupt pool)
/// must be an error: never an arithmetic-overflow panic, and never a read of
/// bytes beyond the array's own slot.
#[test]
fn huge_corrupt_array_length_is_an_error() {
    let t = TempPool::new("hugelen");
    let pool = create(&t);
    build_array(&pool, "arr", 4);
    let a = pool.txn(|tx| tx.root_array::<u64>("arr")).unwrap().unwrap();
    let base = pool.info().base;
    pool.close().unwrap();
    let mut bytes = read_file(&t.0);
    let count_off = (a.addr() - base - OBJ_HEADER + 8) as usize;
    bytes[count_off..count_off + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    write_file(&t.0, &bytes);
    let pool = open(&t.0).unwrap();
    // The root naming it is reported (and treated as null) by the walk.
    assert!(matches!(pool.check(), Err(Error::BadFields { count: 1, .. })));
    let mut wrong = Vec::new();
    for i in [4u64, 5, 1 << 40, 1 << 61, u64::MAX / 8 + 1, u64::MAX - 1] {
        let r = catch_unwind(AssertUnwindSafe(|| pool.txn(|tx| tx.get(a, i))));
        match r {
            Ok(Err(Error::BadPointer { .. } | Error::Corrupt { .. } | Error::InvalidArgument { .. })) => {}
            Ok(other) => wrong.push(format!("element {i}: {other:?}")),
            Err(p) => wrong.push(format!("element {i}: panicked: {}", panic_text(&p))),
        }
    }
    assert!(wrong.is_empty(), "a 4-element array whose header says u64::MAX elements:\n{}", wrong.join("\n"));
}

/// Freeing the same object in two regions must not put it on the free list
/// twice (two later allocations would then share one slot).
#[test]
fn double_free_across_regions_is_refused() {
    let t = TempPool::new("doublefree");
    let pool = create(&t);
    let p = pool.txn(|tx| tx.alloc(Node { value: 1, next: PPtr::null() })).unwrap();
    pool.txn(|tx| tx.free(p)).unwrap();
    let second = pool.txn(|tx| tx.free(p));
    let (a, b) = pool
        .txn(|tx| Ok::<_, Error>((tx.alloc(Node { value: 2, next: PPtr::null() })?, tx.alloc(Node { value: 3, next: PPtr::null() })?)))
        .unwrap();
    assert_ne!(a, b, "two live allocations share one slot after a double free (second free returned {second:?})");
    assert!(matches!(second, Err(Error::BadPointer { .. } | Error::DoubleFree { .. })), "second free: {second:?}");
}

/// A type that needs 16-byte alignment.
#[derive(Clone, Copy, Persistent)]
struct Wide {
    v: u128,
}

/// Child half of `misaligned_pointer_is_bad_pointer`: reads a `Wide` through
/// a pointer that is 8- but not 16-aligned (as a flipped bit 3 would make).
#[test]
#[ignore = "helper: run in a child process by misaligned_pointer_is_bad_pointer"]
fn child_misaligned_read() {
    if !is_child() {
        return;
    }
    let t = TempPool::new("misaligned");
    let pool = create(&t);
    let p = pool.txn(|tx| tx.alloc(Wide { v: 1 })).unwrap();
    let wild = PPtr::<Wide>::from_addr(p.addr() + 8);
    let r = pool.txn(|tx| tx.read(wild).map(|w| w.v));
    println!("CHILD-RESULT read {r:?}");
    let r = pool.txn(|tx| tx.write(wild, Wide { v: 2 }));
    println!("CHILD-RESULT write {r:?}");
}

#[test]
fn misaligned_pointer_is_bad_pointer() {
    let (status, out) = run_child("child_misaligned_read");
    assert!(status.success(), "reading a u128 struct through a misaligned pointer crashed the process ({status}):\n{out}");
    assert!(out.contains("CHILD-RESULT read Err(BadPointer"), "{out}");
    assert!(out.contains("CHILD-RESULT write Err(BadPointer"), "{out}");
}

// ----- random mutation sweeps ------------------------------------------------------

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
}

fn kind(e: &Error) -> &'static str {
    match e {
        Error::Io { .. } => "Io",
        Error::NotAPool { .. } => "NotAPool",
        Error::Truncated { .. } => "Truncated",
        Error::BadChecksum { .. } => "BadChecksum",
        Error::UnsupportedVersion { .. } => "UnsupportedVersion",
        Error::WrongLayout { .. } => "WrongLayout",
        Error::LayoutMismatch { .. } => "LayoutMismatch",
        Error::Corrupt { .. } => "Corrupt",
        Error::PoolFull { .. } => "PoolFull",
        Error::InvalidArgument { .. } => "InvalidArgument",
        Error::BadPointer { .. } => "BadPointer",
        Error::AlreadyOpen { .. } => "AlreadyOpen",
        Error::Exists { .. } => "Exists",
        Error::RootType { .. } => "RootType",
        Error::TableFull { .. } => "TableFull",
        Error::LockTimeout => "LockTimeout",
        Error::Aborted => "Aborted",
        Error::Busy { .. } => "Busy",
        Error::ReadOnly => "ReadOnly",
        Error::TxTooLarge { .. } => "TxTooLarge",
        Error::NestedTransaction { .. } => "NestedTransaction",
        Error::DoubleFree { .. } => "DoubleFree",
        Error::OutOfBounds { .. } => "OutOfBounds",
        Error::PoolTooSmall { .. } => "PoolTooSmall",
        Error::TxnInAtomically => "TxnInAtomically",
        Error::BadPointerField { .. } => "BadPointerField",
        Error::BadFields { .. } => "BadFields",
        _ => "other",
    }
}

#[derive(Default)]
struct Tally {
    counts: BTreeMap<String, u64>,
    panics: Vec<String>,
    /// The mutations behind each `silent:` outcome.
    silent: Vec<String>,
}

impl Tally {
    fn add(&mut self, what: String) {
        *self.counts.entry(what).or_default() += 1;
    }

    fn count(&self, prefix: &str) -> u64 {
        self.counts.iter().filter(|(k, _)| k.starts_with(prefix)).map(|(_, v)| v).sum()
    }

    fn summary(&self) -> String {
        let list = |prefix: &str| {
            self.counts
                .iter()
                .filter(|(k, _)| k.starts_with(prefix))
                .map(|(k, v)| format!("{} {v}", &k[prefix.len()..]))
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!(
            "opened {} ({}), rejected {} ({}), silently wrong {} ({}), panicked {}",
            self.count("open:"),
            list("open:"),
            self.count("reject:"),
            list("reject:"),
            self.count("silent:"),
            list("silent:"),
            self.panics.len()
        )
    }
}

fn outcome<T>(step: &str, r: &Result<T, Error>) -> String {
    match r {
        Ok(_) => format!("{step} ok"),
        Err(e) => format!("{step} {}", kind(e)),
    }
}

/// Opens a (possibly mutated) pool and exercises it: walk, check, info, a
/// small write region, collect, close, then reopen and walk again. Returns a
/// label for the outcome: `reject:<error>` when the open refused the file,
/// `open:...` when it opened, and `silent:...` when it opened and the data
/// came out wrong (before or after the write and the reopen) with no step
/// having reported a typed error: damage the engine did not see.
fn exercise(path: &Path) -> String {
    let pool = match open(path) {
        Ok(p) => p,
        Err(e) => return format!("reject:{}", kind(&e)),
    };
    let list = walk_list(&pool, 1_000);
    let arr = walk_array(&pool, "arr", 1_000);
    let big = walk_array(&pool, "big", 20_000);
    let intact = list.as_ref().is_ok_and(|&v| v == LIST) && arr.as_ref().is_ok_and(|&v| v == ARR) && big.as_ref().is_ok_and(|&v| v == BIG);
    let check = pool.check();
    let _ = pool.info();
    // A write region: push a node, drop one; then collect and close.
    let write = pool.txn(|tx| {
        let head = tx.root::<Node>("list")?.unwrap_or_default();
        let n = tx.alloc(Node { value: 1, next: head })?;
        tx.set_root("list", n)
    });
    let collect = if check.is_ok() { pool.collect().map(|_| ()) } else { Ok(()) };
    let _ = pool.info();
    let close = pool.close();
    let walk =
        if intact { "intact".to_string() } else { format!("{}/{}/{}", outcome("list", &list), outcome("arr", &arr), outcome("big", &big)) };
    let errors = list.is_err() || arr.is_err() || big.is_err() || check.is_err() || write.is_err() || collect.is_err() || close.is_err();
    let label = format!("{} check {}", walk, outcome("", &check).trim());
    if errors {
        return format!("open:{label}");
    }
    // Nothing complained: the data must be right, and stay right after the
    // write, the collection and a reopen.
    let after = match open(path) {
        Ok(p) => {
            let l = walk_list(&p, 1_000);
            let ok = l.as_ref().is_ok_and(|&v| v == (LIST.0 + 1, LIST.1 + 1))
                && walk_array(&p, "arr", 1_000).is_ok_and(|v| v == ARR)
                && walk_array(&p, "big", 20_000).is_ok_and(|v| v == BIG);
            let checked = p.check();
            let _ = p.close();
            if checked.is_err() {
                return format!("open:{label} reopen check {}", outcome("", &checked).trim());
            }
            ok
        }
        Err(e) => return format!("open:{label} reopen {}", kind(&e)),
    };
    if intact && after {
        format!("open:{label}")
    } else {
        format!("silent:{label} after reopen {}", if after { "intact" } else { "wrong" })
    }
}

/// Metadata areas the sweep mutates: (name, pool offset, length).
const AREAS: [(&str, u64, u64); 8] = [
    ("header A", 0, 512),
    ("header B", HEADER_SLOT, 512),
    ("header slots", 0, 2 * HEADER_SLOT),
    ("arena table", ARENA_TABLE_OFF, 2 * 8),
    ("root table", ROOTS_OFF, 4 * 64),
    ("type table", TYPES_OFF, 8 * 256),
    ("log slot 0", LOG_OFF, 2048),
    ("span table", HEAP_OFF, 64 * 4),
];

#[test]
fn random_metadata_mutations_give_typed_errors() {
    let seed = std::env::var("ENGRAM_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0xE9A0_2024u64);
    let iters: u64 = std::env::var("ENGRAM_FUZZ_ITERS").ok().and_then(|s| s.parse().ok()).unwrap_or(300);
    let t = sample_pool("fuzz-meta");
    let orig = read_file(&t.0);
    // The bitmaps of the first spans (written by the clean close) too.
    let bitmaps = ("span bitmaps", HEAP_OFF + ARENA_BITMAP_OFF + ARENA_META_SPANS * SPAN_BITMAP_BYTES, 4 * SPAN_BITMAP_BYTES);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut tally = Tally::default();
    let copy = TempPool::new("fuzz-meta-copy");
    let started = std::time::Instant::now();
    for iter in 0..iters {
        let mut bytes = orig.clone();
        let mut flips = Vec::new();
        for _ in 0..rng.gen_range(1..=8) {
            let k = rng.gen_range(0..AREAS.len() + 1);
            let (name, off, len) = if k == AREAS.len() { bitmaps } else { AREAS[k] };
            let at = (off + rng.gen_range(0..len)) as usize;
            let x = rng.gen_range(1..=255u8);
            bytes[at] ^= x;
            flips.push(format!("{name}@{at:#x}^{x:#04x}"));
        }
        write_file(&copy.0, &bytes);
        match catch_unwind(AssertUnwindSafe(|| exercise(&copy.0))) {
            Ok(label) => {
                if label.starts_with("silent:") {
                    tally.silent.push(format!("seed {seed:#x} iteration {iter}: {}", flips.join(" ")));
                }
                tally.add(label)
            }
            Err(p) => tally.panics.push(format!("seed {seed:#x} iteration {iter}: {} after {}", panic_text(&p), flips.join(" "))),
        }
    }
    println!("metadata mutations, seed {seed:#x}, {iters} pools in {:?}: {}", started.elapsed(), tally.summary());
    for (k, v) in &tally.counts {
        println!("  {v:4} {k}");
    }
    assert!(tally.panics.is_empty(), "{} panics:\n{}", tally.panics.len(), tally.panics.join("\n"));
    assert!(tally.count("reject:") > 0 && tally.count("open:") > 0, "{}", tally.summary());
    assert!(tally.silent.is_empty(), "{} silent acceptances:\n{}", tally.silent.len(), tally.silent.join("\n"));
}

#[test]
fn random_heap_mutations_give_typed_errors() {
    let seed = std::env::var("ENGRAM_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x000B_1EC7_u64);
    let t = sample_pool("fuzz-heap");
    // Where the objects are: every node, both arrays.
    let (base, nodes, arrays) = {
        let pool = open(&t.0).unwrap();
        let nodes: Vec<u64> = pool
            .txn(|tx| {
                let mut out = Vec::new();
                let mut p = tx.root::<Node>("list")?.unwrap_or_default();
                while !p.is_null() {
                    out.push(p.addr());
                    p = tx.read(p)?.next;
                }
                Ok::<_, Error>(out)
            })
            .unwrap();
        let arrays = pool
            .txn(|tx| Ok::<_, Error>(vec![tx.root_array::<u64>("arr")?.unwrap().addr(), tx.root_array::<u64>("big")?.unwrap().addr()]))
            .unwrap();
        let base = pool.info().base;
        pool.close().unwrap();
        (base, nodes, arrays)
    };
    let orig = read_file(&t.0);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut tally = Tally::default();
    let copy = TempPool::new("fuzz-heap-copy");
    for iter in 0..150 {
        let mut bytes = orig.clone();
        let mut flips = Vec::new();
        for _ in 0..rng.gen_range(1..=3) {
            // An object header (16 bytes before the payload) or a node's `next` field.
            let (what, at) = match rng.gen_range(0..3) {
                0 => ("node header", nodes[rng.gen_range(0..nodes.len())] - OBJ_HEADER + rng.gen_range(0..16)),
                1 => ("array header", arrays[rng.gen_range(0..2)] - OBJ_HEADER + rng.gen_range(0..16)),
                _ => ("next field", nodes[rng.gen_range(0..nodes.len())] + 8 + rng.gen_range(0..8)),
            };
            let at = (at - base) as usize;
            // Mostly single-bit flips (the likeliest damage), sometimes a whole byte.
            let x = if rng.gen_bool(0.7) { 1u8 << rng.gen_range(0..8) } else { rng.gen_range(1..=255u8) };
            bytes[at] ^= x;
            flips.push(format!("{what}@{at:#x}^{x:#04x}"));
        }
        write_file(&copy.0, &bytes);
        match catch_unwind(AssertUnwindSafe(|| exercise(&copy.0))) {
            Ok(label) => {
                if label.starts_with("silent:") {
                    tally.silent.push(format!("seed {seed:#x} iteration {iter}: {}", flips.join(" ")));
                }
                tally.add(label)
            }
            Err(p) => tally.panics.push(format!("seed {seed:#x} iteration {iter}: {} after {}", panic_text(&p), flips.join(" "))),
        }
    }
    println!("heap mutations, seed {seed:#x}: {}", tally.summary());
    for (k, v) in &tally.counts {
        println!("  {v:4} {k}");
    }
    assert!(tally.panics.is_empty(), "{} panics:\n{}", tally.panics.len(), tally.panics.join("\n"));
    // Damage the checker must see: a bad tag or type in a header, a pointer
    // to no object (reported as bad fields, treated as null: issue 15).
    assert!(tally.counts.keys().any(|k| k.ends_with("check BadFields")), "{}", tally.summary());
    // Heap objects carry no checksum (format version 2 checks metadata
    // only). `check` doubts headers that disagree with how the engine
    // writes them (unknown flag bits, a plain object's count, an array
    // count that does not match its slot's size class: "check Corrupt"),
    // but a pointer field flipped into the address of another live node, or
    // an array count changed within its size class, is indistinguishable
    // from data the program wrote. Such cases are counted and listed, not
    // refused (docs/format.md, "Heap objects carry no checksum").
    println!("silent: {:?}", tally.silent);
}

// ----- checksummed metadata (format version 2) --------------------------------

/// Where one kind of metadata lives in the sample pool, and what a
/// one-byte change there must give (besides a panic or silence, which it
/// never may):
///
/// - `typed`: the open is refused (`Corrupt`, `BadChecksum`), or a later
///   step reports a typed error;
/// - `recovered`: the change is detected and the engine repairs around it
///   (the other header copy; bitmaps rebuilt by marking);
/// - `harmless`: the bytes are provably never read (stale log entries of
///   an older generation, reserved words), so the data is intact.
struct Area {
    name: &'static str,
    off: u64,
    len: u64,
    expect: &'static str,
}

fn checked_areas(orig: &[u8]) -> Vec<Area> {
    let cur = current_slot(orig) as u64 * HEADER_SLOT;
    let h = header_at(orig, current_slot(orig));
    let roots_used = (0..ROOTS_CAP as u64).take_while(|&i| orig[(ROOTS_OFF + i * 64 + 12) as usize] & 1 != 0).count() as u64;
    let types_used = (0..TYPES_CAP as u64).take_while(|&i| orig[(TYPES_OFF + i * 256) as usize] == 1).count() as u64;
    assert!(roots_used >= 3 && types_used >= 4 && h.clean == 1);
    let meta = HEAP_OFF; // arena 0
    let spans = (h.size - HEAP_OFF) / SPAN_SIZE;
    let word = |g: u64| u32::from_le_bytes(orig[(meta + g * 4) as usize..(meta + g * 4 + 4) as usize].try_into().unwrap());
    let used = (ARENA_META_SPANS..spans).take_while(|&g| word(g) != 0).count() as u64;
    assert!(used >= 3 && ARENA_META_SPANS + used < spans);
    vec![
        Area { name: "current header copy", off: cur, len: 512, expect: "recovered (the other copy)" },
        Area { name: "log generation word", off: LOG_OFF, len: 8, expect: "typed (generation checksum)" },
        Area { name: "log slot reserved words", off: LOG_OFF + 16, len: 48, expect: "harmless (never read)" },
        Area { name: "span table (used spans)", off: meta + ARENA_META_SPANS * 4, len: used * 4, expect: "typed (entry checksum)" },
        Area {
            name: "span table (free spans)",
            off: meta + (ARENA_META_SPANS + used) * 4,
            len: (spans - ARENA_META_SPANS - used) * 4,
            expect: "typed (entry checksum)",
        },
        Area {
            name: "span table (beyond the file)",
            off: meta + spans * 4,
            len: 64 * 4,
            expect: "harmless (not read; cleared when the pool grows over them)",
        },
        Area {
            name: "slot bitmaps and their checksums",
            off: meta + ARENA_BITMAP_OFF + ARENA_META_SPANS * SPAN_BITMAP_BYTES,
            len: 2 * SPAN_BITMAP_BYTES,
            expect: "recovered (bitmaps rebuilt by marking)",
        },
        Area {
            name: "bitmap checksums",
            off: meta + ARENA_BITMAP_CRC_OFF + ARENA_META_SPANS * 4,
            len: 8 * 4,
            expect: "recovered (bitmaps rebuilt by marking)",
        },
        Area { name: "root entries in use", off: ROOTS_OFF, len: roots_used * 64, expect: "typed (entry checksum)" },
        Area { name: "type entries in use", off: TYPES_OFF, len: types_used * 256, expect: "typed (entry checksum)" },
    ]
}

/// Issue 15: one-byte changes, area by area, in every kind of metadata the
/// engine reads. Before format version 2 a flipped log generation word
/// could make an old region's entries live and roll committed data back, a
/// flipped bitmap bit could free a live slot, and a flipped root or type
/// entry could open with wrong data. Now none is silent: each area's
/// outcomes are typed errors, detected-and-recovered opens with intact
/// data, or (for bytes that are never read) intact data.
#[test]
fn one_byte_changes_in_checked_metadata_are_never_silent() {
    let t = sample_pool("checked-meta");
    let orig = read_file(&t.0);
    let copy = TempPool::new("checked-meta-copy");
    let mut rng = StdRng::seed_from_u64(0x15_C4EC);
    let mut failures = Vec::new();
    for area in checked_areas(&orig) {
        let mut tally = Tally::default();
        for _ in 0..24 {
            let mut bytes = orig.clone();
            let at = (area.off + rng.gen_range(0..area.len)) as usize;
            let x = if rng.gen_bool(0.5) { 1u8 << rng.gen_range(0..8) } else { rng.gen_range(1..=255u8) };
            bytes[at] ^= x;
            write_file(&copy.0, &bytes);
            match catch_unwind(AssertUnwindSafe(|| exercise(&copy.0))) {
                Ok(label) if label.starts_with("silent:") => failures.push(format!("{}: @{at:#x}^{x:#04x}: {label}", area.name)),
                Ok(label) => tally.add(label),
                Err(p) => failures.push(format!("{}: @{at:#x}^{x:#04x}: panic {}", area.name, panic_text(&p))),
            }
        }
        println!("{:34} expected {:40} {}", area.name, area.expect, tally.summary());
        let typed = tally.count("reject:")
            + tally.counts.iter().filter(|(k, _)| k.starts_with("open:") && !k.ends_with("intact check ok")).map(|(_, v)| v).sum::<u64>();
        let intact = tally.count("open:intact check ok");
        let ok = match area.expect.split(' ').next() {
            Some("typed") => intact == 0,
            _ => typed == 0,
        };
        if !ok {
            failures.push(format!("{}: expected {}, got {}", area.name, area.expect, tally.summary()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Issue 15: a flipped bit in the generation word of a slot whose older
/// entries are still in the log used to make them live, so the open
/// "recovered" by rolling committed regions back. Now it is `Corrupt`.
#[test]
fn flipped_log_generation_is_corrupt_not_a_rollback() {
    let t = sample_pool("gen-flip");
    let mut bytes = read_file(&t.0);
    for bit in 0..8 {
        let mut b = bytes.clone();
        b[LOG_OFF as usize] ^= 1 << bit;
        write_file(&t.0, &b);
        match open(&t.0) {
            Err(Error::Corrupt { what }) => assert!(what.contains("generation"), "{what}"),
            Err(e) => panic!("bit {bit}: {e}"),
            Ok(pool) => panic!("bit {bit}: opened; list {:?}, big {:?}", walk_list(&pool, 1_000), walk_array(&pool, "big", 20_000)),
        }
    }
    write_file(&t.0, &bytes);
    let pool = open(&t.0).unwrap();
    assert_sample_intact(&pool);
    pool.close().unwrap();
    bytes.clear();
}

/// Issue 15: a saved slot bitmap whose bit for a live object flipped to
/// free used to hand that slot out again, overwriting the object. Now its
/// checksum fails, the open rebuilds the bitmaps by marking, and heavy
/// allocation afterwards leaves the data intact.
#[test]
fn flipped_slot_bitmap_is_rebuilt_by_marking() {
    let t = sample_pool("bitmap-flip");
    let head = {
        let pool = open(&t.0).unwrap();
        let h = pool.txn(|tx| tx.root::<Node>("list").map(|p| p.unwrap().addr())).unwrap();
        let base = pool.info().base;
        pool.close().unwrap();
        h - OBJ_HEADER - base
    };
    let g = (head - HEAP_OFF) / SPAN_SIZE;
    let slot = (head - HEAP_OFF - g * SPAN_SIZE) / 32; // Node slots are 32 bytes
    let bit_at = HEAP_OFF + ARENA_BITMAP_OFF + g * SPAN_BITMAP_BYTES + slot / 8;
    let mut bytes = read_file(&t.0);
    assert_ne!(bytes[bit_at as usize] & (1 << (slot % 8)), 0, "the head's slot is marked in use");
    bytes[bit_at as usize] ^= 1 << (slot % 8);
    write_file(&t.0, &bytes);
    let pool = open(&t.0).unwrap();
    assert!(pool.open_report().bitmaps_rebuilt, "{:?}", pool.open_report());
    pool.txn(|tx| {
        for v in 0..400u64 {
            let n = tx.alloc(Node { value: v, next: PPtr::null() })?;
            tx.set_root("spare", n)?;
        }
        Ok::<_, Error>(())
    })
    .unwrap();
    assert_eq!(walk_list(&pool, 1_000).unwrap(), LIST);
    pool.close().unwrap();
}
