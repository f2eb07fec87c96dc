//! Simulated power failure: every engine path, explored at every ordering
//! point under the x86 persistency model (the moderate sweep; the deep one
//! is `engram crashtest --deep` under `make bench`), for each flush
//! instruction, and two threads' commits in one merged trace. Also proves
//! the explorer can fail: dropping any named fence or flush (except the
//! ones listed as provably harmless, with the reason, or as open gaps) must
//! be reported by the moderate sweep, and each check made after recovery
//! catches a planted bug of its class.

use engram::crashtest::{workload, workloads, DoubleSettings, Settings};
use engram::{failpoint, fences};

mod source_scan;

/// A fresh scratch directory (tmpfs when there is one), removed on drop,
/// also when an assertion fails; tests run in parallel, each has its own.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new() -> Self {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let base = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm".into() } else { std::env::temp_dir() };
        Scratch(base.join(format!("engram-explorer-{}-{n}", std::process::id())))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The single-crash sweep tests, each over its share of the workloads (so
/// that the test harness runs them in parallel).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sweep {
    Regions,
    Huge,
    HugeMulti,
    Threads,
    Stm,
    Lazy,
}

/// The one sweep test that explores workload `name`: every workload gets
/// one (a new workload cannot fall between the tests' filters).
fn sweep_of(name: &str) -> Sweep {
    match name {
        "huge" => Sweep::Huge,
        "huge-multi" => Sweep::HugeMulti,
        n if n.starts_with("mt-") => Sweep::Threads,
        n if n.starts_with("stm-") => Sweep::Stm,
        n if n.starts_with("lazy-") => Sweep::Lazy,
        _ => Sweep::Regions,
    }
}

/// The region and allocator workloads here, the STM's in the next test
/// (the two run in parallel).
#[test]
fn every_workload_is_crash_consistent() {
    sweep(Sweep::Regions);
}

/// Huge objects (a whole 64 MiB arena each, so a pool of 132 MiB whose
/// images are written sparsely), in parallel with the others. The sweep
/// found a real bug: the arena table entry of a new huge object was not
/// fenced before its payload overwrote the arena's span table.
#[test]
fn huge_objects_are_crash_consistent() {
    sweep(Sweep::Huge);
}

/// Huge objects of two arenas: their head and tail arena-table entries
/// share one fence (and a line: a crash keeps a prefix), so a crash leaves
/// a head without its tail (allocation) or a tail without its head (free).
/// Recovery used to refuse such a pool as corrupt; it now hands the
/// arenas back (planting the old behaviour shows the violation).
#[test]
fn multi_arena_huge_objects_are_crash_consistent() {
    sweep(Sweep::HugeMulti);
    let m = first_violation(|| failpoint::plant("alloc.partial_huge_not_repaired"), "huge-multi");
    assert!(m.contains("arena"), "{m}");
}

/// Two threads' regions (2PL) and STM commits interleaved in one merged
/// trace; a fence completes only its own thread's flushes.
#[test]
fn two_threads_are_crash_consistent() {
    sweep(Sweep::Threads);
    let dir = Scratch::new();
    let r = workload("mt-regions").unwrap().run(&Settings::moderate(&dir.0), &mut |_, _| {}).unwrap();
    assert_eq!(r.threads, 3, "the tracing thread and two workers: {r}");
    // and the merged trace's checks can fail
    first_violation(|| failpoint::drop_fence(fences::UNDO_ENTRY), "mt-regions");
    first_violation(|| failpoint::drop_fence(fences::STM_RECORD), "mt-stm");
}

/// `log_ranges` (`engram_region_log_many`) writes several undo entries and
/// fences once: that one fence is what keeps their ranges recoverable, so
/// dropping it must show in the `log-many` workload's images.
#[test]
fn log_many_needs_its_one_undo_fence() {
    first_violation(|| failpoint::drop_fence(fences::UNDO_ENTRY), "log-many");
}

/// `ArrayView::swap` logs both elements and fences once: without that
/// fence a crash finds an element changed and its undo entry torn.
#[test]
fn swap_needs_its_one_undo_fence() {
    let m = first_violation(|| failpoint::drop_fence(fences::SWAP_ENTRIES), "swap");
    assert!(m.contains("half swap") || m.contains("counts"), "{m}");
}

/// The 2-fence commit (`log.rs`, steps 3' and 4'). Its one commit fence is
/// the commit point; and the design review's case 3: a region commits by
/// record (its generation bump pending), a later region frees the object
/// it wrote, and a third reallocates it and stores into it unlogged before
/// any entry fence. Without the freeing region's fence a crash can find the
/// fresh bytes durable and the bump lost: recovery then finds the record
/// unmatched and undoes the committed region.
#[test]
fn record_commits_need_their_fences() {
    let m = first_violation(|| failpoint::drop_fence(fences::RECORD_COMMIT), "record");
    assert!(m.contains("lost") || m.contains("conserved"), "{m}");
    let m = first_violation(|| failpoint::drop_fence(fences::BUMPS_BEFORE_REUSE), "record-free");
    println!("case 3: {m}");
    // The committing thread leaves its bump to the next fence's write-back
    // (`bumps.rs`): without it the bump is never written back, the slot's
    // next region changes the bytes the record checksums, and a crash that
    // lost the bump undoes a committed region over them.
    let m = first_violation(|| failpoint::drop_flush(fences::PENDING_BUMP), "record");
    assert!(m.contains("lost") || m.contains("conserved"), "{m}");
}

/// A region that logged nothing leaves its new objects unflushed at commit
/// (`fresh.rs`, `Tx::commit` step 1'); the next fence writes them back.
/// Without that write-back (the flush dropped) or without the listing (the
/// planted bug), a later region links objects whose stores a crash can
/// lose: the ledger then holds an entry with the wrong number or an
/// unfilled payload.
#[test]
fn fresh_objects_are_written_back_before_a_later_region_links_them() {
    for fault in [&(|| failpoint::drop_flush(fences::FRESH_LINES)) as &dyn Fn(), &|| failpoint::plant("tx.fresh_never_written_back")] {
        // (the message depends on which store was lost: the entry's number,
        // its payload, or its header, which `check` refuses)
        first_violation(fault, "fresh-link");
    }
}

