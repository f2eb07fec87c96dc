package io.engram.heap;

import io.engram.EngramException;
import io.engram.EngramException.Code;
import io.engram.PoolFullException;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.LongPredicate;
import java.util.zip.CRC32C;

/**
 * A pool file mapped with FFM and managed in Java: the TEMPORARY back end
 * of the {@link Heap} seam, used until the engine's C ABI is merged (then
 * the FFM binding to the engine replaces it and this file goes).
 *
 * <p>Format (all little-endian, addresses are file offsets, 0 is null):
 * <pre>
 *   0       header: magic "ENGRAMJ1", version u32, size u64, layout[64],
 *           crc32c u32 of bytes [0,88); then top u64 (bump pointer), clean u64
 *   4096    roots: 128 x 256 bytes = name (UTF-8, NUL-padded, 248) + address u64
 *   36864   types: 1024 x 256 bytes = used u32, name length u32, layout hash u64,
 *           size u64, name (232)
 *   299008  undo logs: 16 slots x 256 KiB = generation u64 at +0, entries from +64:
 *           address u64, length u64, generation u64, crc32c u64, data (8-padded)
 *   4493312 blocks: size u64 (with this 16-byte header), type id u32 (0 = free), pad,
 *           then the payload (the address handed out)
 * </pre>
 *
 * <p>Crash behaviour: a block header is persisted before the bump pointer
 * that covers it; a log entry is persisted before the range it saves is
 * changed, and it is valid only while its generation equals the slot's and
 * its checksum matches, so a torn entry is never replayed; commit persists
 * the logged ranges, then bumps the slot's generation (one 8-byte store).
 * Opening rolls back every slot's valid entries (newest first). Blocks
 * nobody links are found by {@link #sweep} after the front end walked the
 * graph. Roots and types change inside an internal region.
 */
public final class MappedHeap implements Heap {
    static final long MAGIC = 0x314a4d4152474e45L; // "ENGRAMJ1"
    static final int VERSION = 1;
    static final long ROOTS = 4096, ROOT_ENTRY = 256, MAX_ROOTS = 128;
    static final long TYPES = ROOTS + ROOT_ENTRY * MAX_ROOTS, TYPE_ENTRY = 256, MAX_TYPES = 1024;
    static final long LOGS = TYPES + TYPE_ENTRY * MAX_TYPES, LOG_SLOT = 256 * 1024, LOG_SLOTS = 16;
    static final long BLOCKS = LOGS + LOG_SLOT * LOG_SLOTS;
    static final long OFF_TOP = 96, OFF_CLEAN = 104, CRC_END = 88;
    /** Smallest pool: the metadata plus 1 MiB of blocks. */
    public static final long MIN_SIZE = BLOCKS + (1 << 20);

    private final Path path;
    private final FileChannel channel;
    private final FileLock lock;
    private final Arena arena;
    private final MemorySegment seg;
    private final Durability durability;
    private final long size;
    private final String report;
    // Guards the allocator (top, free lists) and the type and root tables.
    private final Object allocLock = new Object();
    private final Map<Long, ArrayDeque<Long>> freeBySize = new HashMap<>();
    private final List<TypeDesc> types = new ArrayList<>();
    private final ArrayDeque<Integer> freeSlots = new ArrayDeque<>();
    private final ThreadLocal<LogRegion> region = new ThreadLocal<>();
    private volatile boolean closed;

    /** One thread's open region: its log slot and where the next entry goes. */
    private static final class LogRegion {
        final int slot;
        long next;
        final List<long[]> ranges = new ArrayList<>();
        /** Blocks allocated in the region (freed by abort) and freed in it (freed at commit). */
        final List<Long> allocs = new ArrayList<>(), frees = new ArrayList<>();

        LogRegion(int slot) {
            this.slot = slot;
            this.next = LOGS + slot * LOG_SLOT + 64;
        }
    }

    private MappedHeap(Path path, FileChannel ch, FileLock lock, long size, Durability d, boolean created) {
        this.path = path;
        this.channel = ch;
        this.lock = lock;
        this.size = size;
        this.durability = d;
        this.arena = Arena.ofShared();
        try {
            this.seg = ch.map(FileChannel.MapMode.READ_WRITE, 0, size, arena);
        } catch (IOException e) {
            arena.close();
            throw io("map " + path, e);
        }
        for (int i = 0; i < LOG_SLOTS; i++) {
            freeSlots.add(i);
        }
        if (created) {
            writeHeader(size);
        }
        validateHeader();
        boolean clean = seg.get(ValueLayout.JAVA_LONG, OFF_CLEAN) == 1;
        long undone = recoverLogs();
        loadTypes();
        setClean(0);
        report = (created ? "created" : clean ? "clean" : "recovered") + ", " + undone + " undo entries rolled back";
    }

