package io.engram.heap;

import java.lang.foreign.MemorySegment;
import java.util.List;

/**
 * The persistence seam: everything the Java front end asks of a pool.
 *
 * <p>The vocabulary is the engine's C ABI ({@code include/engram.h}):
 * types registered with a name, a size, the offsets of their pool
 * pointers and a signature hashed into a layout hash; objects and arrays
 * allocated by type; named roots; failure-atomic regions (begin, log a
 * range, commit, abort) on the calling thread; flush, fence and persist of
 * a range. Addresses are non-zero {@code long}s; 0 is null. Every image
 * word the front end writes goes through {@link #putLong} or
 * {@link #write}, so a back end sees every store.
 *
 * <p>Crash contract: an allocation is not durable until something durable
 * points to it (allocated-but-unlinked images are garbage after a crash);
 * {@link #persist} returns only when the range is durable; the ranges
 * logged inside a region are restored by recovery unless the region
 * committed. Implementations are thread-safe; regions are per thread.
 *
 * <p>Back end: {@link EngineHeap}, the engine's C ABI through FFM. (Before
 * the C ABI existed a pool file managed in Java stood here; it went when
 * the engine binding landed: one pool format, the engine's.)
 */
public interface Heap extends AutoCloseable {

    /** A type: name, size of one value, offsets of its 8-byte pool pointers, signature. */
    record TypeDesc(String name, long size, int[] ptrOffsets, String signature) {
    }

    /**
     * Registers a type (idempotent) and returns its id, stable for the
     * pool's lifetime. A type whose signature differs from the one recorded
     * in the pool fails with LAYOUT_MISMATCH naming the type.
     */
    int registerType(TypeDesc desc);

    /** The name a type id was registered with (to find its class after a restart). */
    String typeName(int typeId);

    /**
     * Allocates a zeroed object of a registered type. Inside a region the
     * allocation is undone by {@link #abort}; outside, it is durable at once
     * (and garbage after a crash until something durable points to it).
     */
    long alloc(int typeId);

    /** Allocates a zeroed array of {@code count} values of a registered type. */
    long allocArray(int typeId, long count);

    /** Frees an object or array that nothing durable points to any more (inside a region: at commit). */
    void free(long addr);

    long getLong(long addr);

    /** Stores 8 bytes (8-aligned: atomic across a crash). Not durable until persisted. */
    void putLong(long addr, long value);

    /** Copies {@code src} into the pool at {@code addr}. Not durable until persisted. */
    void write(long addr, MemorySegment src);

    /** Copies {@code dst.byteSize()} bytes at {@code addr} into {@code dst}. */
    void read(long addr, MemorySegment dst);

    /** Writes back a range (no ordering yet). */
    void flush(long addr, long len);

    /** Orders: every range flushed before it is durable before anything stored after it. */
    void fence();

    /** flush + fence. */
    default void persist(long addr, long len) {
        flush(addr, len);
        fence();
    }

    /** Starts the calling thread's region (the caller flattens nesting). */
    void begin();

    /** Saves a range's current bytes in the region's undo log before it is changed. */
    void log(long addr, long len);

    /** Makes every change of the region durable, then drops its log. */
    void commit();

    /** Restores every logged range, frees what the region allocated, drops its frees, ends it. */
    void abort();

    /** Sets (durably) a named root; 0 removes it. Logged when called inside a region. */
    void setRoot(String name, long addr);

    /** The address of a named root, or 0. */
    long root(String name);

    /** Names of every root. */
    List<String> rootNames();

    /**
     * Reclaims every image that is not live (run right after open, before
     * the front end registers anything): the engine collects from its roots;
     * {@code live} says what the front end found reachable.
     */
    void sweep(java.util.function.LongPredicate live);

    /**
     * Checks that {@code [addr, addr+len)} lies in an allocated object before
     * recovery reads it (a corrupt pool is then CORRUPT or BAD_POINTER,
     * never a read outside the mapping).
     */
    default void validate(long addr, long len) {
    }

    /** What opening found, for the caller's report. */
    String openReport();

    /** Closes cleanly; the handle is unusable afterwards. */
    @Override
    void close();
}