/// The redo path (`log/redo.rs`, `retires.rs`): its one commit fence is
/// the commit point; the chained write-back of the slot's previous
/// region's bytes, the full settle's two steps and the fence of a region
/// leaving the path are each needed; and a planted store in place before
/// the record's fence (the bug the path must never have) is caught.
#[test]
fn redo_commits_need_their_fences() {
    for (what, name) in [
        (fences::REDO_RECORD, "redo"),
        (fences::REDO_PREVIOUS, "redo"),
        (fences::RETIRE_FENCE, "redo-undo"),
        (fences::REDO_LEAVING, "redo-undo"),
        (fences::REDO_OTHER_RETIRES, "mt-redo"),
    ] {
        let m = first_violation(|| drop_step(what), name);
        println!("{what}: {m}");
    }
    let m = first_violation(|| failpoint::plant("tx.redo_in_place_before_fence"), "redo");
    println!("in place before the fence: {m}");
}

/// The subsumed retire (`Persister::fence_redo`): a redo region whose
/// ranges cover every byte of the slot's previous redo region leaves that
/// region's in-place write-back out of its commit fence. With the cover
/// test planted to say yes whatever the ranges
/// (`retires.uncovered_as_covered`), `redo-cover`'s region that leaves out
/// the last account its predecessor wrote lets the word move past that
/// record with the account not durable: the single sweep and the
/// double-crash mode (the first recovery's state lost by the second
/// crash's images) both report it.
#[test]
fn a_subsumed_retire_needs_its_cover() {
    let m = first_violation(|| failpoint::plant("retires.uncovered_as_covered"), "redo-cover");
    assert!(m.contains("conserved") || m.contains("lost"), "{m}");
    let dir = Scratch::new();
    failpoint::plant("retires.uncovered_as_covered");
    let r = workload("redo-cover").unwrap().run_double(&Settings::moderate(&dir.0), &wide());
    failpoint::disarm_all();
    let r = r.unwrap();
    println!("{r}");
    let v = r.violations.first().unwrap_or_else(|| panic!("the double-crash mode missed an uncovered retire taken for covered: {r}"));
    println!("first crash before event {} ({:?}) [{}]:\n  {}", v.event_index, v.fence, v.image, v.message);
}

/// Each run of a two-thread workload is the one interleaving the threads
/// happened to take: run the first-commit workloads a few more times. The
/// STM's log-table race (two threads' first commits linking their redo
/// logs into one entry of the log table, fixed in `stm_pool`/`thread_log`)
/// made half the runs of `mt-stm-first` report lost or half-applied
/// transfers; `mt-regions` once reported lost regions because the workload
/// counted commits it had no right to (counts read in a later region, after
/// the noted position), a checker bug.
#[test]
fn two_threads_first_commits_over_several_interleavings() {
    let dir = Scratch::new();
    for round in 0..4 {
        for name in ["mt-stm-first", "mt-regions", "mt-stm-made", "mt-redo"] {
            let r = workload(name).unwrap().run(&Settings::moderate(&dir.0), &mut |_, _| {}).unwrap();
            for v in &r.violations {
                println!("  violation before event {} ({:?}): {} [{}]", v.event_index, v.fence, v.message, v.image);
            }
            assert!(r.violations.is_empty(), "{name}, round {round}: {r}");
        }
    }
}

/// A thread that adopts an exited thread's redo log must write that
/// thread's last in-place values back before its fence: a fence completes
/// only its own thread's flushes. Without it, `mt-stm-first` lost half a
/// transfer in about 1 run in 230 (a worker that started late adopted the
/// log of the other worker, which had already finished and exited);
/// `mt-stm-adopt` makes that order certain. Since round 21 (docs/stm.md)
/// the values stay listed in the log and the adopter's first commit
/// writes them back with its own previous values, right before its fence:
/// the planted bug that drops that write-back is caught here too. Since
/// round 26 a commit issues its own in-place write-backs at its end and
/// marks the list (`written_back`), so its thread's next commit does not
/// issue them again; adoption clears the mark, and with the planted bug
/// that keeps it the adopter fences without them.
#[test]
fn an_adopted_redo_log_is_flushed_again_by_its_new_thread() {
    let dir = Scratch::new();
    let r = workload("mt-stm-adopt").unwrap().run(&Settings::moderate(&dir.0), &mut |_, _| {}).unwrap();
    assert!(r.violations.is_empty(), "{r}");
    for bug in ["stm.in_place_not_flushed", "stm.adopted_write_back_trusted"] {
        let m = first_violation(|| failpoint::plant(bug), "mt-stm-adopt");
        assert!(m.contains("partial commit") || m.contains("money not conserved") || m.contains("lost"), "{bug}: {m}");
    }
}

#[test]
fn every_stm_workload_is_crash_consistent() {
    sweep(Sweep::Stm);
}

fn sweep(which: Sweep) {
    let dir = Scratch::new();
    let settings = Settings::moderate(&dir.0);
    let mut total = 0;
    for w in workloads().iter().filter(|w| sweep_of(w.name) == which) {
        let t0 = std::time::Instant::now();
        let r = w.run(&settings, &mut |_, _| {}).unwrap_or_else(|e| panic!("{}: {e}", w.name));
        println!("{:<14} {r} ({:.1?})", w.name, t0.elapsed());
        for v in &r.violations {
            println!("  violation before event {} ({:?}): {} [{}]", v.event_index, v.fence, v.message, v.image);
        }
        assert!(r.violations.is_empty(), "{}: {} violations", w.name, r.violations.len());
        assert!(r.points > 1 && r.images_checked > 0, "{}: explored nothing", w.name);
        total += r.images_checked;
    }
    println!("{total} images checked");
}