    /**
     * Opens the pool at {@code path}, creating it with {@code size} bytes
     * (sparse) if it does not exist. A file that is not such a pool is a
     * typed error (NOT_A_POOL, TRUNCATED, BAD_CHECKSUM, UNSUPPORTED_VERSION,
     * WRONG_LAYOUT); a pool open elsewhere is LOCKED.
     */
    public static MappedHeap open(Path path, long size, Durability d, boolean create) {
        boolean exists = Files.exists(path);
        if (!exists && !create) {
            throw new EngramException(Code.IO, "no pool at " + path);
        }
        if (!exists && size < MIN_SIZE) {
            throw new EngramException(Code.INVALID_ARGUMENT, "pool size " + size + " < " + MIN_SIZE);
        }
        FileChannel ch;
        try {
            ch = FileChannel.open(path, StandardOpenOption.CREATE, StandardOpenOption.READ, StandardOpenOption.WRITE);
        } catch (IOException e) {
            throw io("open " + path, e);
        }
        try {
            FileLock l = lockFile(ch, path);
            long len = ch.size();
            boolean created = len == 0;
            if (created) {
                ch.truncate(size);
                ch.write(java.nio.ByteBuffer.allocate(1), size - 1);
                len = size;
            } else if (len < BLOCKS) {
                throw new EngramException(len < 8 ? Code.NOT_A_POOL : Code.TRUNCATED, path + " is " + len + " bytes");
            }
            return new MappedHeap(path, ch, l, len, d, created);
        } catch (IOException e) {
            closeQuietly(ch);
            throw io("open " + path, e);
        } catch (RuntimeException e) {
            closeQuietly(ch);
            throw e;
        }
    }

    private static FileLock lockFile(FileChannel ch, Path path) throws IOException {
        try {
            FileLock l = ch.tryLock();
            if (l == null) {
                throw new EngramException(Code.LOCKED, path + " is open in another process");
            }
            return l;
        } catch (OverlappingFileLockException e) {
            throw new EngramException(Code.LOCKED, path + " is already open in this process");
        }
    }

    private static void closeQuietly(FileChannel ch) {
        try {
            ch.close();
        } catch (IOException ignored) {
            // the open failed already; that error is the one reported
        }
    }

    private static EngramException io(String what, IOException e) {
        return new EngramException(Code.IO, what + ": " + e.getMessage(), e);
    }

    // ---- header -------------------------------------------------------

    private void writeHeader(long size) {
        seg.set(ValueLayout.JAVA_LONG, 0, MAGIC);
        seg.set(ValueLayout.JAVA_INT, 8, VERSION);
        seg.set(ValueLayout.JAVA_LONG, 16, size);
        byte[] layout = "engram-java".getBytes(StandardCharsets.UTF_8);
        MemorySegment.copy(MemorySegment.ofArray(layout), 0, seg, 24, layout.length);
        seg.set(ValueLayout.JAVA_INT, CRC_END, headerCrc());
        seg.set(ValueLayout.JAVA_LONG, OFF_TOP, BLOCKS);
        persist(0, 4096);
    }

    private int headerCrc() {
        CRC32C crc = new CRC32C();
        crc.update(seg.asSlice(0, CRC_END).asByteBuffer());
        return (int) crc.getValue();
    }

    private void validateHeader() {
        if (seg.get(ValueLayout.JAVA_LONG, 0) != MAGIC) {
            throw new EngramException(Code.NOT_A_POOL, path + " is not an Engram Java pool");
        }
        if (seg.get(ValueLayout.JAVA_INT, CRC_END) != headerCrc()) {
            throw new EngramException(Code.BAD_CHECKSUM, path + ": header checksum mismatch");
        }
        int v = seg.get(ValueLayout.JAVA_INT, 8);
        if (v != VERSION) {
            throw new EngramException(Code.UNSUPPORTED_VERSION, path + ": format version " + v);
        }
        long recorded = seg.get(ValueLayout.JAVA_LONG, 16);
        if (recorded != size) {
            throw new EngramException(Code.TRUNCATED, path + ": " + size + " bytes, header says " + recorded);
        }
        long top = seg.get(ValueLayout.JAVA_LONG, OFF_TOP);
        if (top < BLOCKS || top > size) {
            throw new EngramException(Code.CORRUPT, path + ": allocation top " + top + " outside the pool");
        }
    }

