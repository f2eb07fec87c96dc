//! The write-ahead log of the `wal` durability mode: one device flush per
//! commit, shared by every thread committing at the same time.
//!
//! In `wal` mode the pool is mapped `MAP_PRIVATE`, so a store never reaches
//! the pool file by itself (with a shared mapping the kernel may write a page
//! back at any time, which is why `msync` mode must make every log fence a
//! real `msync`). Durability comes from this log, a file beside the pool
//! (`<pool>.wal`), in the manner of SQLite's WAL:
//!
//! - a fence (`Persister::fence`) *records* the current bytes of the ranges
//!   its thread flushed since its last fence: they are appended, in fence
//!   order, to one in-memory batch shared by all threads;
//! - a fence outside a region, and the end of a region, then *commit*: wait
//!   until a write of the batch that includes the thread's last recording
//!   is durable (group commit, below);
//! - a checkpoint (when the log passes [`CHECKPOINT_BYTES`], and at close)
//!   copies the records into the pool file *from the log* (never from the
//!   private mapping, which may hold uncommitted stores; the copies are
//!   stores into a second, shared mapping of the file, see `replay`),
//!   `fsync`s the pool,
//!   then starts a new log generation (a new salt in the log header; the
//!   old records' blocks are overwritten by the new ones);
//! - open replays the valid records of the current generation in order and
//!   stops at the first torn or invalid one (bad magic, salt, number, length
//!   or CRC32C), then starts a new generation.
//!
//! What it keeps true: the durable state of the pool is the pool file plus a
//! prefix of the recorded fences (whole records), which is a state the `pmem`
//! protocol can reach too (every fence's ranges as of that fence, in fence
//! order); a commit returns only when its records are durable. Undo-logged
//! regions keep working unchanged: their log fences are recordings that
//! reach the log before (or with) the data they protect.
//!
//! Crash behaviour: a crash while a record is written leaves a torn tail
//! that fails its CRC and is ignored (its commit had not returned); a crash
//! during a checkpoint leaves the log intact, so the replay at the next
//! open repeats the checkpoint (applying the same records again is
//! idempotent: nothing newer exists while a checkpoint runs); a crash after
//! the new header leaves an empty generation and a pool file that holds
//! every record.
//!
//! Group commit (leader and followers). Only the thread that holds the
//! files (`State::lead` not `Idle`) writes or syncs them. A committing
//! thread whose recording is not durable yet decides, under the state lock:
//!
//! 1. nobody holds the files: it becomes the leader of flush `gen` and takes
//!    every recording so far (the whole batch, all threads') in the same
//!    lock hold; it writes them as one checksummed record, `fdatasync`s
//!    once, publishes `durable`, and wakes its group with one `FUTEX_WAKE`
//!    on the group's word (`futex.rs`; flushes alternate between two words,
//!    so waking one group leaves the next asleep; a condition variable
//!    would requeue every waiter onto the mutex and wake them one at a
//!    time, a context switch each);
//! 2. a flush holds its recording (or the flush about to start will): it
//!    sleeps on that flush's word;
//! 3. the running flush does not hold it and nobody has claimed the next
//!    flush: it claims it (a ticket) and sleeps on the hand-off word; the
//!    leader, once done, hands the files to it (`Lead::Claimed`) and wakes
//!    it alone, and the claimant takes the batch when it runs, so whoever
//!    recorded meanwhile joins it;
//! 4. otherwise it sleeps on the next flush's word.
//!
//! A thread that comes while the files are handed over but the claimant has
//! not run yet (on 2 busy CPUs a woken thread may wait milliseconds for
//! one) takes the flush itself, so the device never idles waiting for a
//! wake-up; the claimant then finds its recording in that flush and
//! sleeps on its word (the one case of a thread woken twice). So each flush
//! has exactly one leader, every other follower is woken once (by the flush
//! that made it durable), and no thread spins. A woken follower reads
//! `durable` from an atomic and returns without taking the lock.
//!
//! Gathering (an adaptive commit delay). In a closed loop the threads a
//! flush releases record their next commit while the following flush is
//! already running, so 8 threads form two cohorts of about 4 that take
//! turns. So a thread about to take a flush (cases 1 and 3, and the taking
//! over) first checks whether the group the last flush released is back:
//! the state counts the commits each flush released (`released`) and the
//! commits that arrived since (`back`). If fewer are back, it gathers:
//!
//! 5. it marks the files `Gathering` and sleeps on the gather word, at
//!    most `GATHER_PCT` percent of a recent flush's time (a moving
//!    average of its write and `fdatasync`);
//! 6. a commit that arrives meanwhile will be in that flush: it sleeps on
//!    the flush's word, and the one that completes the group first wakes
//!    the gatherer;
//! 7. woken or timed out, the gatherer takes the batch under the lock (as
//!    in case 1) and leads the flush.
//!
//! A lone thread never gathers (its own arrival is the whole group), nor
//! does the first flush or a forced checkpoint; a thread that stops
//! committing costs the others at most one bounded wait. Nothing is
//! written while gathering, so no crash state is new: a commit still
//! returns only from the flush that synced its record. Planted bug
//! `wal.gather_returns_early` lets an arriving commit return during the
//! gather, and the stress test in `tests/wal.rs` finds the commits lost.
//!
//! The checkpoint runs with the state lock free: threads keep recording
//! into the batch and queue for the next flush while the pool is copied and
//! `fsync`ed (before, they all blocked on the lock behind the `fsync`). It
//! is sound because the checkpointing leader still holds the files: no
//! record is written into the old generation between the copy (which reads
//! the log) and the new salt (which invalidates it), so every record the
//! copy missed would be one nobody wrote; the next record is written after
//! the new header is durable. A size-triggered checkpoint releases its own
//! group *before* it starts (their records are durable in the log, which
//! the checkpoint only copies from: a crash during it replays the log
//! again); a forced one (close) returns after it. Planted bug
//! `wal.checkpoint_unguarded` gives the files up during the checkpoint, and
//! the group-commit stress test in `tests/wal.rs` finds the returned
//! commits it loses.
//!
//! Log file layout (little-endian; see `docs/format.md`, "Write-ahead log"):
//! a 4 KiB header `{magic "ENGRAMWL", version u32, pad u32, salt u64, crc
//! u32}` then records `{magic u32, pad u32, salt u64, number u64, payload
//! length u64, crc u32, pad u32}` + payload; the payload is pieces `{pool
//! offset u64, length u32, pad u32, bytes}` each padded to 8 bytes; the CRC
//! covers the record header (crc field zero) and the payload.
//!
//! Log writes are whole blocks (`LOG_BLOCK`, 4 KiB) at block offsets, through an
//! `O_DIRECT` descriptor where the file system allows it (`Files::log_write`):
//! a record that starts inside a block writes the block's earlier bytes again
//! as they are (kept from the last record write), and zeros after its end.
//! Rewriting bytes with their own value keeps them whatever part of the write
//! lands, so the record before stays intact. Planted bug
//! `wal.tail_not_rewritten` writes those bytes as zeros; the wal crash
//! explorer and `records_sharing_a_block_all_replay` find the loss.

