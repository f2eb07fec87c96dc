//! Multi-threaded traces for the language-level persistency models.
//!
//! A trace is one real execution: every thread's events in one global order
//! (the order they happened in; each thread's events appear in its program
//! order), with, for every load and read-modify-write, the event it read from
//! (`rf`). From `rf` the synchronizes-with edges follow: an acquire that reads
//! from a release (or from a read-modify-write in that release's release
//! sequence) synchronizes with it.
//!
//! Addresses are offsets; persistent ones index the traced region (`base` is
//! its content when recording started), volatile ones are a separate space
//! (they never reach a crash image). `va` is the paper's volatile annotation:
//! an acquire or release so marked promises to order nothing persistent.
//!
//! # Text format (`arp-trace 1`)
//!
//! ```text
//! arp-trace 1 base=4096          region of 4096 zero bytes
//! init 0x40 0102                 optional: non-zero base bytes (before events)
//! 0 st p rel 0x40 01020304       thread 0: store, persistent, release, data hex
//! 1 ld v acq 0x1000 8 rf=0 va    thread 1: load 8 bytes, reads from event 0, annotated
//! 1 rmw v acqrel 0x1000 01 rf=1  read-modify-write (writes the data)
//! 1 fence                        atomic_thread_fence(seq_cst)
//! 1 sp                           engram::sequence_point()
//! 1 clwb 0x40                    x86 mapping: cache-line write-back
//! 1 sfence                       x86 mapping: store fence
//! ```
//!
//! Events are numbered from 0 in file order; `#` starts a comment. Orders:
//! `rlx`, `acq`, `rel`, `acqrel`, `sc` (sequentially consistent operations
//! count as acquire and release; their single total order is not modelled).

use std::fmt::Write as _;

/// Which memory an access touches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Space {
    /// The persistent region: stores are persists.
    Persistent,
    /// Ordinary memory: never in a crash image.
    Volatile,
}

/// A C++ memory order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemOrder {
    /// `memory_order_relaxed`.
    Relaxed,
    /// `memory_order_acquire`.
    Acquire,
    /// `memory_order_release`.
    Release,
    /// `memory_order_acq_rel`.
    AcqRel,
    /// `memory_order_seq_cst`.
    SeqCst,
}

impl MemOrder {
    fn acquires(self) -> bool {
        matches!(self, MemOrder::Acquire | MemOrder::AcqRel | MemOrder::SeqCst)
    }
    fn releases(self) -> bool {
        matches!(self, MemOrder::Release | MemOrder::AcqRel | MemOrder::SeqCst)
    }
    fn name(self) -> &'static str {
        match self {
            MemOrder::Relaxed => "rlx",
            MemOrder::Acquire => "acq",
            MemOrder::Release => "rel",
            MemOrder::AcqRel => "acqrel",
            MemOrder::SeqCst => "sc",
        }
    }
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "rlx" => MemOrder::Relaxed,
            "acq" => MemOrder::Acquire,
            "rel" => MemOrder::Release,
            "acqrel" => MemOrder::AcqRel,
            "sc" => MemOrder::SeqCst,
            _ => return None,
        })
    }
}

/// What one event does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// A store of `data` at `addr`.
    Store {
        /// Byte address.
        addr: u64,
        /// The bytes written.
        data: Vec<u8>,
        /// Persistent or volatile memory.
        space: Space,
        /// The C++ memory order.
        order: MemOrder,
    },
    /// A load of `len` bytes; `rf` is the event it read from (None: the initial value).
    Load {
        /// Byte address.
        addr: u64,
        /// Bytes read.
        len: u8,
        /// Persistent or volatile memory.
        space: Space,
        /// The C++ memory order.
        order: MemOrder,
        /// The event it read from (None: the initial value).
        rf: Option<usize>,
    },
    /// A read-modify-write that read from `rf` and wrote `data`.
    Rmw {
        /// Byte address.
        addr: u64,
        /// The bytes written.
        data: Vec<u8>,
        /// Persistent or volatile memory.
        space: Space,
        /// The C++ memory order.
        order: MemOrder,
        /// The event it read from (None: the initial value).
        rf: Option<usize>,
    },
    /// `atomic_thread_fence(memory_order_seq_cst)`: a full (two-sided) fence.
    Fence,
    /// `engram::sequence_point()`: ends the thread's current persist epoch.
    SeqPoint,
    /// x86 mapping: CLWB of the line holding `addr` (ignored by the language models).
    Clwb {
        /// Byte address.
        addr: u64,
    },
    /// x86 mapping: SFENCE (ignored by the language models).
    Sfence,
}