    private void setClean(long v) {
        seg.set(ValueLayout.JAVA_LONG, OFF_CLEAN, v);
        persist(OFF_CLEAN, 8);
    }

    // ---- undo logs ----------------------------------------------------

    private long recoverLogs() {
        long undone = 0;
        for (int s = 0; s < LOG_SLOTS; s++) {
            long base = LOGS + s * LOG_SLOT;
            long gen = seg.get(ValueLayout.JAVA_LONG, base);
            List<long[]> entries = validEntries(base, gen);
            for (int i = entries.size() - 1; i >= 0; i--) {
                long[] e = entries.get(i); // {entry data offset, addr, len}
                MemorySegment.copy(seg, e[0], seg, e[1], e[2]);
                flush(e[1], e[2]);
            }
            undone += entries.size();
            fence();
            seg.set(ValueLayout.JAVA_LONG, base, gen + 1);
            persist(base, 8);
        }
        return undone;
    }

    private List<long[]> validEntries(long base, long gen) {
        List<long[]> out = new ArrayList<>();
        long p = base + 64, end = base + LOG_SLOT;
        while (p + 32 <= end) {
            long addr = seg.get(ValueLayout.JAVA_LONG, p), len = seg.get(ValueLayout.JAVA_LONG, p + 8);
            if (seg.get(ValueLayout.JAVA_LONG, p + 16) != gen || len <= 0 || len > end - p - 32
                    || addr < ROOTS || addr + len > size || entryCrc(p, len) != seg.get(ValueLayout.JAVA_LONG, p + 24)) {
                break;
            }
            out.add(new long[] {p + 32, addr, len});
            p += 32 + pad8(len);
        }
        return out;
    }

    private long entryCrc(long p, long len) {
        CRC32C crc = new CRC32C();
        crc.update(seg.asSlice(p, 24).asByteBuffer());
        crc.update(seg.asSlice(p + 32, len).asByteBuffer());
        return crc.getValue();
    }

    private static long pad8(long n) {
        return (n + 7) & ~7L;
    }

    @Override
    public void begin() {
        checkOpen();
        if (region.get() != null) {
            throw new EngramException(Code.BUSY, "a region is already open on this thread");
        }
        int slot;
        synchronized (freeSlots) {
            while (freeSlots.isEmpty()) {
                try {
                    freeSlots.wait();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new EngramException(Code.ABORTED, "interrupted waiting for a log slot");
                }
            }
            slot = freeSlots.poll();
        }
        region.set(new LogRegion(slot));
    }

    private LogRegion current() {
        LogRegion r = region.get();
        if (r == null) {
            throw new EngramException(Code.REGION_ENDED, "no region is open on this thread");
        }
        return r;
    }

    @Override
    public void log(long addr, long len) {
        LogRegion r = current();
        long base = LOGS + r.slot * LOG_SLOT;
        if (r.next + 32 + pad8(len) > base + LOG_SLOT) {
            throw new EngramException(Code.TABLE_FULL, "undo log full (" + LOG_SLOT + " bytes per region)");
        }
        checkRange(addr, len);
        long p = r.next;
        // 1. the entry with its data and checksum; the generation marks it as this region's
        seg.set(ValueLayout.JAVA_LONG, p, addr);
        seg.set(ValueLayout.JAVA_LONG, p + 8, len);
        seg.set(ValueLayout.JAVA_LONG, p + 16, seg.get(ValueLayout.JAVA_LONG, base));
        MemorySegment.copy(seg, addr, seg, p + 32, len);
        seg.set(ValueLayout.JAVA_LONG, p + 24, entryCrc(p, len));
        // 2. durable before the caller changes the range: recovery can always undo it
        persist(p, 32 + len);
        r.next = p + 32 + pad8(len);
        r.ranges.add(new long[] {addr, len});
    }