use crate::error::{Error, Result};
use crate::futex::Word;
use parking_lot::Mutex;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const LOG_MAGIC: [u8; 8] = *b"ENGRAMWL";
const LOG_VERSION: u32 = 1;
const REC_MAGIC: u32 = 0x4C52_4557; // "WERL"
/// Bytes of the log header; records start here.
pub const LOG_HEADER: u64 = 4096;
/// The log is written in whole blocks of this size at offsets that are
/// multiples of it (`Files::log_write`): the `O_DIRECT` alignment of every
/// device with blocks up to 4 KiB.
const LOG_BLOCK: usize = 4096;
const REC_HEADER: usize = 40;
const PIECE_HEADER: usize = 16;
/// A checkpoint runs when the log grows past this.
pub const CHECKPOINT_BYTES: u64 = 16 << 20;
/// The log's blocks are written (with zeros) this much at a time ahead of
/// the records, so that a commit's `fdatasync` overwrites initialised
/// blocks and need not also commit a new file length (an append costs
/// ext4 a journal commit: about 1.7x the time of an overwrite here).
const LOG_CHUNK: u64 = 1 << 20;
/// A gathering leader waits at most this share (in percent) of a recent
/// flush's time for the group the last flush released (see "Gathering").
const GATHER_PCT: u64 = 100;
/// Largest payload a record may claim (a sanity bound for replay).
const MAX_RECORD: u64 = 1 << 36;

/// The log file that belongs to the pool at `pool`.
pub fn log_path(pool: &Path) -> PathBuf {
    let mut s = pool.as_os_str().to_owned();
    s.push(".wal");
    PathBuf::from(s)
}

/// One file operation of the log protocol, as the WAL crash explorer sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IoEvent {
    /// Bytes written to the log at an offset.
    LogWrite {
        /// Offset in the log.
        off: u64,
        /// The bytes.
        data: Vec<u8>,
    },
    /// `fdatasync` of the log returned: everything before is durable.
    LogSync,
    /// Bytes written to the pool file (checkpoint, clean close).
    PoolWrite {
        /// Offset in the pool file.
        off: u64,
        /// The bytes.
        data: Vec<u8>,
    },
    /// The pool file's length set.
    PoolSetLen(u64),
    /// `fsync` of the pool file returned.
    PoolSync,
    /// A commit returned (its records are durable); `tag` is the caller's.
    Returned(u64),
}

/// Records the file operations of one pool's log, for the crash explorer.
#[derive(Debug, Default)]
pub struct Recorder {
    events: Mutex<Vec<IoEvent>>,
}

// A recorder only appends events under its lock; a panic leaves a valid list.
impl std::panic::RefUnwindSafe for Recorder {}
impl std::panic::UnwindSafe for Recorder {}

impl Recorder {
    /// An empty recorder.
    pub fn new() -> Arc<Self> {
        Arc::new(Recorder::default())
    }

    fn push(&self, e: IoEvent) {
        self.events.lock().push(e);
    }

    /// Notes that something the caller counts (a commit) has returned.
    pub fn note_returned(&self, tag: u64) {
        self.push(IoEvent::Returned(tag));
    }

    /// The events so far.
    pub fn events(&self) -> Vec<IoEvent> {
        self.events.lock().clone()
    }
}

/// The two files a log works on, with the recorder hook.
struct Files {
    log: File,
    /// The log opened `O_DIRECT` (`None` where the file system refuses
    /// it): see [`Files::log_write`].
    direct: Option<File>,
    /// Staging of log writes, and the log's last partial block.
    blocks: Mutex<Blocks>,
    pool: File,
    rec: Option<Arc<Recorder>>,
}

/// The aligned buffer log writes are staged in, and the bytes of the log's
/// last partial block as the last record write left them (`tail`, at
/// block offset `tail_at`): the next record starts there, and its first
/// block must carry them again.
#[derive(Default)]
struct Blocks {
    buf: Vec<u8>,
    tail_at: u64,
    tail: Vec<u8>,
}

impl Blocks {
    /// A zeroed, [`LOG_BLOCK`]-aligned slice of `len` bytes of `buf` (no
    /// `unsafe`: `buf` is over-allocated by a block and the slice starts
    /// at its first aligned byte; were the address not alignable, an
    /// `O_DIRECT` write of it fails with `EINVAL` and goes buffered).
    fn stage(buf: &mut Vec<u8>, len: usize) -> &mut [u8] {
        if buf.len() < len + LOG_BLOCK {
            *buf = vec![0; 2 * len + LOG_BLOCK];
        }
        let pad = buf.as_ptr().align_offset(LOG_BLOCK);
        let pad = if pad < LOG_BLOCK { pad } else { 0 };
        let w = &mut buf[pad..pad + len];
        w.fill(0);
        w
    }
}