/// One event of one thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArpEvent {
    /// The thread that executed it.
    pub thread: u32,
    /// What it did.
    pub op: Op,
    /// The volatile annotation: this acquire/release orders nothing persistent.
    pub va: bool,
}

impl ArpEvent {
    /// The memory order of an access (None for fences and the rest).
    pub fn order(&self) -> Option<MemOrder> {
        match &self.op {
            Op::Store { order, .. } | Op::Load { order, .. } | Op::Rmw { order, .. } => Some(*order),
            _ => None,
        }
    }
    /// An acquire: a load or read-modify-write with acquire semantics.
    pub fn is_acquire(&self) -> bool {
        matches!(self.op, Op::Load { .. } | Op::Rmw { .. }) && self.order().is_some_and(MemOrder::acquires)
    }
    /// A release: a store or read-modify-write with release semantics.
    pub fn is_release(&self) -> bool {
        matches!(self.op, Op::Store { .. } | Op::Rmw { .. }) && self.order().is_some_and(MemOrder::releases)
    }
    /// A full fence or a sequence point: a two-sided persist barrier in every model.
    pub fn is_barrier(&self) -> bool {
        matches!(self.op, Op::Fence | Op::SeqPoint)
    }
    /// A store to persistent memory (a persist): (addr, data).
    pub fn persist(&self) -> Option<(u64, &[u8])> {
        match &self.op {
            Op::Store { addr, data, space: Space::Persistent, .. } | Op::Rmw { addr, data, space: Space::Persistent, .. } => {
                Some((*addr, data))
            }
            _ => None,
        }
    }
    fn writes(&self) -> Option<(u64, Space)> {
        match &self.op {
            Op::Store { addr, space, .. } | Op::Rmw { addr, space, .. } => Some((*addr, *space)),
            _ => None,
        }
    }
    fn reads_from(&self) -> Option<usize> {
        match &self.op {
            Op::Load { rf, .. } | Op::Rmw { rf, .. } => *rf,
            _ => None,
        }
    }
}

/// Why a trace was rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceError {
    /// A line of the text format could not be read.
    Syntax {
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        what: String,
    },
    /// `rf` of event `event` does not name an earlier write to the same location.
    BadReadsFrom {
        /// Index of the offending event.
        event: usize,
    },
}

impl std::fmt::Display for TraceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TraceError::Syntax { line, what } => write!(f, "line {line}: {what}"),
            TraceError::BadReadsFrom { event } => write!(f, "event {event}: reads-from is not an earlier write to the same location"),
        }
    }
}

impl std::error::Error for TraceError {}

/// A recorded multi-threaded execution.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ArpTrace {
    /// The persistent region's content when recording started.
    pub base: Vec<u8>,
    /// Every event, in the execution's global order.
    pub events: Vec<ArpEvent>,
}

impl ArpTrace {
    /// A trace over `base`.
    pub fn new(base: Vec<u8>) -> Self {
        ArpTrace { base, events: Vec::new() }
    }

    /// Appends an event and returns its index.
    pub fn push(&mut self, thread: u32, op: Op, va: bool) -> usize {
        self.events.push(ArpEvent { thread, op, va });
        self.events.len() - 1
    }

    /// Number of threads (highest thread id + 1).
    pub fn threads(&self) -> usize {
        self.events.iter().map(|e| e.thread as usize + 1).max().unwrap_or(0)
    }

    /// Checks that every `rf` names an earlier write to the same address and space.
    pub fn validate(&self) -> Result<(), TraceError> {
        for (i, e) in self.events.iter().enumerate() {
            let Some(w) = e.reads_from() else { continue };
            let here = match &e.op {
                Op::Load { addr, space, .. } | Op::Rmw { addr, space, .. } => (*addr, *space),
                _ => continue,
            };
            if w >= i || self.events[w].writes() != Some(here) {
                return Err(TraceError::BadReadsFrom { event: i });
            }
        }
        Ok(())
    }

