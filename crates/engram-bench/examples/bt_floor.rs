//! The floor of binary-trees in Engram's object format: the same program as
//! `engram_impl::binary_trees` (same depths, iterations and regions), over
//! an allocator that does only what the pool format asks of every object
//! and nothing Engram does for safety or recovery.
//!
//! Per object it writes the 16-byte header (type id, tag, count) and the
//! payload; per free it checks the tag and clears it at "commit"; per
//! writing "region" it flushes the new objects' lines and fences once
//! (`engram::pmem::Persister`, pmem mode). Slots come from a LIFO free list
//! or a bump pointer in a file mapping on `--dir` (tmpfs), so page faults
//! are those of a pool. What it leaves out: the undo log and its commit
//! (generation bump and its fence), the GC gate and log slot, pointer
//! checks beyond "inside the heap and tagged", the span tables, the region's
//! allocation record, double-free detection, thread caches. So the gap
//! between this and malloc is what the format costs (headers, flushes,
//! fences), and the gap between Engram and this is Engram's bookkeeping.
//!
//! Not a crash-consistent engine: a throw-away measurement. Run:
//! `cargo run --release -p engram-bench --example bt_floor -- 14 /dev/shm`
//! and time it with `perf stat -e task-clock` like `run-one`.

use std::fs::OpenOptions;
use std::os::unix::io::AsRawFd;

use engram::pmem::Persister;
use engram::Durability;
use engram_bench::peers::binary_trees_pool_bytes;
use engram_bench::workloads::{binary_trees_iterations, binary_trees_max_depth, BINARY_TREES_MIN_DEPTH};

/// Slot: 16-byte header + a node of two 8-byte pointers (class 0 in Engram).
const SLOT: u64 = 32;
const TAG: u32 = 0xE9A0_0000; // the format's OBJ_TAG

/// The file-backed heap and its trivial allocator.
struct Floor {
    base: u64,
    size: u64,
    bump: u64,
    free: Vec<u64>,
    /// Payload addresses to free when the region "commits".
    frees: Vec<u64>,
    /// Lines written in this region, merged when adjacent: (start, end).
    dirty: Vec<(u64, u64)>,
    persist: Persister,
}

impl Floor {
    fn alloc(&mut self, left: u64, right: u64) -> u64 {
        let hdr = match self.free.pop() {
            Some(h) => h,
            None => {
                assert!(self.bump + SLOT <= self.size, "floor heap full");
                self.bump += SLOT;
                self.base + self.bump - SLOT
            }
        };
        // SAFETY: `hdr` is a slot of the mapping (bump-checked above, or a
        // freed slot), 16-aligned, owned by this program alone.
        unsafe {
            std::ptr::write(hdr as *mut [u32; 4], [7, TAG, 1, 0]);
            std::ptr::write((hdr + 16) as *mut [u64; 2], [left, right]);
        }
        match self.dirty.last_mut() {
            Some(d) if hdr <= d.1.next_multiple_of(64) && hdr + SLOT >= d.0 / 64 * 64 => *d = (d.0.min(hdr), d.1.max(hdr + SLOT)),
            _ => self.dirty.push((hdr, hdr + SLOT)),
        }
        hdr + 16
    }

    fn read(&self, p: u64) -> [u64; 2] {
        assert!(p >= self.base + 16 && p + 16 <= self.base + self.size && p % 16 == 0, "bad pointer");
        // SAFETY: inside the mapping (checked), aligned.
        unsafe { std::ptr::read(p as *const [u64; 2]) }
    }

    fn free(&mut self, p: u64) {
        // SAFETY: `p` was checked by `read` just before; its header precedes it.
        let tag = unsafe { std::ptr::read((p - 12) as *const u32) };
        assert_eq!(tag, TAG, "not an object");
        self.frees.push(p);
    }

    /// The end of a writing region: flush + fence, then the frees.
    fn commit(&mut self) {
        for &(s, e) in &self.dirty {
            // SAFETY: the range lies inside the mapping.
            unsafe { self.persist.flush(s as *const u8, (e - s) as usize) };
        }
        if !self.dirty.is_empty() {
            self.persist.fence("floor: region data").expect("fence");
        }
        self.dirty.clear();
        for &p in &self.frees {
            // SAFETY: a tagged object's header inside the mapping.
            unsafe { std::ptr::write((p - 12) as *mut u32, 0) };
            self.free.push(p - 16);
        }
        self.frees.clear();
    }

    fn build(&mut self, depth: u32) -> u64 {
        if depth == 0 {
            return self.alloc(0, 0);
        }
        let (l, r) = (self.build(depth - 1), self.build(depth - 1));
        self.alloc(l, r)
    }

    fn check(&self, p: u64) -> u64 {
        let [l, r] = self.read(p);
        if l == 0 {
            return 1;
        }
        1 + self.check(l) + self.check(r)
    }

    fn free_tree(&mut self, p: u64) {
        let [l, r] = self.read(p);
        if l != 0 {
            self.free_tree(l);
            self.free_tree(r);
        }
        self.free(p);
    }

    fn one_tree(&mut self, depth: u32) -> u64 {
        let t = self.build(depth);
        self.commit();
        let n = self.check(t);
        self.free_tree(t);
        self.commit();
        n
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let depth: u32 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(14);
    let dir = args.get(2).map(String::as_str).unwrap_or("/dev/shm");
    let max_depth = binary_trees_max_depth(depth);
    let size = binary_trees_pool_bytes(max_depth).next_multiple_of(4096);
    let path = format!("{dir}/bt_floor.{}", std::process::id());
    let file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).expect("create");
    file.set_len(size).expect("size");
    // SAFETY: a fresh shared mapping of the whole file; unmapped at exit.
    let base = unsafe {
        libc::mmap(std::ptr::null_mut(), size as usize, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, file.as_raw_fd(), 0)
    };
    assert!(base != libc::MAP_FAILED, "mmap");
    let mut f = Floor {
        base: base as u64,
        size,
        bump: 0,
        free: Vec::new(),
        frees: Vec::new(),
        dirty: Vec::new(),
        persist: Persister::new(Durability::Pmem, None),
    };
    let t0 = std::time::Instant::now();
    let mut count = f.one_tree(max_depth + 1);
    let long = f.build(max_depth);
    f.commit();
    for d in (BINARY_TREES_MIN_DEPTH..=max_depth).step_by(2) {
        for _ in 0..binary_trees_iterations(max_depth, d) {
            count += f.one_tree(d);
        }
    }
    count += f.check(long);
    f.free_tree(long);
    f.commit();
    println!("bt_floor depth={max_depth} check={count} nanos={}", t0.elapsed().as_nanos());
    let _ = std::fs::remove_file(&path);
}
