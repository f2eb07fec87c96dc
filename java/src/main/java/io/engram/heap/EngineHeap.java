package io.engram.heap;

import io.engram.EngramException;
import io.engram.EngramException.Code;
import io.engram.PoolFullException;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.LongPredicate;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The {@link Heap} seam over the engine's C ABI ({@code include/engram.h},
 * {@code libengram_ffi.so}) through the FFM API: no JNI, no C code of our
 * own. Pool management, allocation, roots, regions and persistence are
 * the engine's; loads and stores of image words are plain memory accesses
 * on the pool's mapping ({@link MemorySegment} over [base, base+max)).
 *
 * <p>Roots: the engine's root names are at most 63 bytes, Java root names
 * ({@code pkg.Class.field}) can be longer, so each Java root is a small
 * {@code java.root} object {name (i8 array), value} under an engine root
 * named by the Java name (or {@code j:} and its 64-bit hash when long).
 *
 * <p>Every address the front end got from the pool is checked with
 * {@code engram_object_info} before recovery reads it, so a corrupt pool is
 * a typed error, never an access outside the mapping.
 */
public final class EngineHeap implements Heap {
    private static final Linker LINKER = Linker.nativeLinker();
    private static volatile Lib lib;

    /** The bound library: one handle per C function. */
    static final class Lib {
        final MethodHandle lastError, createInit, openInit, openOrCreate, open, close, openReport, info;
        final MethodHandle typeRegister, typeInfo, rootsList, flush, fence, persist, collect, objectInfo;
        final MethodHandle begin, commit, abort, log, alloc, allocArray, free, rootSet, rootGet;
        final MethodHandle abandon, tracerNew, tracerStart, tracerStop, tracerFree, explore;

        Lib(SymbolLookup l) {
            lastError = h(l, "engram_last_error", FunctionDescriptor.of(ADDRESS));
            createInit = h(l, "engram_create_options_init", st(ADDRESS));
            openInit = h(l, "engram_open_options_init", st(ADDRESS));
            openOrCreate = h(l, "engram_pool_open_or_create", st(ADDRESS, ADDRESS, ADDRESS, ADDRESS));
            open = h(l, "engram_pool_open", st(ADDRESS, ADDRESS, ADDRESS));
            close = h(l, "engram_pool_close", st(JAVA_LONG));
            openReport = h(l, "engram_pool_open_report", st(JAVA_LONG, ADDRESS));
            info = h(l, "engram_pool_info", st(JAVA_LONG, ADDRESS));
            typeRegister = h(l, "engram_type_register", st(JAVA_LONG, ADDRESS, ADDRESS));
            typeInfo = h(l, "engram_type_info", st(JAVA_LONG, JAVA_INT, ADDRESS, ADDRESS, ADDRESS, ADDRESS, JAVA_LONG));
            rootsList = h(l, "engram_roots_list", st(JAVA_LONG, ADDRESS, JAVA_LONG, ADDRESS));
            flush = h(l, "engram_flush", st(JAVA_LONG, JAVA_LONG, JAVA_LONG));
            fence = h(l, "engram_fence", st(JAVA_LONG));
            persist = h(l, "engram_persist", st(JAVA_LONG, JAVA_LONG, JAVA_LONG));
            collect = h(l, "engram_collect", st(JAVA_LONG, ADDRESS));
            objectInfo = h(l, "engram_object_info", st(JAVA_LONG, JAVA_LONG, ADDRESS, ADDRESS, ADDRESS));
            begin = h(l, "engram_region_begin", st(JAVA_LONG, ADDRESS));
            commit = h(l, "engram_region_commit", st(JAVA_LONG));
            abort = h(l, "engram_region_abort", st(JAVA_LONG));
            log = h(l, "engram_region_log", st(JAVA_LONG, JAVA_LONG, JAVA_LONG));
            alloc = h(l, "engram_alloc", st(JAVA_LONG, JAVA_INT, ADDRESS));
            allocArray = h(l, "engram_alloc_array", st(JAVA_LONG, JAVA_INT, JAVA_LONG, ADDRESS));
            free = h(l, "engram_free", st(JAVA_LONG, JAVA_LONG));
            rootSet = h(l, "engram_root_set", st(JAVA_LONG, ADDRESS, JAVA_LONG, JAVA_INT, JAVA_INT));
            rootGet = h(l, "engram_root_get", st(JAVA_LONG, ADDRESS, ADDRESS));
            abandon = h(l, "engram_pool_abandon", st(JAVA_LONG));
            tracerNew = h(l, "engram_tracer_new", st(ADDRESS));
            tracerStart = h(l, "engram_tracer_start", st(JAVA_LONG));
            tracerStop = h(l, "engram_tracer_stop", st(JAVA_LONG, ADDRESS));
            tracerFree = h(l, "engram_tracer_free", st(JAVA_LONG));
            explore = h(l, "engram_explore", st(JAVA_LONG, ADDRESS, ADDRESS, ADDRESS, ADDRESS));
        }