/// Opens the log file at `path` for `O_DIRECT` writes, or `None` if the
/// file system does not allow it (then writes go through the page cache).
fn open_direct(path: &Path) -> Option<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new().write(true).custom_flags(libc::O_DIRECT).open(path).ok()
}

impl Files {
    fn new(log: File, log_path: &Path, pool: File, rec: Option<Arc<Recorder>>) -> Files {
        let direct = open_direct(log_path);
        Files { log, direct, blocks: Mutex::default(), pool, rec }
    }

    /// Writes `data` at log offset `off` as whole [`LOG_BLOCK`]s: the
    /// bytes of the first block before `off` are written again as they
    /// are (from the kept tail for a record that follows the last one,
    /// else read back from the file), and the last block is padded with
    /// zeros. So the log is only ever written block-aligned, which lets an
    /// `O_DIRECT` descriptor send the blocks straight to the device: no
    /// copy into the page cache, no write-back at the `fdatasync` (with the
    /// file's multi-page folios, a small buffered write dirtied a whole
    /// folio and its `fdatasync` walked every block of it). Every caller
    /// writes at the end of what is valid (a record, zeros ahead, a new
    /// header over the old one), so the padding overwrites nothing valid;
    /// the bytes before `off` are unchanged, so a torn or partial write of
    /// them leaves them as they were (the crash explorer's torn writes and
    /// holes model exactly that). `record` says a record is written: its
    /// last partial block becomes the kept tail.
    fn log_write(&self, off: u64, data: &[u8], record: bool) -> Result<()> {
        let b = LOG_BLOCK as u64;
        let start = off / b * b;
        let end = off + data.len() as u64;
        let len = (end - start).next_multiple_of(b) as usize;
        let pre = (off - start) as usize;
        let mut g = self.blocks.lock();
        let Blocks { buf, tail_at, tail } = &mut *g;
        let kept = *tail_at == start && tail.len() == pre;
        let w = Blocks::stage(buf, len);
        if pre > 0 && crate::failpoint::planted("wal.tail_not_rewritten") {
            // Planted bug: the first block's earlier bytes go out as zeros,
            // destroying the end of the record before (durable, returned).
        } else if pre > 0 && kept {
            w[..pre].copy_from_slice(tail);
        } else if pre > 0 {
            self.log.read_exact_at(&mut w[..pre], start).map_err(|e| Error::io("read log", e))?;
        }
        w[pre..pre + data.len()].copy_from_slice(data);
        if record {
            *tail_at = end / b * b;
            tail.clear();
            tail.extend_from_slice(&w[(*tail_at - start) as usize..(end - start) as usize]);
        } else if *tail_at + (tail.len() as u64) > start && *tail_at < start + len as u64 {
            tail.clear(); // overwritten: read back if a record follows it
        }
        if let Some(r) = &self.rec {
            r.push(IoEvent::LogWrite { off: start, data: w.to_vec() });
        }
        match self.direct.as_ref().map(|f| f.write_all_at(w, start)) {
            Some(Ok(())) => Ok(()),
            // A device whose blocks are larger than LOG_BLOCK (or an
            // unaligned buffer) is refused: the page cache takes the write.
            Some(Err(e)) if e.raw_os_error() != Some(libc::EINVAL) => Err(Error::io("write log", e)),
            _ => self.log.write_all_at(w, start).map_err(|e| Error::io("write log", e)),
        }
    }

    fn log_sync(&self) -> Result<()> {
        if crate::failpoint::planted("wal.skip_fdatasync") {
            return Ok(());
        }
        self.log.sync_data().map_err(|e| Error::io("fdatasync log", e))?;
        if let Some(r) = &self.rec {
            r.push(IoEvent::LogSync);
        }
        Ok(())
    }

    fn pool_write(&self, off: u64, data: &[u8]) -> Result<()> {
        self.note_pool_write(off, data);
        self.pool.write_all_at(data, off).map_err(|e| Error::io("write pool file", e))
    }

    /// Tells the recorder about a pool-file write (by `pwrite` or mapping).
    fn note_pool_write(&self, off: u64, data: &[u8]) {
        if let Some(r) = &self.rec {
            r.push(IoEvent::PoolWrite { off, data: data.to_vec() });
        }
    }

    fn pool_sync(&self) -> Result<()> {
        self.pool.sync_all().map_err(|e| Error::io("fsync pool file", e))?;
        if let Some(r) = &self.rec {
            r.push(IoEvent::PoolSync);
        }
        Ok(())
    }
}

/// Who holds the log's files (see "Group commit" in the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lead {
    /// Nobody: the next waiter becomes the leader.
    Idle,
    /// Flush `State::gen` was handed to the waiter holding this ticket; it
    /// has not taken the batch yet, so every recording so far joins it.
    Claimed(u64),
    /// The leader of flush `State::gen` waits, briefly, for the threads the
    /// last flush released to record again (see "Gathering"); every
    /// recording so far joins that flush.
    Gathering,
    /// Flush `State::gen` is writing the recordings up to `upto` (or, past
    /// that, its leader checkpoints).
    Flushing {
        /// Last recording the flush holds.
        upto: u64,
    },
}

/// Mutable state of a log (guarded by [`Wal::st`]).
struct State {
    /// Recorded pieces not yet written, after [`REC_HEADER`] reserved bytes.
    batch: Vec<u8>,
    /// Number of the last recording in `batch` (0: none since the last write).
    batch_seq: u64,
    /// Number given to the last recording.
    seq: u64,
    /// Every recording up to this number is durable.
    durable: u64,
    /// A write or sync failed: the log can no longer promise anything.
    failed: bool,
    /// Who holds the files.
    lead: Lead,
    /// Number of the flush running or next to run (its group's word is
    /// `Wal::groups[gen & 1]`).
    gen: u64,
    /// A waiter not covered by the running flush will lead the next one.
    next_claimed: bool,
    /// Ticket of that waiter (tickets only grow).
    ticket: u64,
    /// The next flush checkpoints before it releases its group (a clean
    /// close, or a test).
    force_checkpoint: bool,
    /// Where the next record goes.
    end: u64,
    /// Bytes of the log file written so far (records or zeros).
    initialised: u64,
    /// Salt of the current generation.
    salt: u64,
    /// Number of the next record in this generation.
    next_record: u64,
    /// Commits (arrivals in `wait_durable`) the next flush will hold so far.
    queued: u32,
    /// Commits the flush running (or gathering) holds.
    members: u32,
    /// Commits the last finished flush released.
    released: u32,
    /// Commits that arrived since the last flush released its group.
    back: u32,
    /// Recent time of one write and `fdatasync` (a moving average), in ns.
    flush_ns: u64,
}