    @Override
    public void commit() {
        LogRegion r = current();
        // 1. everything the region changed becomes durable
        for (long[] range : r.ranges) {
            flush(range[0], range[1]);
        }
        fence();
        // 2. one 8-byte store invalidates every entry: the region is committed
        endRegion(r);
        // 3. what it freed becomes free (a crash before this leaks them until the next sweep)
        for (long a : r.frees) {
            freeNow(a);
        }
    }

    @Override
    public void abort() {
        LogRegion r = current();
        long base = LOGS + r.slot * LOG_SLOT;
        List<long[]> entries = validEntries(base, seg.get(ValueLayout.JAVA_LONG, base));
        for (int i = entries.size() - 1; i >= 0; i--) {
            long[] e = entries.get(i);
            MemorySegment.copy(seg, e[0], seg, e[1], e[2]);
            flush(e[1], e[2]);
        }
        fence();
        endRegion(r);
        for (long a : r.allocs) {
            freeNow(a);
        }
    }

    private void endRegion(LogRegion r) {
        long base = LOGS + r.slot * LOG_SLOT;
        seg.set(ValueLayout.JAVA_LONG, base, seg.get(ValueLayout.JAVA_LONG, base) + 1);
        persist(base, 8);
        region.remove();
        synchronized (freeSlots) {
            freeSlots.add(r.slot);
            freeSlots.notifyAll();
        }
    }

    /** Runs {@code body} in a region of its own unless the thread already has one. */
    private void internalRegion(Runnable body) {
        if (region.get() != null) {
            body.run();
            return;
        }
        begin();
        try {
            body.run();
        } catch (RuntimeException e) {
            abort();
            throw e;
        }
        commit();
    }

    // ---- types --------------------------------------------------------

    private void loadTypes() {
        for (int i = 0; i < MAX_TYPES; i++) {
            long e = TYPES + i * TYPE_ENTRY;
            if (seg.get(ValueLayout.JAVA_INT, e) == 0) {
                break;
            }
            int n = seg.get(ValueLayout.JAVA_INT, e + 4);
            if (n <= 0 || n > 232) {
                throw new EngramException(Code.CORRUPT, path + ": type entry " + i + " has a name of " + n + " bytes");
            }
            String name = new String(seg.asSlice(e + 24, n).toArray(ValueLayout.JAVA_BYTE), StandardCharsets.UTF_8);
            types.add(new TypeDesc(name, seg.get(ValueLayout.JAVA_LONG, e + 16), null,
                    Long.toHexString(seg.get(ValueLayout.JAVA_LONG, e + 8))));
        }
    }

    /** The layout hash of a signature (FNV-1a 64 over name and signature). */
    static long layoutHash(TypeDesc d) {
        long h = 0xcbf29ce484222325L;
        for (byte b : (d.name() + "\n" + d.size() + "\n" + d.signature()).getBytes(StandardCharsets.UTF_8)) {
            h = (h ^ (b & 0xff)) * 0x100000001b3L;
        }
        return h;
    }

    @Override
    public int registerType(TypeDesc d) {
        checkOpen();
        byte[] name = d.name().getBytes(StandardCharsets.UTF_8);
        if (name.length == 0 || name.length > 232 || d.size() <= 0) {
            throw new EngramException(Code.INVALID_ARGUMENT, "type name '" + d.name() + "' or size " + d.size());
        }
        String hash = Long.toHexString(layoutHash(d));
        synchronized (allocLock) {
            for (int i = 0; i < types.size(); i++) {
                TypeDesc t = types.get(i);
                if (t.name().equals(d.name())) {
                    if (!t.signature().equals(hash)) {
                        throw new EngramException(Code.LAYOUT_MISMATCH, "type " + d.name()
                                + " changed since the pool was written (layout hash " + t.signature() + ", now " + hash
                                + "; now: " + d.signature() + ")");
                    }
                    return i + 1;
                }
            }
            if (types.size() == MAX_TYPES) {
                throw new EngramException(Code.TABLE_FULL, "more than " + MAX_TYPES + " types");
            }
            long e = TYPES + types.size() * TYPE_ENTRY;
            internalRegion(() -> {
                log(e, TYPE_ENTRY);
                seg.set(ValueLayout.JAVA_INT, e + 4, name.length);
                seg.set(ValueLayout.JAVA_LONG, e + 8, layoutHash(d));
                seg.set(ValueLayout.JAVA_LONG, e + 16, d.size());
                MemorySegment.copy(MemorySegment.ofArray(name), 0, seg, e + 24, name.length);
                seg.set(ValueLayout.JAVA_INT, e, 1);
            });
            types.add(new TypeDesc(d.name(), d.size(), null, hash));
            return types.size();
        }
    }