    /// For each event, the releases it synchronizes with (empty unless it is
    /// an acquire): the event it read from if that is a release, and every
    /// release heading a release sequence it read from through
    /// read-modify-writes.
    pub fn synchronizes_with(&self) -> Vec<Vec<usize>> {
        let mut sw = vec![Vec::new(); self.events.len()];
        for (i, e) in self.events.iter().enumerate() {
            if !e.is_acquire() {
                continue;
            }
            let mut w = e.reads_from();
            while let Some(src) = w.filter(|&s| s < i) {
                let ev = &self.events[src];
                if ev.is_release() {
                    sw[i].push(src);
                }
                w = if matches!(ev.op, Op::Rmw { .. }) { ev.reads_from().filter(|&n| n < src) } else { None };
            }
        }
        sw
    }

    /// The trace in the text format.
    pub fn to_text(&self) -> String {
        let mut s = format!("arp-trace 1 base={}\n", self.base.len());
        for (i, chunk) in self.base.chunks(64).enumerate() {
            if chunk.iter().any(|&b| b != 0) {
                let _ = writeln!(s, "init {:#x} {}", i * 64, hex(chunk));
            }
        }
        for e in &self.events {
            let _ = write!(s, "{} ", e.thread);
            let _ = match &e.op {
                Op::Store { addr, data, space, order } => write!(s, "st {} {} {addr:#x} {}", sp(*space), order.name(), hex(data)),
                Op::Load { addr, len, space, order, rf } => write!(s, "ld {} {} {addr:#x} {len}{}", sp(*space), order.name(), rfs(*rf)),
                Op::Rmw { addr, data, space, order, rf } => {
                    write!(s, "rmw {} {} {addr:#x} {}{}", sp(*space), order.name(), hex(data), rfs(*rf))
                }
                Op::Fence => write!(s, "fence"),
                Op::SeqPoint => write!(s, "sp"),
                Op::Clwb { addr } => write!(s, "clwb {addr:#x}"),
                Op::Sfence => write!(s, "sfence"),
            };
            s.push_str(if e.va { " va\n" } else { "\n" });
        }
        s
    }

    /// Reads the text format (and validates reads-from).
    pub fn parse(text: &str) -> Result<ArpTrace, TraceError> {
        let mut t: Option<ArpTrace> = None;
        for (n, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let err = |what: &str| TraceError::Syntax { line: n + 1, what: what.to_string() };
            let toks: Vec<&str> = line.split_whitespace().collect();
            match (&mut t, toks[0]) {
                (None, "arp-trace") => t = Some(parse_header(&toks).ok_or_else(|| err("bad header"))?),
                (None, _) => return Err(err("expected `arp-trace 1 base=N`")),
                (Some(tr), "init") => parse_init(tr, &toks).ok_or_else(|| err("bad init line"))?,
                (Some(tr), _) => {
                    let e = parse_event(&toks).ok_or_else(|| err("bad event"))?;
                    tr.events.push(e);
                }
            }
        }
        let t = t.ok_or(TraceError::Syntax { line: 0, what: "empty trace".into() })?;
        t.validate()?;
        Ok(t)
    }
}

fn sp(s: Space) -> &'static str {
    if s == Space::Persistent {
        "p"
    } else {
        "v"
    }
}

