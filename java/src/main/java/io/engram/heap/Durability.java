package io.engram.heap;

/** How stores reach the media (the engine's durability modes). */
public enum Durability {
    /** The engine's choice: PMEM on a DAX mapping, MSYNC on tmpfs, WAL elsewhere. */
    AUTO,
    /** Cache-line flushes and fences (real persistent memory). */
    PMEM,
    /** msync of the dirty range at each persist: durable on ordinary storage. */
    MSYNC,
    /** No flushing: survives a process crash (kill -9, halt), not a power failure. */
    PROCESS,
    /** Records every store, flush and fence for the crash explorer (needs a tracer: {@link Explorer}). */
    TRACE,
    /** Private mapping and a write-ahead log: one fdatasync per commit, shared by concurrent commits. */
    WAL
}