        private static FunctionDescriptor st(MemoryLayout... args) {
            return FunctionDescriptor.of(JAVA_INT, args);
        }

        private static MethodHandle h(SymbolLookup l, String name, FunctionDescriptor d) {
            MemorySegment s = l.find(name).orElseThrow(() -> new EngramException(Code.IO,
                    "libengram_ffi has no symbol " + name + " (an older library?)"));
            return LINKER.downcallHandle(s, d);
        }
    }

    /**
     * The engine library: {@code -Dengram.lib}, {@code $ENGRAM_LIB}, or
     * {@code target/release/libengram_ffi.so} in the working directory or
     * a parent. Null if none is found.
     */
    public static Path findLibrary() {
        String p = System.getProperty("engram.lib", System.getenv("ENGRAM_LIB"));
        if (p != null && !p.isEmpty()) {
            return Path.of(p);
        }
        for (Path d = Path.of("").toAbsolutePath(); d != null; d = d.getParent()) {
            Path c = d.resolve("target/release/libengram_ffi.so");
            if (Files.exists(c)) {
                return c;
            }
        }
        return null;
    }

    private static Lib lib() {
        Lib l = lib;
        if (l == null) {
            synchronized (EngineHeap.class) {
                if (lib == null) {
                    Path p = findLibrary();
                    if (p == null || !Files.exists(p)) {
                        throw new EngramException(Code.IO, "libengram_ffi.so not found (" + p + "): build it with "
                                + "`cargo build -p engram-ffi --release`, or set -Dengram.lib / ENGRAM_LIB");
                    }
                    lib = new Lib(SymbolLookup.libraryLookup(p, Arena.global()));
                }
                l = lib;
            }
        }
        return l;
    }

    private final Lib c;
    private final long pool;
    private final Path path;
    private final MemorySegment mem;
    private final long base;
    private final String report;
    private final ThreadLocal<long[]> region = ThreadLocal.withInitial(() -> new long[1]);
    private final ThreadLocal<MemorySegment> scratch = ThreadLocal.withInitial(() -> Arena.ofAuto().allocate(512, 8));
    private final Map<Integer, String> typeNames = new ConcurrentHashMap<>();
    private final Map<String, Long> roots = new ConcurrentHashMap<>();
    private final int rootType, nameType;
    private volatile boolean closed;
    /** False for a handle lent by the explorer's callback: closing it is the engine's business. */
    private final boolean owned;

    private EngineHeap(Lib c, long pool, Path path, boolean owned) {
        this.c = c;
        this.pool = pool;
        this.path = path;
        this.owned = owned;
        MemorySegment info = scratch.get();
        call(c.info, pool, info);
        base = info.get(JAVA_LONG, 8);
        long max = info.get(JAVA_LONG, 24);
        mem = MemorySegment.ofAddress(base).reinterpret(max);
        report = readReport();
        nameType = registerType(new TypeDesc("java.i8", 1, new int[0], "i8"));
        rootType = registerType(new TypeDesc("java.root", 16, new int[] {0, 8}, "java.root{name,value}"));
        loadRoots();
    }

    /**
     * Opens the pool at {@code path}, creating it if {@code create} and it
     * does not exist. {@code maxSize} bounds its growth (POOL_FULL past it).
     */
    public static EngineHeap open(Path path, long maxSize, Durability d, boolean create) {
        return open(path, maxSize, d, create, 0);
    }