/// A pool's write-ahead log (see the module docs).
pub struct Wal {
    files: Files,
    st: Mutex<State>,
    /// A checkpoint runs when the log passes this ([`CHECKPOINT_BYTES`]).
    checkpoint_bytes: AtomicU64,
    /// `State::durable`, readable without the lock (a woken follower
    /// returns without touching the mutex).
    durable: AtomicU64,
    /// `groups[g & 1]` is bumped when flush `g`'s group may return (its
    /// records are durable, or the log failed).
    groups: [Word; 2],
    /// Bumped when a leader hands the files to the claimed next leader.
    handoff: Word,
    /// Bumped when the group a gathering leader waits for is back.
    gather: Word,
    /// Gathers so far (tests and benchmarks read it).
    gathers: AtomicU64,
}

impl std::fmt::Debug for Wal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wal").finish_non_exhaustive()
    }
}

/// What a waiter does next, decided under the state lock.
enum Next<'a> {
    Done(Result<()>),
    Lead(Flush),
    /// Gather (wait on `Wal::gather` while it holds the value, at most this
    /// long), then take the flush.
    Gather(u32, std::time::Duration),
    /// Sleep on the word while it holds the value; first wake the gathering
    /// leader if the flag says so.
    Sleep(&'a Word, u32, bool),
}

/// A flush its leader took under the lock: every recording so far.
struct Flush {
    /// The flush's number (its group's word is `groups[g & 1]`).
    g: u64,
    /// The record: reserved header, then the batch's pieces.
    rec: Vec<u8>,
    /// Last recording it holds.
    upto: u64,
    /// Checkpoint before releasing the group.
    force: bool,
    /// Where the record goes, its salt and number, the initialised bytes.
    off: u64,
    salt: u64,
    number: u64,
    init: u64,
}