fn rfs(rf: Option<usize>) -> String {
    rf.map(|r| format!(" rf={r}")).unwrap_or_default()
}

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() & 1 == 1 || s.is_empty() {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

fn num(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

fn parse_header(toks: &[&str]) -> Option<ArpTrace> {
    if toks.len() != 3 || toks[1] != "1" {
        return None;
    }
    let len = num(toks[2].strip_prefix("base=")?)?;
    if len > 1 << 32 {
        return None;
    }
    Some(ArpTrace::new(vec![0; len as usize]))
}

fn parse_init(t: &mut ArpTrace, toks: &[&str]) -> Option<()> {
    let addr = num(toks.get(1)?)? as usize;
    let data = unhex(toks.get(2)?)?;
    t.base.get_mut(addr..addr.checked_add(data.len())?)?.copy_from_slice(&data);
    Some(())
}

fn parse_event(toks: &[&str]) -> Option<ArpEvent> {
    let thread: u32 = toks.first()?.parse().ok()?;
    let va = toks.last() == Some(&"va");
    let toks = if va { &toks[..toks.len() - 1] } else { toks };
    let rf = toks.last().and_then(|t| t.strip_prefix("rf=")).map(|r| r.parse::<usize>().ok());
    let (toks, rf) = match rf {
        Some(Some(r)) => (&toks[..toks.len() - 1], Some(r)),
        Some(None) => return None,
        None => (toks, None),
    };
    let space = |s: &str| match s {
        "p" => Some(Space::Persistent),
        "v" => Some(Space::Volatile),
        _ => None,
    };
    let op = match (toks.get(1).copied()?, toks.len()) {
        ("st", 6) if rf.is_none() => {
            Op::Store { space: space(toks[2])?, order: MemOrder::parse(toks[3])?, addr: num(toks[4])?, data: unhex(toks[5])? }
        }
        ("ld", 6) => {
            let len: u8 = toks[5].parse().ok().filter(|&l| l > 0)?;
            Op::Load { space: space(toks[2])?, order: MemOrder::parse(toks[3])?, addr: num(toks[4])?, len, rf }
        }
        ("rmw", 6) => Op::Rmw { space: space(toks[2])?, order: MemOrder::parse(toks[3])?, addr: num(toks[4])?, data: unhex(toks[5])?, rf },
        ("fence", 2) => Op::Fence,
        ("sp", 2) => Op::SeqPoint,
        ("clwb", 3) => Op::Clwb { addr: num(toks[2])? },
        ("sfence", 2) => Op::Sfence,
        _ => return None,
    };
    Some(ArpEvent { thread, op, va })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ArpTrace {
        let mut t = ArpTrace::new(vec![0; 128]);
        t.base[65] = 7;
        t.push(0, Op::Store { addr: 0, data: vec![1, 2], space: Space::Persistent, order: MemOrder::Relaxed }, false);
        let r = t.push(0, Op::Store { addr: 0x1000, data: vec![1], space: Space::Volatile, order: MemOrder::Release }, false);
        let a = t.push(1, Op::Rmw { addr: 0x1000, data: vec![2], space: Space::Volatile, order: MemOrder::AcqRel, rf: Some(r) }, true);
        t.push(2, Op::Load { addr: 0x1000, len: 1, space: Space::Volatile, order: MemOrder::Acquire, rf: Some(a) }, false);
        t.push(1, Op::SeqPoint, false);
        t.push(1, Op::Fence, false);
        t.push(1, Op::Clwb { addr: 64 }, false);
        t.push(1, Op::Sfence, false);
        t
    }

    #[test]
    fn text_round_trip() {
        let t = sample();
        assert_eq!(ArpTrace::parse(&t.to_text()), Ok(t));
    }

    #[test]
    fn release_sequence_through_rmw() {
        // event 3 reads from the acq_rel RMW 2, which read from release 1:
        // it synchronizes with both
        assert_eq!(sample().synchronizes_with()[3], vec![2, 1]);
        assert_eq!(sample().synchronizes_with()[2], vec![1]);
    }

    #[test]
    fn bad_input_is_a_typed_error() {
        assert!(matches!(ArpTrace::parse("hello"), Err(TraceError::Syntax { line: 1, .. })));
        assert!(matches!(ArpTrace::parse("arp-trace 1 base=8\n0 st p zz 0 01"), Err(TraceError::Syntax { line: 2, .. })));
        assert!(matches!(ArpTrace::parse("arp-trace 1 base=8\ninit 0x7 0102"), Err(TraceError::Syntax { .. })));
        let bad_rf = "arp-trace 1 base=8\n0 ld v acq 0x10 1 rf=0";
        assert_eq!(ArpTrace::parse(bad_rf), Err(TraceError::BadReadsFrom { event: 0 }));
    }
}