/// The explorer for each flush instruction the engine may use (CLWB,
/// CLFLUSHOPT, CLFLUSH on machines without the others): the tracer records
/// the forced kind, CLFLUSH adds a crash point after every flush, and every
/// image is still consistent.
#[test]
fn every_flush_kind_is_crash_consistent() {
    use engram_model::FlushKind;
    let dir = Scratch::new();
    let runs =
        [(FlushKind::Clwb, "commit"), (FlushKind::Clflushopt, "commit"), (FlushKind::Clflush, "commit"), (FlushKind::Clflush, "stm-first")];
    for (kind, name) in runs {
        let mut settings = Settings::moderate(&dir.0);
        settings.flush_kind = Some(kind);
        settings.regions = 2;
        let r = workload(name).unwrap().run(&settings, &mut |_, _| {}).unwrap();
        println!("{kind:?} {name:<10} {r}");
        for v in &r.violations {
            println!("  violation before event {} ({:?}): {} [{}]", v.event_index, v.fence, v.message, v.image);
        }
        assert!(r.violations.is_empty(), "{kind:?} {name}");
        if kind == FlushKind::Clflush {
            assert!(r.points > r.fences + 1, "{name}: no crash point after a CLFLUSH ({r})");
        } else {
            assert_eq!(r.points, r.fences + 1, "{name}: {r}");
        }
    }
}

/// The tracer records the flush instruction the persister really uses on
/// this CPU, or the one a test forces.
#[test]
fn tracer_records_the_flush_instruction() {
    use engram::pmem::FlushInstr;
    use engram::trace::Tracer;
    use engram::{CreateOptions, Pool};
    use engram_model::{Event, FlushKind};
    let dir = Scratch::new();
    std::fs::create_dir_all(&dir.0).unwrap();
    for forced in [None, Some(FlushKind::Clwb), Some(FlushKind::Clflushopt), Some(FlushKind::Clflush)] {
        let tracer = Tracer::new();
        if let Some(k) = forced {
            tracer.force_flush_kind(k);
        }
        let path = dir.0.join("kinds.pool");
        let _ = std::fs::remove_file(&path);
        let pool = Pool::create(&path, CreateOptions::new("kinds").trace(tracer.clone())).unwrap();
        tracer.start();
        pool.txn(|tx| {
            let p = tx.alloc(7u64)?;
            tx.set_root("x", p)
        })
        .unwrap();
        let trace = tracer.stop();
        pool.close().unwrap();
        let want = forced.unwrap_or(FlushInstr::detect().kind());
        let kinds: Vec<FlushKind> =
            trace.events.iter().filter_map(|e| if let Event::Flush { kind, .. } = e { Some(*kind) } else { None }).collect();
        assert!(!kinds.is_empty());
        assert!(kinds.iter().all(|&k| k == want), "{forced:?}: {kinds:?}");
    }
}

/// Named fences and flushes (`engram::fences`) whose loss the moderate
/// sweep of the given workload must report (each test below takes every
/// third).
const FAULTS: &[(&str, &str)] = &[
    (fences::SPAN_ENTRY, "alloc"),
    (fences::CLEAN_BITMAPS, "close"),
    (fences::UNDO_ENTRY, "commit"),
    (fences::SWAP_ENTRIES, "swap"),
    (fences::UNDO_BATCH, "swap"),
    (fences::CHUNK_HEADERS, "spill"),
    (fences::CHUNK_LINK, "spill"),
    (fences::RESTORED_BYTES, "abort"),
    (fences::GEN_BUMP, "commit"),
    (fences::TYPE_BODY, "commit"),
    (fences::REGION_DATA, "commit"),
    (fences::RECORD_COMMIT, "record"),
    (fences::PENDING_BUMP, "record"),
    (fences::FRESH_LINES, "fresh-link"),
    (fences::FRESH_BEFORE_RECORD, "fresh-link"),
    (fences::BUMPS_BEFORE_REUSE, "record-free"),
    (fences::REDO_RECORD, "redo"),
    (fences::REDO_PREVIOUS, "redo"),
    (fences::REDO_ROLLBACK, "redo"),
    (fences::REDO_LEAVING, "redo-undo"),
    (fences::RETIRE_FENCE, "redo-undo"),
    (fences::RETIRE_DATA, "redo-undo"),
    (fences::RETIRE_BUMP, "redo-undo"),
    (fences::REDO_OTHER_RETIRES, "mt-redo"),
    (fences::RECOVERED_BYTES, "redo-recovery"),
    (fences::HEADER_COPY, "relocation"),
    (fences::GROWN_SIZE, "growth"),
    (fences::STM_RECORD, "stm-bank"),
    (fences::STM_IDLE_VALUES, "stm-gc"),
    (fences::STM_REPLAYED, "stm-recovery"),
    (fences::STM_CLOCK, "stm-recovery"),
    (fences::LAZY_SYNC, "lazy-force"),
    (fences::FRONT_END, "raw"),
    (fences::HUGE_SPAN_TABLES, "huge"),
    (fences::HUGE_ALLOC, "huge"),
    (fences::STM_MADE, "mt-stm-made"),
    (fences::STM_HELP_VALUES, "mt-stm-young"),
    (fences::STM_HELP_CLEARED, "mt-stm-young"),
    (fences::STM_YOUNG_CLEARED, "mt-stm-young-gc"),
    (fences::HUGE_FREE, "mt-huge-free"),
    (fences::LAZY_RESULT, "lazy-force"),
    (fences::FRONT_END_PERSIST, "raw"),
];