impl Wal {
    /// Opens the log of the pool at `pool_path` (whose file is `pool`),
    /// replaying what it holds into the pool file, and starts a new
    /// generation. Returns the log and the number of records replayed.
    pub fn open(pool_path: &Path, pool: &File, rec: Option<Arc<Recorder>>) -> Result<(Wal, u64)> {
        let path = log_path(pool_path);
        let log = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| Error::io("open log", e))?;
        let pool = pool.try_clone().map_err(|e| Error::io("dup pool file", e))?;
        let files = Files::new(log, &path, pool, rec);
        let replayed = replay(&files, false)?;
        let salt = new_generation(&files)?;
        let initialised = files.log.metadata().map_err(|e| Error::io("stat log", e))?.len();
        let st = State {
            batch: vec![0; REC_HEADER],
            batch_seq: 0,
            seq: 0,
            durable: 0,
            failed: false,
            lead: Lead::Idle,
            gen: 0,
            next_claimed: false,
            ticket: 0,
            force_checkpoint: false,
            end: LOG_HEADER,
            initialised,
            salt,
            next_record: 1,
            queued: 0,
            members: 0,
            released: 0,
            back: 0,
            flush_ns: 0,
        };
        let wal = Wal {
            files,
            st: Mutex::new(st),
            checkpoint_bytes: AtomicU64::new(CHECKPOINT_BYTES),
            durable: AtomicU64::new(0),
            groups: Default::default(),
            handoff: Word::default(),
            gather: Word::default(),
            gathers: AtomicU64::new(0),
        };
        Ok((wal, replayed))
    }

    /// Checkpoints from now on whenever the log passes `bytes` (tests and
    /// the crash explorer make checkpoints run beside commits this way).
    pub fn set_checkpoint_bytes(&self, bytes: u64) {
        self.checkpoint_bytes.store(bytes, Ordering::Relaxed);
    }

    /// Appends pieces `(pool offset, bytes)` to the shared batch; returns
    /// the recording's number, to pass to [`Wal::wait_durable`].
    pub fn record<'a>(&self, pieces: impl Iterator<Item = (u64, &'a [u8])>) -> u64 {
        let mut st = self.st.lock();
        for (off, bytes) in pieces {
            encode_piece(&mut st.batch, off, bytes);
        }
        st.seq += 1;
        st.batch_seq = st.seq;
        st.seq
    }

    /// Returns once recording `seq` is durable: as a follower of the flush
    /// that holds it, or as the leader of one (see "Group commit").
    pub fn wait_durable(&self, seq: u64) -> Result<()> {
        if self.durable.load(Ordering::Acquire) >= seq {
            return Ok(());
        }
        let mut mine = None;
        let mut first = true;
        loop {
            let next = self.decide(seq, &mut mine, std::mem::take(&mut first));
            match next {
                Next::Done(r) => return r,
                Next::Lead(f) => {
                    mine = None;
                    self.lead(f)?;
                }
                Next::Gather(seen, max) => {
                    mine = None;
                    self.gather.wait_for(seen, max);
                    let f = self.end_gather()?;
                    self.lead(f)?;
                }
                Next::Sleep(word, seen, wake) => {
                    if wake {
                        self.gather.bump_and_wake();
                    }
                    word.wait(seen);
                    if mine.is_none() && self.durable.load(Ordering::Acquire) >= seq {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// The number of gathers so far (see "Gathering" in the module docs).
    pub fn gathers(&self) -> u64 {
        self.gathers.load(Ordering::Relaxed)
    }

    /// Under the lock: return, lead, or which word to sleep on. `mine` is
    /// the caller's ticket while it holds the claim on the next flush (it
    /// then returns only after leading, so a claim is never left behind);
    /// `first` says this is the commit's first decision (its arrival).
    fn decide(&self, seq: u64, mine: &mut Option<u64>, first: bool) -> Next<'_> {
        let mut st = self.st.lock();
        if st.failed {
            return Next::Done(Err(failed()));
        }
        if let Some(m) = *mine {
            let pending = st.next_claimed && st.ticket == m;
            match st.lead {
                Lead::Claimed(t) if t == m => return self.start_flush(&mut st),
                // Only a planted bug leaves the files unowned under a claim.
                Lead::Idle if pending => {
                    st.next_claimed = false;
                    return self.start_flush(&mut st);
                }
                _ if pending => return Next::Sleep(&self.handoff, self.handoff.load(), false),
                // Handed over, but another thread took the flush first: an
                // ordinary waiter again (that flush holds its recording).
                _ => *mine = None,
            }
        }
        if st.durable >= seq {
            return Next::Done(Ok(()));
        }
        if first {
            st.back += 1;
            match st.lead {
                Lead::Flushing { upto } if seq <= upto => st.members += 1,
                _ => st.queued += 1,
            }
        }
        let word = match st.lead {
            // Nobody writing, or the claimant of the next flush has not run
            // yet (it waits for a CPU): lead now, the log stays busy.
            Lead::Idle | Lead::Claimed(_) => return self.start_flush(&mut st),
            // The gathered flush will hold this recording; the last of the
            // group the leader waits for wakes it.
            Lead::Gathering if first && crate::failpoint::planted("wal.gather_returns_early") => return Next::Done(Ok(())),
            Lead::Gathering => {
                let wake = first && st.back == st.released;
                let word = &self.groups[(st.gen & 1) as usize];
                return Next::Sleep(word, word.load(), wake);
            }
            Lead::Flushing { upto } if seq <= upto => &self.groups[(st.gen & 1) as usize],
            // Not in the running flush: the first such waiter leads the next.
            Lead::Flushing { .. } if !st.next_claimed => {
                st.next_claimed = true;
                st.ticket += 1;
                *mine = Some(st.ticket);
                &self.handoff
            }
            Lead::Flushing { .. } => &self.groups[((st.gen + 1) & 1) as usize],
        };
        Next::Sleep(word, word.load(), false)
    }

    /// The caller leads flush `st.gen`: it gathers first if the group the
    /// last flush released is not back yet (see "Gathering"), else it
    /// takes every recording so far now.
    fn start_flush(&self, st: &mut State) -> Next<'_> {
        let max = std::time::Duration::from_nanos(st.flush_ns * GATHER_PCT / 100);
        if st.back < st.released && !st.force_checkpoint && !max.is_zero() {
            st.lead = Lead::Gathering;
            self.gathers.fetch_add(1, Ordering::Relaxed);
            return Next::Gather(self.gather.load(), max);
        }
        Next::Lead(self.take_lead(st))
    }

    /// The gather is over (its group is back, or the time is up): take the
    /// flush.
    fn end_gather(&self) -> Result<Flush> {
        let mut st = self.st.lock();
        if st.failed {
            return Err(failed());
        }
        Ok(self.take_lead(&mut st))
    }

    /// Makes the caller the leader of flush `st.gen`: it takes every
    /// recording so far.
    fn take_lead(&self, st: &mut State) -> Flush {
        let rec = std::mem::replace(&mut st.batch, vec![0; REC_HEADER]);
        let upto = std::mem::take(&mut st.batch_seq).max(st.durable);
        let force = std::mem::take(&mut st.force_checkpoint);
        st.lead = Lead::Flushing { upto };
        st.members = std::mem::take(&mut st.queued);
        Flush { g: st.gen, rec, upto, force, off: st.end, salt: st.salt, number: st.next_record, init: st.initialised }
    }

    /// The leader's work: write the flush as one record with one
    /// `fdatasync`, release its group, checkpoint if the log is full, hand
    /// the files to the next leader.
    fn lead(&self, f: Flush) -> Result<()> {
        let g = f.g;
        // 1. one write and one fdatasync for every recording taken (none if
        //    a forced checkpoint found nothing new).
        let t0 = std::time::Instant::now();
        let written = if f.rec.len() > REC_HEADER { self.write_record(f.rec, f.off, f.salt, f.number, f.init).map(Some) } else { Ok(None) };
        let took = t0.elapsed().as_nanos() as u64;
        let mut st = self.st.lock();
        match written {
            Ok(Some((end, grown))) => {
                st.initialised = grown;
                st.end = end;
                st.next_record += 1;
                st.flush_ns = (st.flush_ns * 3 + took) / 4;
            }
            Ok(None) => {}
            Err(e) => return Err(self.fail(st, e)),
        }
        // Never backwards: with one leader at a time `f.upto` is at least
        // `st.durable` anyway; a second leader (only a planted bug lets one
        // in: `wal.checkpoint_unguarded`) that took an empty batch before
        // another's flush finished must not lower it, or a waiter whose
        // record that flush synced would lead empty flushes forever.
        st.durable = st.durable.max(f.upto);
        self.durable.fetch_max(f.upto, Ordering::AcqRel);
        // The group is released now (below): count who comes back.
        st.released = std::mem::take(&mut st.members);
        st.back = 0;
        // 2. log full: release the group first, then checkpoint with the
        //    lock free (`lead` keeps every other leader off the files).
        let checkpoint = f.force || st.end > self.checkpoint_bytes.load(Ordering::Relaxed);
        let unguarded = checkpoint && crate::failpoint::planted("wal.checkpoint_unguarded");
        let early = checkpoint && (!f.force || unguarded);
        if checkpoint {
            if unguarded {
                st.lead = Lead::Idle;
                self.handoff.bump_and_wake();
            }
            drop(st);
            if early {
                self.groups[(g & 1) as usize].bump_and_wake();
            }
            let salt = self.checkpoint_files();
            st = self.st.lock();
            match salt {
                Ok(salt) => {
                    st.salt = salt;
                    st.end = LOG_HEADER;
                    st.next_record = 1;
                }
                Err(e) => return Err(self.fail(st, e)),
            }
        }
        // 3. hand over: to the claimed next leader, or to whoever comes.
        st.gen = g + 1;
        let claimed = std::mem::take(&mut st.next_claimed);
        st.lead = if claimed { Lead::Claimed(st.ticket) } else { Lead::Idle };
        drop(st);
        if claimed {
            self.handoff.bump_and_wake();
        }
        if !early {
            self.groups[(g & 1) as usize].bump_and_wake();
        }
        Ok(())
    }

    /// Seals and writes one record at `off` and `fdatasync`s the log
    /// (zeros ahead first, now and then: see [`LOG_CHUNK`]); returns the
    /// new end of the log and of its initialised bytes.
    fn write_record(&self, mut rec: Vec<u8>, off: u64, salt: u64, number: u64, init: u64) -> Result<(u64, u64)> {
        seal_record(&mut rec, salt, number);
        let end = off + rec.len() as u64;
        let grown = if end > init { (end + LOG_CHUNK).next_multiple_of(LOG_CHUNK) } else { init };
        if grown > init {
            self.files.log_write(init, &vec![0; (grown - init) as usize], false)?;
        }
        self.files.log_write(off, &rec, true)?;
        self.files.log_sync()?;
        Ok((end, grown))
    }

    /// Marks the log failed and wakes every sleeper (they return the error).
    fn fail(&self, mut st: parking_lot::MutexGuard<'_, State>, e: Error) -> Error {
        st.failed = true;
        st.lead = Lead::Idle;
        drop(st);
        for w in self.groups.iter().chain([&self.handoff, &self.gather]) {
            w.bump_and_wake();
        }
        e
    }

    /// Makes every recording so far durable, then folds the log into the
    /// pool file and starts a new generation (clean close; the flush that
    /// does it returns after the checkpoint).
    pub fn checkpoint(&self) -> Result<()> {
        let seq = {
            let mut st = self.st.lock();
            st.force_checkpoint = true;
            st.seq += 1;
            st.batch_seq = st.seq;
            st.seq
        };
        self.wait_durable(seq)
    }

    /// The checkpoint proper, by the leader (nobody else touches the
    /// files): copy the records into the pool file and `fsync` it (a crash
    /// here leaves the log intact and the next open repeats this step),
    /// then a new salt invalidates the old records. Returns the new salt.
    fn checkpoint_files(&self) -> Result<u64> {
        replay(&self.files, true)?;
        new_generation(&self.files)
    }

    /// Writes `data` at pool offset `off` straight into the pool file, for
    /// a clean close (everything committed must be checkpointed first).
    pub fn write_pool(&self, off: u64, data: &[u8]) -> Result<()> {
        self.files.pool_write(off, data)
    }

    /// `fsync`s the pool file.
    pub fn sync_pool(&self) -> Result<()> {
        self.files.pool_sync()
    }

    /// Makes a grown pool file's length durable (the log does not cover it).
    pub fn pool_grown(&self, len: u64) -> Result<()> {
        if let Some(r) = &self.files.rec {
            r.push(IoEvent::PoolSetLen(len));
        }
        self.files.pool_sync()
    }
}

/// The error of every commit after a log write or sync failed.
fn failed() -> Error {
    Error::io("write-ahead log", std::io::Error::other("an earlier log write or fdatasync failed"))
}

/// Replays the pool file at `pool_path`'s log, if it has one, into the pool
/// file (for opens in a mode other than `wal`), then removes the log.
pub fn replay_and_remove(pool_path: &Path, pool: &File) -> Result<u64> {
    let path = log_path(pool_path);
    let log = match std::fs::OpenOptions::new().read(true).write(true).open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(Error::io("open log", e)),
    };
    let pool = pool.try_clone().map_err(|e| Error::io("dup pool file", e))?;
    let files = Files::new(log, &path, pool, None);
    let n = replay(&files, true)?;
    std::fs::remove_file(&path).map_err(|e| Error::io("remove log", e))?;
    Ok(n)
}

/// The pieces of the valid records of the pool file at `pool_path`'s log,
/// in order, without applying them (read-only opens overlay them).
pub fn pending_pieces(pool_path: &Path) -> Result<Vec<(u64, Vec<u8>)>> {
    let log = match File::open(log_path(pool_path)) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("open log", e)),
    };
    let mut out = Vec::new();
    for_each_record(&log, |payload| {
        for_each_piece(payload, |off, b| out.push((off, b.to_vec())));
        Ok(())
    })?;
    Ok(out)
}