    /** As {@link #open}, recording into {@code tracer} (a handle from {@link Explorer}) in TRACE mode. */
    public static EngineHeap open(Path path, long maxSize, Durability d, boolean create, long tracer) {
        Lib c = lib();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment p = a.allocateFrom(path.toString());
            MemorySegment layout = a.allocateFrom("engram-java");
            MemorySegment out = a.allocate(JAVA_LONG);
            if (create) {
                MemorySegment opts = a.allocate(40, 8);
                checkStatic(c, invoke(c.createInit, opts));
                opts.set(ADDRESS, 0, layout);
                opts.set(JAVA_LONG, 8, d == Durability.TRACE ? 0 : Math.min(16L << 20, maxSize));
                opts.set(JAVA_LONG, 16, maxSize);
                opts.set(JAVA_INT, 24, code(d));
                opts.set(JAVA_LONG, 32, tracer);
                checkStatic(c, invoke(c.openOrCreate, p, opts, out, a.allocate(JAVA_INT)));
            } else {
                MemorySegment opts = a.allocate(32, 8);
                checkStatic(c, invoke(c.openInit, opts));
                opts.set(ADDRESS, 0, layout);
                opts.set(JAVA_INT, 8, code(d));
                opts.set(JAVA_LONG, 24, tracer);
                checkStatic(c, invoke(c.open, p, opts, out));
            }
            long handle = out.get(JAVA_LONG, 0);
            try {
                return new EngineHeap(c, handle, path, true);
            } catch (RuntimeException e) {
                invoke(c.close, handle);
                throw e;
            }
        }
    }

    private static int code(Durability d) {
        return switch (d) {
            case AUTO -> 0;
            case PMEM -> 1;
            case MSYNC -> 2;
            case PROCESS -> 3;
            case TRACE -> 4;
            case WAL -> 5;
        };
    }

    // ---- calls --------------------------------------------------------

    static int invoke(MethodHandle h, Object... args) {
        try {
            return (int) h.invokeWithArguments(args);
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new EngramException(Code.INTERNAL, "FFM call failed: " + t, t);
        }
    }

    private void check(Lib c, int status) {
        if (status == 0) {
            return;
        }
        if (closed) {
            throw new EngramException(Code.CLOSED, "pool " + path + " is closed");
        }
        fail(c, status);
    }

    private static void checkStatic(Lib c, int status) {
        if (status != 0) {
            fail(c, status);
        }
    }

    private static void fail(Lib c, int status) {
        String msg;
        try {
            MemorySegment m = (MemorySegment) c.lastError.invoke();
            msg = m.equals(MemorySegment.NULL) ? "" : m.reinterpret(Integer.MAX_VALUE).getString(0);
        } catch (Throwable t) {
            msg = "(no message: " + t + ")";
        }
        if (status == Code.POOL_FULL.value()) {
            throw new PoolFullException(msg);
        }
        throw new EngramException(Code.of(status), msg);
    }

    private void call(MethodHandle h, Object... args) {
        if (closed) {
            throw new EngramException(Code.CLOSED, "pool " + path + " is closed");
        }
        check(c, invoke(h, args));
    }

    // ---- regions ------------------------------------------------------

    @Override
    public void begin() {
        long[] r = region.get();
        if (r[0] != 0) {
            throw new EngramException(Code.BUSY, "a region is already open on this thread");
        }
        MemorySegment out = scratch.get();
        call(c.begin, pool, out);
        r[0] = out.get(JAVA_LONG, 0);
    }

    private long current() {
        long h = region.get()[0];
        if (h == 0) {
            throw new EngramException(Code.REGION_ENDED, "no region is open on this thread");
        }
        return h;
    }

    @Override
    public void log(long addr, long len) {
        long h = current();
        int st;
        try {
            st = (int) c.log.invokeExact(h, addr, len);
        } catch (Throwable t) {
            throw failed(t);
        }
        check(c, st);
    }

    private static RuntimeException failed(Throwable t) {
        if (t instanceof Error e) {
            throw e;
        }
        return t instanceof RuntimeException r ? r : new EngramException(Code.INTERNAL, "FFM call failed: " + t, t);
    }

    private static final java.util.concurrent.atomic.AtomicLong COMMITS = new java.util.concurrent.atomic.AtomicLong();
    private static final java.util.concurrent.atomic.AtomicLong FENCES = new java.util.concurrent.atomic.AtomicLong();

    /** Region commits in this JVM, over every pool (for tests counting what a change costs). Not an API. */
    public static long commits() {
        return COMMITS.get();
    }

    /** Calls of {@code persist} and {@code fence} (each a durability point) in this JVM. Not an API. */
    public static long fences() {
        return FENCES.get();
    }

    @Override
    public void commit() {
        long h = current();
        region.get()[0] = 0;
        COMMITS.incrementAndGet();
        call(c.commit, h);
    }

    @Override
    public void abort() {
        long h = current();
        region.get()[0] = 0;
        call(c.abort, h);
    }

    /** Runs {@code op} with the thread's region, or a region of its own. */
    private long inRegion(java.util.function.LongUnaryOperator op) {
        long h = region.get()[0];
        if (h != 0) {
            return op.applyAsLong(h);
        }
        begin();
        long out;
        try {
            out = op.applyAsLong(region.get()[0]);
        } catch (RuntimeException e) {
            abort();
            throw e;
        }
        commit();
        return out;
    }

    // ---- types --------------------------------------------------------

    @Override
    public int registerType(TypeDesc d) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment desc = a.allocate(40, 8);
            desc.set(ADDRESS, 0, a.allocateFrom(d.name()));
            desc.set(JAVA_LONG, 8, d.size());
            desc.set(JAVA_INT, 16, (int) Math.min(8, Long.highestOneBit(d.size())));
            desc.set(JAVA_INT, 20, d.ptrOffsets().length);
            desc.set(ADDRESS, 24, d.ptrOffsets().length == 0 ? MemorySegment.NULL : a.allocateFrom(JAVA_INT, d.ptrOffsets()));
            desc.set(ADDRESS, 32, a.allocateFrom(d.signature()));
            MemorySegment out = a.allocate(JAVA_INT);
            call(c.typeRegister, pool, desc, out);
            int id = out.get(JAVA_INT, 0);
            typeNames.put(id, d.name());
            return id;
        }
    }

    @Override
    public String typeName(int typeId) {
        String n = typeNames.get(typeId);
        if (n != null) {
            return n;
        }
        try (Arena a = Arena.ofConfined()) {
            MemorySegment name = a.allocate(512);
            call(c.typeInfo, pool, typeId, a.allocate(JAVA_LONG), a.allocate(JAVA_INT), a.allocate(JAVA_LONG), name, 512L);
            n = name.getString(0);
            typeNames.put(typeId, n);
            return n;
        }
    }

    // ---- allocation ---------------------------------------------------

    @Override
    public long alloc(int typeId) {
        return inRegion(h -> {
            MemorySegment out = scratch.get();
            call(c.alloc, h, typeId, out);
            return out.get(JAVA_LONG, 0);
        });
    }

    @Override
    public long allocArray(int typeId, long count) {
        return inRegion(h -> {
            MemorySegment out = scratch.get();
            call(c.allocArray, h, typeId, count, out);
            return out.get(JAVA_LONG, 0);
        });
    }

    @Override
    public void free(long addr) {
        inRegion(h -> {
            call(c.free, h, addr);
            return 0;
        });
    }

    @Override
    public void sweep(LongPredicate live) {
        call(c.collect, pool, MemorySegment.NULL);
    }

    @Override
    public void validate(long addr, long len) {
        MemorySegment s = scratch.get();
        call(c.objectInfo, pool, addr, s, s.asSlice(8), s.asSlice(16));
    }

    // ---- memory -------------------------------------------------------

    private long off(long addr, long len) {
        long o = addr - base;
        if (closed || o < 0 || len < 0 || o + len > mem.byteSize()) {
            throw new EngramException(closed ? Code.CLOSED : Code.BAD_POINTER,
                    "range [" + addr + ", +" + len + ") is outside the pool");
        }
        return o;
    }

    @Override
    public long getLong(long addr) {
        return mem.get(JAVA_LONG, off(addr, 8));
    }

    @Override
    public void putLong(long addr, long value) {
        mem.set(JAVA_LONG, off(addr, 8), value);
    }

    @Override
    public void write(long addr, MemorySegment src) {
        MemorySegment.copy(src, 0, mem, off(addr, src.byteSize()), src.byteSize());
    }

    @Override
    public void read(long addr, MemorySegment dst) {
        MemorySegment.copy(mem, off(addr, dst.byteSize()), dst, 0, dst.byteSize());
    }

    @Override
    public void flush(long addr, long len) {
        int st;
        try {
            st = (int) c.flush.invokeExact(pool, addr, len);
        } catch (Throwable t) {
            throw failed(t);
        }
        check(c, st);
    }

    @Override
    public void fence() {
        FENCES.incrementAndGet();
        int st;
        try {
            st = (int) c.fence.invokeExact(pool);
        } catch (Throwable t) {
            throw failed(t);
        }
        check(c, st);
    }

    @Override
    public void persist(long addr, long len) {
        FENCES.incrementAndGet();
        int st;
        try {
            st = (int) c.persist.invokeExact(pool, addr, len);
        } catch (Throwable t) {
            throw failed(t);
        }
        check(c, st);
    }

    // ---- roots --------------------------------------------------------

    private static String engineName(String name) {
        if (name.getBytes(StandardCharsets.UTF_8).length <= 63) {
            return name;
        }
        long h = 0xcbf29ce484222325L;
        for (byte b : name.getBytes(StandardCharsets.UTF_8)) {
            h = (h ^ (b & 0xff)) * 0x100000001b3L;
        }
        return "j:" + Long.toHexString(h);
    }

    private void loadRoots() {
        try (Arena a = Arena.ofConfined()) {
            int cap = 4096;
            MemorySegment list = a.allocate(80L * cap, 8);
            MemorySegment count = a.allocate(JAVA_LONG);
            call(c.rootsList, pool, list, (long) cap, count);
            long n = Math.min(cap, count.get(JAVA_LONG, 0));
            for (long i = 0; i < n; i++) {
                long e = i * 80;
                long nr = list.get(JAVA_LONG, e);
                if (list.get(JAVA_INT, e + 8) != rootType || nr == 0) {
                    continue; // not a Java root
                }
                validate(nr, 16);
                long name = getLong(nr);
                validate(name, 1);
                MemorySegment info = scratch.get();
                call(c.objectInfo, pool, name, info, info.asSlice(8), info.asSlice(16));
                long len = info.get(JAVA_LONG, 8);
                byte[] b = new byte[(int) Math.min(len, 4096)];
                read(name, MemorySegment.ofArray(b));
                roots.put(new String(b, StandardCharsets.UTF_8), nr);
            }
        }
    }

    @Override
    public void setRoot(String name, long addr) {
        inRegion(h -> {
            Long nr = roots.get(name);
            if (nr != null && engineRoot(h, name) == nr) {
                log(nr + 8, 8);
                putLong(nr + 8, addr);
                return 0;
            }
            byte[] b = name.getBytes(StandardCharsets.UTF_8);
            long rec = alloc(rootType);
            long str = allocArray(nameType, b.length);
            write(str, MemorySegment.ofArray(b));
            putLong(rec, str);
            putLong(rec + 8, addr);
            persist(str, b.length);
            persist(rec, 16);
            try (Arena a = Arena.ofConfined()) {
                call(c.rootSet, h, a.allocateFrom(engineName(name)), rec, rootType, 0);
            }
            roots.put(name, rec);
            return 0;
        });
    }

    private long engineRoot(long h, String name) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(24, 8);
            call(c.rootGet, h, a.allocateFrom(engineName(name)), out);
            return out.get(JAVA_INT, 0) == 0 ? 0 : out.get(JAVA_LONG, 8);
        }
    }

    @Override
    public long root(String name) {
        Long nr = roots.get(name);
        return nr == null ? 0 : getLong(nr + 8);
    }

    @Override
    public List<String> rootNames() {
        return new ArrayList<>(roots.keySet());
    }

    // ---- lifecycle ----------------------------------------------------

    private String readReport() {
        MemorySegment r = scratch.get();
        call(c.openReport, pool, r);
        boolean clean = r.get(JAVA_INT, 0) != 0;
        return (clean ? "clean" : "recovered") + ", " + r.get(JAVA_LONG, 8) + " undo entries rolled back"
                + (r.get(JAVA_INT, 24) != 0 ? ", recovery GC found " + r.get(JAVA_LONG, 32) + " live objects" : "");
    }

    @Override
    public String openReport() {
        return report;
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        if (owned) {
            checkStatic(c, invoke(c.close, pool));
        }
    }

    /** Drops the pool as a crash would (no clean close): the next open recovers it. */
    public void abandon() {
        if (closed) {
            return;
        }
        closed = true;
        if (owned) {
            checkStatic(c, invoke(c.abandon, pool));
        }
    }

    /** A heap over a pool handle the engine lends (the explorer's callback); closing it does nothing. */
    static EngineHeap borrow(long handle) {
        return new EngineHeap(lib(), handle, Path.of("(crash image)"), false);
    }

    static Lib library() {
        return lib();
    }

    static void checked(int status) {
        checkStatic(lib(), status);
    }

    /** Engine figures (live objects, bytes) for tests and reports. */
    public long[] info() {
        MemorySegment info = scratch.get();
        call(c.info, pool, info);
        return new long[] {info.get(JAVA_LONG, 32), info.get(JAVA_LONG, 40), info.get(JAVA_LONG, 16)};
    }
}