/// Provably harmless to drop, with the reason: (name, workload that
/// reaches it, why). `ENGRAM_FAULTS_ALL=1` also runs these and requires
/// only that the workload reaches them.
const HARMLESS: &[(&str, &str, &str)] = &[
    (
        fences::RECOVERED_PAST,
        "redo-recovery",
        "the bytes it retires were fenced just before (recovered bytes before the slot's generation moves), so a \
      lost word only replays or undoes them again; and every writable open then updates its header with a fence \
      of its own on the same thread before any region runs (header copy written before it is relied on)",
    ),
    (
        fences::SWEPT_SPANS,
        "gc",
        "a lost free leaves an unreachable span allocated: every open that is not clean frees it again \
      (recovery GC), the clean close fences before its flag, and reuse rewrites the entry with its own flush and fence",
    ),
    (
        fences::JUMP_ENTRY,
        "spill",
        "the next entry's own fence (undo entry before the logged range is modified) completes the jump's flush \
      before any range it protects is modified; until then recovery needs nothing past the jump",
    ),
    (
        fences::BUMPS_BEFORE_SWEEP,
        "record-free",
        "the sweep that follows ends with its own unconditional fence on the same thread (span tables of swept \
      spans), which flushes and fences the pending bumps too, and the collector holds the gate exclusively until \
      then, so no region can reuse a freed object before it",
    ),
    (
        fences::TYPE_USED,
        "commit",
        "an object of the new type becomes reachable only through undo-logged stores, whose entry fence \
      completes the flag's flush first",
    ),
    (
        fences::STM_CLEARED,
        "stm-gc",
        "the cleared records' values are durable in place (fenced just before); replaying them again is \
      idempotent, and the thread's next record fence completes the clearing before any newer value is in place",
    ),
    (
        fences::STM_EPOCH,
        "stm-recovery",
        "no lock of the new epoch exists before the open returns, and every writable open then updates its header \
      (clean = 0) with a fence of its own on the same thread (header copy written before it is relied on), which \
      completes the epoch's flush first (`every_open_fences_its_flushes_before_it_returns`)",
    ),
    (
        fences::SWIZZLED,
        "relocation",
        "the sweep that follows the mark in the same open ends with an unconditional fence (span tables of \
      swept spans) before the header records the relocation finished",
    ),
];

/// Not caught by the moderate sweep, and not provably harmless: the open
/// gaps, documented in docs/crash-consistency.md. (name, why).
const GAPS: &[(&str, &str)] = &[];

/// Why dropping "STM records cleared and epoch bumped" is harmless: a lock
/// word of the new epoch exists only after the open returns (no STM commit
/// runs inside it), and by then every flush the open issued (the epoch
/// bump's among them) is completed by a later fence of the opening thread:
/// the header update that marks the pool open ends with its own fence. The
/// feared state (epoch bump lost, a lock word of the new epoch durable, so
/// the next open's epoch equals that lock's and it reads as locked) cannot
/// arise. Checked on the traced open after a crash (records replayed and
/// cleared, recovery GC) and after a clean close, with the fence dropped;
/// dropping the header's fence too leaves a flush pending (the check can fail).
#[test]
fn every_open_fences_its_flushes_before_it_returns() {
    use engram::stm::PTVar;
    use engram::trace::Tracer;
    use engram::{CreateOptions, Durability, OpenOptions, Pool};
    use engram_model::Event;
    let dir = Scratch::new();
    std::fs::create_dir_all(&dir.0).unwrap();
    for (crash, header_fence) in [(true, true), (false, true), (true, false), (false, false)] {
        let path = dir.0.join(format!("epoch-{crash}.pool"));
        let _ = std::fs::remove_file(&path);
        let pool = Pool::create(&path, CreateOptions::new("epoch").durability(Durability::Process)).unwrap();
        let v: PTVar<u64> = pool.root("v", || 1).unwrap();
        pool.atomically(|tx| tx.write(&v, 2)).unwrap();
        if crash {
            pool.simulate_crash();
        } else {
            pool.close().unwrap();
        }
        let tracer = Tracer::starting_on_attach();
        failpoint::drop_fence(fences::STM_EPOCH);
        if !header_fence {
            failpoint::drop_fence(fences::HEADER_COPY);
        }
        let pool = Pool::open(&path, OpenOptions::new("epoch").trace(tracer.clone())).unwrap();
        let trace = tracer.stop();
        let dropped = failpoint::drops();
        failpoint::disarm_all();
        assert!(dropped > 0, "crash {crash}: the open did not reach the epoch bump");
        let last = |f: &dyn Fn(&Event) -> bool| trace.events.iter().rposition(f);
        let fence = last(&|e| matches!(e, Event::Fence { .. } | Event::Rmw { .. })).expect("the open fences");
        let flush = last(&|e| matches!(e, Event::Flush { .. })).expect("the open flushes");
        assert_eq!(flush < fence, header_fence, "crash {crash}: last flush at event {flush}, last fence at {fence}");
        assert!(trace.events.iter().all(|e| !matches!(e, Event::Thread { .. })), "one thread");
        pool.atomically(|tx| tx.write(&v, 3)).unwrap();
        pool.close().unwrap();
        std::fs::remove_file(&path).unwrap();
    }
}

/// The functions of the persistence seam that take a fence's or named
/// flush's name (`Persister`, `Space`).
const SEAM: &[&str] = &["fence", "fence_redo", "retire_fence", "settle_bumps", "settle_fresh", "write_persist", "flush_named", "persist"];