/// Applies the current generation's valid records to the pool file, in
/// order; with `sync` (or if any was applied) `fsync`s the pool file.
///
/// The pieces are copied, in log order, into one shared mapping of the
/// whole pool file ([`SharedSpan`]): a checkpoint of scattered keys holds
/// tens of thousands of small pieces, and a `pwrite` each (or merging them
/// first) cost a third of a pipelined SET's CPU; a store costs nothing and
/// a page fault per touched page little. A piece past the file's end (none
/// in practice: the pool file only grows) is written with its own `pwrite`
/// at its turn (page-cache writes and stores through the mapping see each
/// other, so log order holds), and so is a piece whose blocks could not be
/// reserved ([`Reserve`]: pool files are sparse until the allocator backs
/// their spans); if the file cannot be mapped, every piece goes through
/// [`Extents`], which merges them (a later piece wins, touching pieces
/// join) into one `pwrite` per run.
/// Either way these are page-cache writes, so order does not matter before
/// the `fsync`: a crash before it replays the whole log again.
fn replay(files: &Files, sync: bool) -> Result<u64> {
    let len = files.pool.metadata().map_err(|e| Error::io("stat pool file", e))?.len();
    let map = if len > 0 { SharedSpan::map(&files.pool, 0, len) } else { None };
    let mut reserve = Reserve::new(&files.pool, len);
    let mut ext = Extents::default();
    let n = for_each_record(&files.log, |payload| {
        let mut failed = None;
        for_each_piece(payload, |off, b| match &map {
            Some(m) if m.covers(off, b.len()) && reserve.holds(off, b.len() as u64) => {
                files.note_pool_write(off, b);
                m.copy_in(off, b);
            }
            Some(_) => failed = files.pool_write(off, b).err().or(failed.take()),
            None => ext.insert(off, b),
        });
        if let Some(e) = failed {
            return Err(e);
        }
        if ext.bytes > EXTENTS_MAX_BYTES {
            ext.write_out(files)?;
        }
        Ok(())
    })?;
    drop(map);
    ext.write_out(files)?;
    if sync || n > 0 {
        files.pool_sync()?;
    }
    Ok(n)
}