    @Override
    public String typeName(int typeId) {
        synchronized (allocLock) {
            if (typeId < 1 || typeId > types.size()) {
                throw new EngramException(Code.CORRUPT, path + ": unknown type id " + typeId);
            }
            return types.get(typeId - 1).name();
        }
    }

    private long typeSize(int typeId) {
        synchronized (allocLock) {
            if (typeId < 1 || typeId > types.size()) {
                throw new EngramException(Code.INVALID_ARGUMENT, "unknown type id " + typeId);
            }
            return types.get(typeId - 1).size();
        }
    }

    // ---- allocation ---------------------------------------------------

    @Override
    public long alloc(int typeId) {
        return allocBytes(typeId, typeSize(typeId));
    }

    @Override
    public long allocArray(int typeId, long count) {
        long s = typeSize(typeId);
        if (count < 0 || count > (size / Math.max(1, s))) {
            throw new PoolFullException("array of " + count + " x " + s + " bytes does not fit a " + size + "-byte pool");
        }
        return allocBytes(typeId, Math.max(8, s * count));
    }

    private long allocBytes(int typeId, long payload) {
        long a = allocBlock(typeId, payload);
        LogRegion r = region.get();
        if (r != null) {
            r.allocs.add(a);
        }
        return a;
    }

    private long allocBlock(int typeId, long payload) {
        checkOpen();
        long block = 16 + ((payload + 15) & ~15L);
        synchronized (allocLock) {
            ArrayDeque<Long> free = freeBySize.get(block);
            if (free != null && !free.isEmpty()) {
                long b = free.poll();
                seg.asSlice(b + 16, block - 16).fill((byte) 0);
                seg.set(ValueLayout.JAVA_INT, b + 8, typeId);
                persist(b, block);
                return b + 16;
            }
            long top = seg.get(ValueLayout.JAVA_LONG, OFF_TOP);
            if (top + block > size) {
                throw new PoolFullException("pool " + path + " is full (" + size + " bytes; " + block + " more asked)");
            }
            // 1. the block header, durable before the top that covers it
            seg.set(ValueLayout.JAVA_LONG, top, block);
            seg.set(ValueLayout.JAVA_INT, top + 8, typeId);
            persist(top, 16);
            // 2. the new top
            seg.set(ValueLayout.JAVA_LONG, OFF_TOP, top + block);
            persist(OFF_TOP, 8);
            return top + 16;
        }
    }

    /** Frees now, or at commit when called inside a region (an abort then keeps the block). */
    @Override
    public void free(long addr) {
        checkRange(addr, 8);
        LogRegion r = region.get();
        if (r != null) {
            r.frees.add(addr);
            return;
        }
        freeNow(addr);
    }

    private void freeNow(long addr) {
        long b = addr - 16;
        synchronized (allocLock) {
            if (b < BLOCKS || seg.get(ValueLayout.JAVA_INT, b + 8) == 0) {
                throw new EngramException(Code.BAD_POINTER, "free of " + addr + ": not an allocated block");
            }
            seg.set(ValueLayout.JAVA_INT, b + 8, 0);
            persist(b + 8, 4);
            freeBySize.computeIfAbsent(seg.get(ValueLayout.JAVA_LONG, b), k -> new ArrayDeque<>()).add(b);
        }
    }

    @Override
    public void sweep(LongPredicate live) {
        synchronized (allocLock) {
            freeBySize.clear();
            long top = seg.get(ValueLayout.JAVA_LONG, OFF_TOP);
            for (long b = BLOCKS; b < top; ) {
                long len = seg.get(ValueLayout.JAVA_LONG, b);
                if (len < 16 || (len & 15) != 0 || b + len > top) {
                    throw new EngramException(Code.CORRUPT, path + ": bad block header at " + b);
                }
                if (seg.get(ValueLayout.JAVA_INT, b + 8) != 0 && !live.test(b + 16)) {
                    seg.set(ValueLayout.JAVA_INT, b + 8, 0);
                    flush(b + 8, 4);
                }
                if (seg.get(ValueLayout.JAVA_INT, b + 8) == 0) {
                    freeBySize.computeIfAbsent(len, k -> new ArrayDeque<>()).add(b);
                }
                b += len;
            }
            fence();
        }
    }