/// Every named fence and flush is declared once in `engram::fences` and
/// filed in exactly one of the lists above; the engine's non-test source
/// (every `#[cfg(test)]` item left out, wherever it stands) passes no
/// string literal to the persistence seam, so a new fence cannot go
/// undeclared; and every declared name is used there, so a removed one
/// cannot linger in the lists.
#[test]
fn every_named_fence_and_flush_is_classified() {
    let listed: Vec<&str> = FAULTS.iter().map(|f| f.0).chain(HARMLESS.iter().map(|h| h.0)).chain(GAPS.iter().map(|g| g.0)).collect();
    for n in fences::ALL {
        let k = listed.iter().filter(|&&w| w == n.name).count();
        assert_eq!(k, 1, "{} ({:?}) is listed {k} times in FAULTS, HARMLESS and GAPS", n.ident, n.name);
    }
    for w in &listed {
        assert!(fences::find(w).is_some(), "{w:?} is listed but not declared in engram::fences");
    }
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let sources = source_scan::non_test_sources(&src);
    let mut literal = Vec::new();
    for (path, text) in &sources {
        for (line, args) in source_scan::calls(text, SEAM) {
            if source_scan::has_string_literal(args) {
                literal.push(format!("{path}, line {line} of its non-test text: ({args})"));
            }
        }
    }
    assert!(literal.is_empty(), "fence or flush names written out (declare them in engram::fences):\n{}", literal.join("\n"));
    for n in fences::ALL {
        let used = format!("fences::{}", n.ident);
        // the whole identifier (`FRONT_END` is a prefix of `FRONT_END_PERSIST`)
        let issues =
            |t: &str| t.match_indices(&used).any(|(i, _)| !t[i + used.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_'));
        let users = sources.iter().filter(|(p, t)| !p.ends_with("fences.rs") && issues(t)).count();
        assert!(users > 0, "{} is declared in engram::fences but no non-test source issues it", n.ident);
    }
    assert!(fences::ALL.len() >= 40 && sources.len() >= 50, "{} names, {} files", fences::ALL.len(), sources.len());
}

/// Turns on the fault switch of the named fence or flush (its kind from
/// its declaration in `engram::fences`).
fn drop_step(what: &str) {
    match fences::find(what).map(|n| n.kind) {
        Some(fences::Kind::Fence) => failpoint::drop_fence(what),
        Some(fences::Kind::Flush) => failpoint::drop_flush(what),
        None => panic!("{what:?} is not declared in engram::fences"),
    }
}

/// Drops one fault in turn on the moderate sweep of its workload and
/// returns a line per fault: (hits, violations).
fn fault_sweep(which: impl Fn(usize) -> bool) -> Vec<String> {
    let mut missed = run_faults(FAULTS, &which, true);
    if std::env::var_os("ENGRAM_FAULTS_ALL").is_some() {
        let harmless: Vec<(&str, &str)> = HARMLESS.iter().map(|&(w, n, _)| (w, n)).collect();
        missed.extend(run_faults(&harmless, &|i| which(i + FAULTS.len()), false));
    }
    missed
}

/// Runs each chosen fault; with `must_fail`, a fault without a violation is
/// reported; without, only one the workload never reached.
fn run_faults(faults: &[(&str, &str)], which: &dyn Fn(usize) -> bool, must_fail: bool) -> Vec<String> {
    let dir = Scratch::new();
    let mut missed = Vec::new();
    // ENGRAM_FAULTS=3,19 runs only those entries (for investigating one).
    let only: Option<Vec<usize>> =
        std::env::var("ENGRAM_FAULTS").ok().map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect());
    let chosen = |i: usize| only.as_ref().map_or(which(i), |o| o.contains(&i) && which(i));
    for (i, &(what, name)) in faults.iter().enumerate().filter(|(i, _)| chosen(*i)) {
        let t0 = std::time::Instant::now();
        let kind = fences::find(what).map_or("undeclared", |n| if n.kind == fences::Kind::Fence { "fence" } else { "flush" });
        drop_step(what);
        let mut settings = Settings::moderate(&dir.0);
        settings.explorer.max_violations = 1; // one is proof enough
        let r = workload(name).unwrap().run(&settings, &mut |_, _| {});
        let hits = failpoint::drops();
        failpoint::disarm_all();
        let r = r.unwrap_or_else(|e| panic!("{name}: {e}"));
        println!(
            "#{i} {kind} {what:?} on {name}: dropped {hits}x, {} violations, {} images ({:.1?})",
            r.violations.len(),
            r.images_checked,
            t0.elapsed()
        );
        if let Some(v) = r.violations.first() {
            println!("  before event {} ({:?}): {} [{}]", v.event_index, v.fence, v.message, v.image);
        }
        if hits == 0 {
            missed.push(format!("{kind} {what:?}: never reached by {name}"));
        } else if must_fail && r.violations.is_empty() {
            missed.push(format!("{kind} {what:?}: dropped {hits}x on {name}, no violation"));
        }
    }
    missed
}

// Three tests, so that the test harness runs the faults in parallel.

#[test]
fn moderate_sweep_catches_every_dropped_fence_and_flush_1() {
    let missed = fault_sweep(|i| i % 3 == 0);
    assert!(missed.is_empty(), "{}", missed.join("\n"));
}

#[test]
fn moderate_sweep_catches_every_dropped_fence_and_flush_2() {
    let missed = fault_sweep(|i| i % 3 == 1);
    assert!(missed.is_empty(), "{}", missed.join("\n"));
}

#[test]
fn moderate_sweep_catches_every_dropped_fence_and_flush_3() {
    let missed = fault_sweep(|i| i % 3 == 2);
    assert!(missed.is_empty(), "{}", missed.join("\n"));
}

// ----- the checks after recovery, each proved by a planted bug of its class

/// The first violation's message when `fault` is on during `name`'s
/// moderate sweep.
fn first_violation(fault: impl Fn(), name: &str) -> String {
    let dir = Scratch::new();
    let mut settings = Settings::moderate(&dir.0);
    settings.explorer.max_violations = 1;
    fault();
    let r = workload(name).unwrap().run(&settings, &mut |_, _| {});
    failpoint::disarm_all();
    // the traced run's own reads (through the same checks) may see it first
    let r = match r {
        Ok(r) => r,
        Err(e) => return format!("the traced run failed: {e}"),
    };
    let v = r.violations.first().unwrap_or_else(|| panic!("{name}: the planted bug went unnoticed ({r})"));
    println!("{name}: violation before event {} ({:?}): {} [{}]", v.event_index, v.fence, v.message, v.image);
    v.message.clone()
}

/// (a) New work on the recovered pool: with the planted bug, type-table
/// entries lose their pointer offsets on the media (the traced process keeps
/// the right ones in memory). A recovered image opens, checks and reads
/// fine, but its recovery GC did not trace the ledger's pointer fields and
/// freed the objects they name; only allocating on it (which reuses those
/// slots) shows the damage.
#[test]
fn check_runs_new_work_on_the_recovered_pool() {
    let m = first_violation(|| failpoint::plant("types.pointer_map_not_persisted"), "commit");
    assert!(m.contains("after recovery") || m.contains("recovered pool"), "{m}");
}

/// (c) Durability: without the generation bump's fence a region can return
/// and still be undone by a crash after it; every image stays consistent,
/// only the count of regions that had returned shows the loss.
#[test]
fn check_requires_returned_regions_to_survive() {
    let m = first_violation(|| failpoint::drop_fence(fences::GEN_BUMP), "commit");
    assert!(m.contains("durable regions lost"), "{m}");
}

/// (d) Paths the workloads used to miss: a region whose undo log spills
/// into a log chunk (the `spill` workload) and the pool's first STM
/// transactions (`stm-first`) are traced now.
#[test]
fn workloads_reach_log_chunks_and_the_first_stm_commit() {
    first_violation(|| failpoint::drop_fence(fences::CHUNK_HEADERS), "spill");
    first_violation(|| failpoint::drop_fence(fences::STM_RECORD), "stm-first");
}

/// (e) State a fresh process would see: the checking process shares the
/// traced one's STM clock, which hides a reservation that never reached
/// the pool. The images are now checked against the pool's own durable
/// reservation.
#[test]
fn check_compares_stm_versions_with_the_durable_reservation() {
    let m = first_violation(|| failpoint::plant("stm.reservation_not_persisted"), "stm-first");
    assert!(m.contains("durable clock reservation"), "{m}");
}

/// A redo record too large for its log half lives in an overflow array,
/// which the commit's one fence must cover: with the array left unflushed,
/// a crash image holds the stand-in record but not the whole array, so the
/// commit is lost although it had returned.
#[test]
fn overflowing_redo_records_are_flushed_before_the_fence() {
    let m = first_violation(|| failpoint::plant("stm.overflow_not_flushed"), "stm-overflow");
    assert!(m.contains("count") || m.contains("partial"), "{m}");
}

/// The lean commit (`stm/engine/lean.rs`: a small write set of plain
/// values) lists its in-place values for the thread's next fence, as the
/// general path does: with the planted bug it does not, and a crash after
/// their record is overwritten loses a change that had returned. (It also shows that `mt-stm-young`, whose commits
/// write one to three plain values, takes the lean path; the bank and map
/// workloads write copies, or more words, and take the general one.)
#[test]
fn lean_commits_list_their_in_place_values() {
    let m = first_violation(|| failpoint::plant("stm.lean_in_place_unlisted"), "mt-stm-young");
    assert!(m.contains("expected"), "{m}");
}

/// Step 7 lists its in-place values without flushing them; the commit
/// issues their write-backs at its end, after its last locked
/// instruction, and the thread's next fence completes them (so that no
/// locked instruction, and not that fence, waits for those write-backs:
/// docs/stm.md rounds 21 and 26): with the planted bug they are never
/// issued, and a crash after their record is overwritten loses a change
/// that had returned, on the general path (`stm-bank`) and the lean one
/// (`mt-stm-young`) alike.
#[test]
fn the_next_commit_writes_back_the_in_place_values_before_its_fence() {
    for name in ["stm-bank", "mt-stm-young"] {
        let m = first_violation(|| failpoint::plant("stm.in_place_not_flushed"), name);
        assert!(m.contains("expected") || m.contains("lost") || m.contains("partial") || m.contains("money"), "{name}: {m}");
    }
}

/// The persistent-laziness workloads (`lazy-*`), in parallel with the others.
#[test]
fn every_lazy_workload_is_crash_consistent() {
    sweep(Sweep::Lazy);
}

/// Boxed `PTVar` values (`stm-box`): a box is listed, with its checksum, by
/// the redo record of the commit that made it, so the commit that replaces
/// it must not free it while that record may still be replayed. With the
/// planted bug (every replaced box freed at once) a box made and replaced
/// in one commit is reused by the next commit's copy before its fence, and
/// a crash then drops the earlier record although that commit had returned.
#[test]
fn boxes_are_not_freed_while_a_record_lists_them() {
    let m = first_violation(|| failpoint::plant("stm.box_freed_early"), "stm-box");
    assert!(m.contains("lost") || m.contains("partial") || m.contains("torn"), "{m}");
}

/// One fence for allocating commits: the record carries the new objects'
/// bytes. Without them (planted bug: neither carried nor fenced first) a
/// crash after the record's fence can leave a linked node that never
/// reached the media.
#[test]
fn new_objects_are_carried_in_the_record() {
    let m = first_violation(|| failpoint::plant("stm.young_not_carried"), "stm-map");
    assert!(m.contains("torn") || m.contains("lost") || m.contains("partial"), "{m}");
}

/// The shipped collections' workloads (`stm-rbtree`, `stm-hash`: docs/stm.md
/// rounds 23-25, one cell per tree node, the hash table's inline entries;
/// `stm-coll2`: the treap and the HAMT) catch the STM's faults: the commit's one fence dropped, new nodes not
/// carried in the record (planted), in-place values never written back
/// (planted); and `stm-hash` catches the table's own planted bug, a
/// removal of the inline entry that empties the bucket instead of
/// promoting the first overflow node.
#[test]
fn collection_workloads_catch_the_stm_faults() {
    // (what shows depends on which stores a crash lost: a commit half
    // there, a returned one gone, a dangling link `Pool::check` refuses, a
    // torn structure the plain read refuses)
    let caught = |m: &str| ["partial commit", "lost", "check failed", "reading the"].iter().any(|w| m.contains(w));
    for name in ["stm-rbtree", "stm-hash", "stm-coll2"] {
        let m = first_violation(|| failpoint::drop_fence(fences::STM_RECORD), name);
        assert!(caught(&m), "{name}: {m}");
        let m = first_violation(|| failpoint::plant("stm.young_not_carried"), name);
        assert!(caught(&m), "{name}: {m}");
        let m = first_violation(|| failpoint::plant("stm.in_place_not_flushed"), name);
        assert!(caught(&m), "{name}: {m}");
    }
    let m = first_violation(|| failpoint::plant("stm.ht_remove_drops_overflow"), "stm-hash");
    assert!(m.contains("the model"), "{m}");
}

/// `mt-stm-young`: a thread whose record carries a new object stays idle
/// while another thread changes the object and overwrites the record of
/// that change. Without the helping rule (planted bug) recovery writes the
/// object's initial bytes back over the change.
#[test]
fn young_objects_changed_by_another_thread_are_not_written_back() {
    let m = first_violation(|| failpoint::plant("stm.young_not_helped"), "mt-stm-young");
    assert!(m.contains("initial bytes") || m.contains("lost"), "{m}");
}

/// `mt-stm-young` with the planted `stm.young_touch_missed`: B's commit
/// that changes A's new object does not mark its log half, so the commit
/// that overwrites that half does not help.
#[test]
fn young_objects_changes_are_marked_at_their_commit() {
    let m = first_violation(|| failpoint::plant("stm.young_touch_missed"), "mt-stm-young");
    assert!(m.contains("initial bytes") || m.contains("lost"), "{m}");
}

// ----- two crashes: a first crash, its recovery, more work, a second crash

/// The double-crash mode's moderate sweep of one workload: no violation,
/// and it reached second crashes. `ENGRAM_DOUBLE=wide` takes every crash
/// point's first six mixed images on (the proofs' sample, two images per
/// second-crash point), `ENGRAM_DOUBLE=deep` the deep settings.
fn double_sweep(name: &str) -> engram::crashtest::DoubleReport {
    let dir = Scratch::new();
    let t0 = std::time::Instant::now();
    let d = match std::env::var("ENGRAM_DOUBLE").as_deref() {
        Ok("wide") => DoubleSettings { plain_images: 1, second: DoubleSettings::moderate().second, ..wide() },
        Ok("deep") => DoubleSettings::deep(),
        _ => DoubleSettings::moderate(),
    };
    let r = workload(name).unwrap().run_double(&Settings::moderate(&dir.0), &d).unwrap();
    println!("{name:<14} double: {r} ({:.1?})", t0.elapsed());
    for v in &r.violations {
        println!("  first crash before event {} ({:?}) [{}]: {}", v.event_index, v.fence, v.image, v.message);
    }
    assert!(r.violations.is_empty(), "{name}: {r}");
    assert!(r.taken > 0 && r.second_images > 0, "{name}: no second crash explored ({r})");
    r
}

/// Regions that undo, commit by record (their bumps pending), free what a
/// record-committed region wrote, a first crash in each (in `recovery`,
/// a first crash in a traced recovery), the recovered logs' slots left alone
/// while regions on another slot change what they cover, then a second
/// crash anywhere in the recovery and the work after it.
#[test]
fn double_crashes_of_regions_are_crash_consistent() {
    for name in ["record", "commit", "recovery", "record-free", "redo-undo", "redo-cover", "mt-redo", "fresh-link"] {
        let r = double_sweep(name);
        assert!(r.recovering > 0, "{name}: no first crash needed recovery ({r})");
    }
}

/// The same for STM transfers and collections (the recovered redo logs
/// replayed, then adopted by a new thread) and, recovery alone crashed,
/// the other workloads' invariants.
#[test]
fn double_crashes_of_stm_and_the_rest_are_crash_consistent() {
    for name in ["stm-bank", "mt-stm", "stm-map", "stm-rbtree", "stm-hash", "stm-coll2", "raw"] {
        double_sweep(name);
    }
}

/// The proofs' sample: every crash point's first mixed images (the
/// moderate sweep takes those of three points), the second crashes' images
/// with nothing unflushed persisted.
fn wide() -> DoubleSettings {
    let mut d = DoubleSettings { per_point: 6, first_images: usize::MAX, plain_images: 0, ..DoubleSettings::moderate() };
    d.second.max_images_per_point = 1;
    d
}

/// The double crash of 78040e5, found by hand then: with the fix reverted
/// (planted bug `log.record_recovery_one_step`: a record-committed region
/// whose bump was lost moves the generation on by one), every image of a
/// single crash is consistent and new work on it succeeds, so the
/// single-crash sweep of `record` without the settled-logs check sees
/// nothing wrong; the double-crash sweep does (without that check too):
/// the next region's entries, live again, are undone by the second
/// crash's recovery over the regions committed on another slot. With the
/// check (on in every sweep) the single-crash sweep catches it too: the
/// recovered slot begins its log with an entry of its word's generation.
#[test]
fn double_crash_catches_a_record_recovery_that_moves_one_generation() {
    let dir = Scratch::new();
    let unchecked = Settings { settled_logs: false, ..Settings::moderate(&dir.0) };
    failpoint::plant("log.record_recovery_one_step");
    let single = workload("record").unwrap().run(&unchecked, &mut |_, _| {});
    let hits = failpoint::drops();
    let double = workload("record").unwrap().run_double(&unchecked, &wide());
    failpoint::disarm_all();
    let (single, double) = (single.unwrap(), double.unwrap());
    println!("single, logs unchecked: {single}\ndouble, logs unchecked: {double}");
    assert!(hits > 0, "the single sweep never recovered a record-committed region");
    assert!(single.violations.is_empty(), "the single-crash sweep caught it without the settled-logs check: {single}");
    let v = double.violations.first().unwrap_or_else(|| panic!("the double-crash sweep missed it: {double}"));
    println!("first crash before event {} ({:?}) [{}]:\n  {}", v.event_index, v.fence, v.image, v.message);
    assert!(v.message.contains("lost") || v.message.contains("conserved"), "{}", v.message);
}

/// The settled-logs check after every recovery (`Settings::settled_logs`)
/// lets the single-crash sweep catch 78040e5's bug by itself: the planted
/// `log.record_recovery_one_step` leaves the recovered slot's word on the
/// generation its next region wrote ahead under.
#[test]
fn single_crash_catches_a_record_recovery_that_moves_one_generation() {
    let m = first_violation(|| failpoint::plant("log.record_recovery_one_step"), "record");
    assert!(m.contains("after recovery, log slot") && m.contains("live"), "{m}");
}

/// A recovery that is not idempotent (planted bug
/// `log.recovery_invalidates_first`: the log is invalidated, durably,
/// before the old bytes it writes back are fenced) is caught by a second
/// crash during that recovery (a crash point inside the traced open).
#[test]
fn double_crash_catches_a_crash_during_recovery() {
    let dir = Scratch::new();
    failpoint::plant("log.recovery_invalidates_first");
    let r = workload("commit").unwrap().run_double(&Settings::moderate(&dir.0), &wide());
    failpoint::disarm_all();
    let r = r.unwrap();
    println!("{r}");
    let v = r.violations.first().unwrap_or_else(|| panic!("a crash during recovery went unnoticed: {r}"));
    println!("first crash before event {} ({:?}) [{}]:\n  {}", v.event_index, v.fence, v.image, v.message);
    assert!(v.message.contains("during the first recovery"), "{}", v.message);
    assert!(v.message.contains("lost") || v.message.contains("conserved"), "{}", v.message);
}

/// `mt-stm-young` with the planted `stm.young_span_lost`: A's record is
/// registered without the span of its new object, so B's overwrite of the
/// record that changed it finds no write into it and does not help.
#[test]
fn young_objects_changes_are_found_in_the_overwritten_record() {
    let m = first_violation(|| failpoint::plant("stm.young_span_lost"), "mt-stm-young");
    assert!(m.contains("initial bytes") || m.contains("lost"), "{m}");
}

/// Format 4's slot recovery replays a written-ahead redo record over ranges
/// whose undo entries it kept because they match the undo record's
/// checksum. Found by the double-crash mode after redo13r merged: without
/// the decision made durable first (planted bug
/// `log.redo_replay_before_decision`), a second crash during that recovery
/// leaves the replayed bytes, the checksum no longer matches, and the next
/// recovery undoes the committed region over them.
#[test]
fn double_crash_catches_a_redo_replay_before_the_undo_decision() {
    let dir = Scratch::new();
    failpoint::plant("log.redo_replay_before_decision");
    let r = workload("redo-undo").unwrap().run_double(&Settings::moderate(&dir.0), &wide());
    failpoint::disarm_all();
    let r = r.unwrap();
    println!("{r}");
    let v = r.violations.first().unwrap_or_else(|| panic!("a replay before the undo decision went unnoticed: {r}"));
    println!("first crash before event {} ({:?}) [{}]:\n  {}", v.event_index, v.fence, v.image, v.message);
    assert!(v.message.contains("during the first recovery"), "{}", v.message);
}

/// The double-crash mode tells a recovering open by the fences declared
/// `Stage::Recovery`, and refuses an open that issued a fence declared
/// neither `Recovery` nor `Open`: the declarations must be right. A clean
/// open issues only fences declared `Open`; an open after a crash with a
/// region in flight and STM records issues only `Recovery` or `Open`
/// fences, and at least one `Recovery` fence.
#[test]
fn every_fence_an_open_issues_is_declared_for_opens() {
    use engram::failpoint::{arm, Failpoint};
    use engram::fences::Stage;
    use engram::stm::PTVar;
    use engram::trace::Tracer;
    use engram::{CreateOptions, Durability, OpenOptions, Pool};
    let dir = Scratch::new();
    std::fs::create_dir_all(&dir.0).unwrap();
    for crash in [false, true] {
        let path = dir.0.join(format!("opens-{crash}.pool"));
        let pool = Pool::create(&path, CreateOptions::new("opens").durability(Durability::Process)).unwrap();
        let v: PTVar<u64> = pool.root("v", || 1).unwrap();
        pool.atomically(|tx| tx.write(&v, 2)).unwrap();
        pool.txn(|tx| tx.set_root("x", tx.alloc(7u64)?)).unwrap();
        if crash {
            arm(Failpoint::LogAfterAppend, 0);
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                pool.txn(|tx| {
                    let x = tx.root::<u64>("x")?.unwrap();
                    tx.write(x, 8u64)
                })
            }));
            failpoint::disarm_all();
            assert!(r.is_err(), "the region did not crash");
            drop(pool);
        } else {
            pool.close().unwrap();
        }
        let tracer = Tracer::starting_on_attach();
        let pool = Pool::open(&path, OpenOptions::new("opens").trace(tracer.clone())).unwrap();
        let issued = tracer.fences();
        tracer.stop();
        println!("crash {crash}: {issued:?}");
        for w in &issued {
            let n = fences::find(w).unwrap_or_else(|| panic!("{w:?} is not declared"));
            assert!(n.issued_by(Stage::Open) || (crash && n.issued_by(Stage::Recovery)), "crash {crash}: {} {:?}", n.ident, n.stages);
        }
        assert_eq!(issued.iter().any(|w| fences::is_recovery(w) && !fences::find(w).unwrap().issued_by(Stage::Open)), crash);
        pool.close().unwrap();
        std::fs::remove_file(&path).unwrap();
    }
}