/// The pool file's blocks a replay has reserved, a [`Reserve::STEP`] at a
/// time: a store through the mapping into a hole of a sparse file must
/// allocate a block, and on a full disk that is a SIGBUS where `pwrite`
/// returns ENOSPC. So a piece is stored through the mapping only where
/// `fallocate` (`pool::space::reserve_blocks`) reserved its
/// blocks; where it fails or the file system has none, the piece is
/// written with `pwrite`. Reserving blocks that are already there is one
/// cheap call per step per checkpoint.
struct Reserve<'a> {
    file: &'a File,
    /// The file's length: nothing past it is reserved.
    len: u64,
    steps: std::collections::HashMap<u64, bool>,
}

impl<'a> Reserve<'a> {
    /// Bytes reserved by one `fallocate`.
    const STEP: u64 = 2 << 20;

    fn new(file: &'a File, len: u64) -> Self {
        Reserve { file, len, steps: Default::default() }
    }

    /// Whether every block under `[off, off+len)` is reserved.
    fn holds(&mut self, off: u64, len: u64) -> bool {
        if len == 0 {
            return true;
        }
        let (first, last) = (off / Self::STEP, (off + len - 1) / Self::STEP);
        let (file, len) = (self.file, self.len);
        (first..=last).all(|k| {
            *self.steps.entry(k).or_insert_with(|| {
                let at = k * Self::STEP;
                let n = Self::STEP.min(len.saturating_sub(at));
                n > 0 && !crate::failpoint::planted("wal.reserve_fails") && crate::pool::space::reserve_blocks(file, at, n).is_ok()
            })
        })
    }
}

/// Bytes of merged pieces a replay holds before writing them out.
const EXTENTS_MAX_BYTES: u64 = 64 << 20;

/// Non-overlapping, non-touching runs of pool bytes (start offset -> bytes)
/// that the pieces applied so far leave in the pool file.
#[derive(Default)]
struct Extents {
    runs: std::collections::BTreeMap<u64, Vec<u8>>,
    /// Bytes held in `runs`.
    bytes: u64,
}

impl Extents {
    /// Applies one piece: it overrides what it overlaps, and joins every
    /// run it overlaps or touches into one.
    fn insert(&mut self, off: u64, b: &[u8]) {
        if b.is_empty() {
            return;
        }
        let end = off + b.len() as u64;
        // The run starting at or before `off` that reaches it, else `off`.
        let mut start = off;
        if let Some((&s, v)) = self.runs.range_mut(..=off).next_back() {
            let run_end = s + v.len() as u64;
            // The common case (the same log slot, the same buckets again):
            // the piece lies inside one run; overwrite it there.
            if run_end >= end {
                let at = (off - s) as usize;
                v[at..at + b.len()].copy_from_slice(b);
                return;
            }
            if run_end >= off {
                start = s;
            }
        }
        let mut run = self.runs.remove(&start).unwrap_or_default();
        self.bytes -= run.len() as u64;
        // Runs starting inside [start, end] are swallowed (their bytes kept
        // where the piece does not cover them).
        while let Some((&s, _)) = self.runs.range(start..=end).next() {
            let v = self.runs.remove(&s).unwrap_or_default();
            self.bytes -= v.len() as u64;
            let at = (s - start) as usize;
            if run.len() < at + v.len() {
                run.resize(at + v.len(), 0);
            }
            run[at..at + v.len()].copy_from_slice(&v);
        }
        let at = (off - start) as usize;
        if run.len() < at + b.len() {
            run.resize(at + b.len(), 0);
        }
        run[at..at + b.len()].copy_from_slice(b);
        self.bytes += run.len() as u64;
        self.runs.insert(start, run);
    }

    /// Writes every run to the pool file (one write each) and empties the set.
    fn write_out(&mut self, files: &Files) -> Result<()> {
        for (off, v) in std::mem::take(&mut self.runs) {
            files.pool_write(off, &v)?;
        }
        self.bytes = 0;
        Ok(())
    }
}

/// A shared, writable mapping of the pool file's pages `[from, to)` (page
/// aligned outward), unmapped on drop; stores through it are writes to the
/// file's page cache, as `pwrite`s are.
struct SharedSpan {
    addr: *mut u8,
    start: u64,
    len: usize,
}

impl SharedSpan {
    /// Maps the pages holding `[from, to)`, which must lie inside the file
    /// (a store past its end would raise SIGBUS); `None` if `mmap` fails.
    fn map(file: &File, from: u64, to: u64) -> Option<SharedSpan> {
        use std::os::fd::AsRawFd;
        let start = from & !4095;
        let len = usize::try_from(to - start).ok()?;
        // SAFETY: a new mapping at an address the kernel picks replaces
        // nothing; the fd is open for reading and writing.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, file.as_raw_fd(), start as i64)
        };
        (p != libc::MAP_FAILED).then_some(SharedSpan { addr: p.cast(), start, len })
    }

    /// Whether `[off, off + n)` lies inside the mapped span.
    fn covers(&self, off: u64, n: usize) -> bool {
        off >= self.start && (off - self.start).checked_add(n as u64).is_some_and(|e| e <= self.len as u64)
    }

    /// Copies `b` to file offset `off` if the span covers it (else nothing).
    fn copy_in(&self, off: u64, b: &[u8]) {
        if !self.covers(off, b.len()) {
            return;
        }
        let at = (off - self.start) as usize;
        // SAFETY: `[at, at + len)` is inside this live mapping (checked
        // above), which lies inside the file (`map`'s contract), and no one
        // else holds a reference into it.
        unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), self.addr.add(at), b.len()) };
    }
}