    // ---- memory -------------------------------------------------------

    private void checkRange(long addr, long len) {
        checkOpen();
        if (addr < ROOTS || len < 0 || addr + len > size) {
            throw new EngramException(Code.BAD_POINTER, "range [" + addr + ", +" + len + ") is outside the pool");
        }
    }

    @Override
    public long getLong(long addr) {
        checkRange(addr, 8);
        return seg.get(ValueLayout.JAVA_LONG, addr);
    }

    @Override
    public void putLong(long addr, long value) {
        checkRange(addr, 8);
        seg.set(ValueLayout.JAVA_LONG, addr, value);
    }

    @Override
    public void write(long addr, MemorySegment src) {
        checkRange(addr, src.byteSize());
        MemorySegment.copy(src, 0, seg, addr, src.byteSize());
    }

    @Override
    public void read(long addr, MemorySegment dst) {
        checkRange(addr, dst.byteSize());
        MemorySegment.copy(seg, addr, dst, 0, dst.byteSize());
    }

    @Override
    public void flush(long addr, long len) {
        if (durability != Durability.PROCESS && len > 0) {
            seg.asSlice(addr, len).force();
        }
    }

    @Override
    public void fence() {
        // msync is synchronous: every flushed range is durable already
    }

    // ---- roots --------------------------------------------------------

    private String rootName(long e) {
        int n = 0;
        while (n < 248 && seg.get(ValueLayout.JAVA_BYTE, e + n) != 0) {
            n++;
        }
        return new String(seg.asSlice(e, n).toArray(ValueLayout.JAVA_BYTE), StandardCharsets.UTF_8);
    }

    private long findRoot(String name) {
        for (long i = 0; i < MAX_ROOTS; i++) {
            long e = ROOTS + i * ROOT_ENTRY;
            if (seg.get(ValueLayout.JAVA_BYTE, e) != 0 && rootName(e).equals(name)) {
                return e;
            }
        }
        return -1;
    }

    @Override
    public void setRoot(String name, long addr) {
        checkOpen();
        byte[] n = name.getBytes(StandardCharsets.UTF_8);
        if (n.length == 0 || n.length > 247) {
            throw new EngramException(Code.INVALID_ARGUMENT, "root name '" + name + "'");
        }
        synchronized (allocLock) {
            long e = findRoot(name);
            if (e < 0) {
                for (long i = 0; i < MAX_ROOTS && e < 0; i++) {
                    long c = ROOTS + i * ROOT_ENTRY;
                    e = seg.get(ValueLayout.JAVA_BYTE, c) == 0 ? c : -1;
                }
                if (e < 0) {
                    throw new EngramException(Code.TABLE_FULL, "more than " + MAX_ROOTS + " roots");
                }
            }
            long entry = e;
            internalRegion(() -> {
                log(entry, ROOT_ENTRY);
                seg.asSlice(entry, 248).fill((byte) 0);
                if (addr != 0) {
                    MemorySegment.copy(MemorySegment.ofArray(n), 0, seg, entry, n.length);
                }
                seg.set(ValueLayout.JAVA_LONG, entry + 248, addr);
            });
        }
    }

    @Override
    public long root(String name) {
        synchronized (allocLock) {
            long e = findRoot(name);
            return e < 0 ? 0 : seg.get(ValueLayout.JAVA_LONG, e + 248);
        }
    }

    @Override
    public List<String> rootNames() {
        List<String> out = new ArrayList<>();
        synchronized (allocLock) {
            for (long i = 0; i < MAX_ROOTS; i++) {
                long e = ROOTS + i * ROOT_ENTRY;
                if (seg.get(ValueLayout.JAVA_BYTE, e) != 0) {
                    out.add(rootName(e));
                }
            }
        }
        return out;
    }

    // ---- lifecycle ----------------------------------------------------

    @Override
    public String openReport() {
        return report;
    }

    /** Bytes handed out so far (the bump pointer), for tests and reports. */
    public long used() {
        return seg.get(ValueLayout.JAVA_LONG, OFF_TOP) - BLOCKS;
    }

    private void checkOpen() {
        if (closed) {
            throw new EngramException(Code.CLOSED, "pool " + path + " is closed");
        }
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        setClean(1);
        closed = true;
        arena.close();
        try {
            lock.release();
            channel.close();
        } catch (IOException e) {
            throw io("close " + path, e);
        }
    }
}