/// Every workload has a row in docs/crash-consistency.md's table ("What
/// is explored"), every row names a workload, and so does every name in
/// the Makefile's deep double-crash loop.
#[test]
fn every_workload_is_described_in_the_docs() {
    let doc = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/crash-consistency.md");
    let doc = std::fs::read_to_string(doc).unwrap();
    let table = &doc[doc.find("| workload | exercises |").expect("the workload table")..];
    let rows: Vec<&str> =
        table.lines().skip(2).take_while(|l| l.starts_with('|')).filter_map(|l| l.split('|').nth(1)).map(str::trim).collect();
    for w in workloads() {
        assert!(rows.contains(&w.name), "workload {:?} has no row in docs/crash-consistency.md", w.name);
    }
    for r in &rows {
        assert!(workload(r).is_some(), "docs/crash-consistency.md describes {r:?}, which is no workload");
    }
    // `make bench`'s deep double sweep names its workloads in a shell loop
    let make = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Makefile")).unwrap();
    let lines: Vec<&str> = make.lines().collect();
    let at = lines.windows(2).position(|l| l[0].contains("for w in ") && l[1].contains("--double")).expect("the double loop");
    let names = lines[at].trim_start().trim_start_matches("for w in ").split(';').next().unwrap();
    for n in names.split_whitespace() {
        assert!(workload(n).is_some(), "the Makefile's double-crash sweep names {n:?}, which is no workload");
    }
}