impl Drop for SharedSpan {
    fn drop(&mut self) {
        // SAFETY: the range is this span's own mapping, no longer used.
        unsafe { libc::munmap(self.addr.cast(), self.len) };
    }
}

/// Calls `f` with the payload of each valid record of the current
/// generation, in order, stopping at the first invalid one. Returns how
/// many there were.
fn for_each_record(log: &File, mut f: impl FnMut(&[u8]) -> Result<()>) -> Result<u64> {
    let len = log.metadata().map_err(|e| Error::io("stat log", e))?.len();
    let mut head = [0u8; 24];
    if len < LOG_HEADER || log.read_exact_at(&mut head, 0).is_err() || head[..8] != LOG_MAGIC {
        return Ok(0);
    }
    let salt = u64_at(&head, 16);
    if u32_at(&head, 8) != LOG_VERSION || read_u32(log, 24)? != crc32c::crc32c(&head) {
        return Ok(0);
    }
    let (mut off, mut number) = (LOG_HEADER, 1u64);
    let mut rh = [0u8; REC_HEADER];
    while off + REC_HEADER as u64 <= len {
        log.read_exact_at(&mut rh, off).map_err(|e| Error::io("read log", e))?;
        let plen = u64_at(&rh, 24);
        let fits = plen <= MAX_RECORD && off + REC_HEADER as u64 + plen <= len;
        if u32_at(&rh, 0) != REC_MAGIC || u64_at(&rh, 8) != salt || u64_at(&rh, 16) != number || !fits {
            break;
        }
        let mut payload = vec![0u8; plen as usize];
        log.read_exact_at(&mut payload, off + REC_HEADER as u64).map_err(|e| Error::io("read log", e))?;
        let want = u32_at(&rh, 32);
        if record_crc(&rh, &payload) != want && !crate::failpoint::planted("wal.skip_checksum") {
            break;
        }
        f(&payload)?;
        off += REC_HEADER as u64 + plen;
        number += 1;
    }
    Ok(number - 1)
}

/// Calls `f(pool offset, bytes)` for each well-formed piece of a payload.
fn for_each_piece(payload: &[u8], mut f: impl FnMut(u64, &[u8])) {
    let mut at = 0usize;
    while at + PIECE_HEADER <= payload.len() {
        let off = u64_at(payload, at);
        let n = u32_at(payload, at + 8) as usize;
        let start = at + PIECE_HEADER;
        let Some(bytes) = payload.get(start..start + n) else { return };
        if off.checked_add(n as u64).is_none_or(|e| e > crate::format::MAX_POOL_SIZE) {
            return;
        }
        f(off, bytes);
        at = start + n.next_multiple_of(8);
    }
}

fn encode_piece(batch: &mut Vec<u8>, off: u64, bytes: &[u8]) {
    batch.extend_from_slice(&off.to_le_bytes());
    batch.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    batch.extend_from_slice(&[0; 4]);
    batch.extend_from_slice(bytes);
    batch.resize(batch.len().next_multiple_of(8), 0);
}

/// Fills the reserved header of a record whose payload follows it.
fn seal_record(rec: &mut [u8], salt: u64, number: u64) {
    let plen = (rec.len() - REC_HEADER) as u64;
    rec[0..4].copy_from_slice(&REC_MAGIC.to_le_bytes());
    rec[4..8].fill(0);
    rec[8..16].copy_from_slice(&salt.to_le_bytes());
    rec[16..24].copy_from_slice(&number.to_le_bytes());
    rec[24..32].copy_from_slice(&plen.to_le_bytes());
    rec[32..40].fill(0);
    let (h, p) = rec.split_at(REC_HEADER);
    let mut hh = [0u8; REC_HEADER];
    hh.copy_from_slice(h);
    let crc = record_crc(&hh, p);
    rec[32..36].copy_from_slice(&crc.to_le_bytes());
}

fn record_crc(header: &[u8; REC_HEADER], payload: &[u8]) -> u32 {
    let mut h = *header;
    h[32..40].fill(0);
    crc32c::crc32c_append(crc32c::crc32c(&h), payload)
}

/// Writes a log header with a fresh salt and syncs it; the old records'
/// bytes stay (their salt no longer matches), to be overwritten. Returns
/// the salt.
fn new_generation(files: &Files) -> Result<u64> {
    let salt = u64::from_le_bytes(uuid::Uuid::new_v4().as_bytes()[..8].try_into().unwrap_or([1; 8]));
    let mut head = vec![0u8; LOG_HEADER as usize];
    head[..8].copy_from_slice(&LOG_MAGIC);
    head[8..12].copy_from_slice(&LOG_VERSION.to_le_bytes());
    head[16..24].copy_from_slice(&salt.to_le_bytes());
    let crc = crc32c::crc32c(&head[..24]);
    head[24..28].copy_from_slice(&crc.to_le_bytes());
    // The new salt is durable before old records can be overwritten; a
    // crash before it keeps the old generation (replayed again, harmlessly).
    files.log_write(0, &head, false)?;
    files.log_sync()?;
    Ok(salt)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(x)
}

fn read_u32(f: &File, at: u64) -> Result<u32> {
    let mut x = [0u8; 4];
    f.read_exact_at(&mut x, at).map_err(|e| Error::io("read log", e))?;
    Ok(u32::from_le_bytes(x))
}

#[cfg(test)]
#[path = "wal_tests.rs"]
mod tests;
