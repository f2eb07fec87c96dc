package io.engram.runtime;

import io.engram.EngramException;
import io.engram.EngramException.Code;
import io.engram.NotPersistableException;
import io.engram.heap.Heap;
import io.engram.runtime.IdentityTable.Img;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.VarHandle;
import java.lang.reflect.Array;
import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.SortedMap;
import java.util.SortedSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Supplier;

/**
 * The persistent graph of one open pool: which Java objects are
 * recoverable (the identity table), how a store makes more of them
 * recoverable (transitive persistence, the paper's Algorithms 3 and 4),
 * and the write-through of every store into their images.
 *
 * <p>Objects stay in the Java heap; each recoverable object has an image in
 * the pool (see {@link JType}) that every instrumented store keeps equal
 * to it. Invariants:
 * <ol>
 * <li>An image that is reachable from a root only points to images that are
 *     durable: a conversion persists the whole closure (one fence) before
 *     the store that links it is written.</li>
 * <li>Outside regions, a store to a recoverable object is durable before the
 *     storing thread goes on (sequential persistency); inside a region it is
 *     undo-logged and durable at commit.</li>
 * <li>When every hook has returned, each recoverable object's image equals
 *     the object: a store that raced with its object's conversion is
 *     re-synchronised by the post-store hook, which takes the object's
 *     stripe lock and rewrites the slot from the field's current value.</li>
 * </ol>
 *
 * <p>Concurrency: conversions are serialised by {@code persistLock}; an
 * object being converted is published (not ready) first, and hooks on a
 * not-ready object wait for the conversion. Image slots are written under
 * a stripe lock of their object.
 *
 * <p>Crash behaviour: a crash during a conversion leaves unlinked images
 * (garbage, swept at the next open); during a store, the old or the new
 * slot value (8-byte atomic); during a region, the heap's undo log.
 */
public final class Graph {
    /** The open pool's graph, or null (then every hook returns at once). */
    static volatile Graph current;

    final Heap heap;
    final IdentityTable table = new IdentityTable();
    private final ReentrantLock persistLock = new ReentrantLock();
    private final AtomicLong conversions = new AtomicLong();
    private final Object[] stripes = new Object[256];
    private final ConcurrentHashMap<Class<?>, JType> types = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<Integer, JType> byId = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<Long, Object> slots = new ConcurrentHashMap<>();
    private static final Object NO_SLOT = new Object();
    final int refElem, i8, i16, i32, i64;
    /** Each thread's region state (depth counts even without a pool, for introspection). */
    static final ThreadLocal<RegionState> REGIONS = ThreadLocal.withInitial(RegionState::new);

    Graph(Heap heap) {
        this.heap = heap;
        for (int i = 0; i < stripes.length; i++) {
            stripes[i] = new Object();
        }
        refElem = heap.registerType(new Heap.TypeDesc("java.ref", 8, new int[] {0}, "ref"));
        i8 = heap.registerType(new Heap.TypeDesc("java.i8", 1, new int[0], "i8"));
        i16 = heap.registerType(new Heap.TypeDesc("java.i16", 2, new int[0], "i16"));
        i32 = heap.registerType(new Heap.TypeDesc("java.i32", 4, new int[0], "i32"));
        i64 = heap.registerType(new Heap.TypeDesc("java.i64", 8, new int[0], "i64"));
    }

    // ---- types and lookups --------------------------------------------

    JType typeOf(Class<?> c, Supplier<String> path) {
        JType t = types.get(c);
        if (t == null) {
            t = JType.of(c, heap, Registry.INSTRUMENTED, path);
            JType prev = types.putIfAbsent(c, t);
            t = prev != null ? prev : t;
            byId.putIfAbsent(t.typeId, t);
            types.putIfAbsent(t.type, t);
        }
        return t;
    }

    JType typeById(int id, ClassLoader loader) {
        JType t = byId.get(id);
        if (t != null) {
            return t;
        }
        String name = heap.typeName(id);
        try {
            Class<?> c = Class.forName(name, false, loader);
            return typeOf(c, () -> "the pool's type " + name);
        } catch (ClassNotFoundException e) {
            throw new EngramException(Code.LAYOUT_MISMATCH, "the pool holds objects of class " + name
                    + ", which this program does not have", e);
        }
    }

    int elemTypeId(char elem) {
        return switch (JType.elemSize(elem)) {
            case 1 -> i8;
            case 2 -> i16;
            case 4 -> i32;
            default -> elem == 'L' || elem == '[' ? refElem : i64;
        };
    }

    Object stripe(Object o) {
        return stripes[System.identityHashCode(o) & (stripes.length - 1)];
    }

    /**
     * Per class: the last graph that published an object of it. The full
     * hooks read this first, so stores to objects of classes with no
     * recoverable instance in this graph skip the identity table. A
     * conversion sets it (a volatile write) before publishing, so the
     * fence-then-check of a racing store still sees either the flag or the
     * store is seen by the conversion. Before that it fails the class's
     * {@link StoreGuards} (the hooks of a class never flagged since the
     * pool opened do not run at all).
     */
    private static final ClassValue<ClassFlag> FLAGS = new ClassValue<>() {
        @Override
        protected ClassFlag computeValue(Class<?> type) {
            return new ClassFlag();
        }
    };

    private static final class ClassFlag {
        volatile Graph graph;
    }

    private void markClass(Object o) {
        ClassFlag f = FLAGS.get(o.getClass());
        if (f.graph != this) {
            if (!StoreGuards.unguarded(o.getClass())) {
                StoreGuards.unguard(List.of(o.getClass())); // store hooks of the class leave their guarded path
            }
            f.graph = this;
        }
    }

    /** Registers an object as recoverable (publication: its class is marked first). */
    void publish(Object o, Img img) {
        markClass(o);
        table.put(o, img);
    }

    /** The image of {@code o} once its conversion finished, or null if it is not recoverable. */
    Img tracked(Object o) {
        if (FLAGS.get(o.getClass()).graph != this) {
            return null;
        }
        Img img = table.get(o);
        if (img != null && !img.ready && !persistLock.isHeldByCurrentThread()) {
            persistLock.lock(); // wait for the conversion that published it
            persistLock.unlock();
            img = table.get(o);
        }
        return img;
    }

    /** Like {@link #tracked}, after a full fence: for the check that follows an untracked store. */
    Img trackedAfterStore(Object o) {
        VarHandle.fullFence();
        return tracked(o);
    }

    /** The slot a field reference names in an object of type {@code t}, or null if not persisted. */
    JType.Slot slot(JType t, int fieldId) {
        long key = ((long) fieldId << 32) | (t.typeId & 0xffffffffL);
        Object s = slots.get(key);
        if (s == null) {
            s = findSlot(t, Registry.field(fieldId));
            slots.put(key, s);
        }
        return s == NO_SLOT ? null : (JType.Slot) s;
    }

    /**
     * The slot a putfield on {@code ref.owner} resolves to in an object of
     * type {@code t}: like the JVM's field resolution, the first class from
     * the owner upwards that declares the name.
     */
    private Object findSlot(JType t, Registry.FieldRef ref) {
        if (t.slots == null || t.slots.length == 0) {
            return NO_SLOT;
        }
        Class<?> k = t.type;
        while (k != null && !k.getName().equals(ref.ownerName())) {
            k = k.getSuperclass();
        }
        for (; k != null; k = k.getSuperclass()) {
            for (JType.Slot s : t.slots) {
                if (s.field().getDeclaringClass() == k && s.field().getName().equals(ref.name())) {
                    return s;
                }
            }
            try {
                k.getDeclaredField(ref.name());
                return NO_SLOT; // declared here but not persisted (transient, @Unrecoverable)
            } catch (NoSuchFieldException e) {
                // declared further up
            }
        }
        return NO_SLOT;
    }

    /** The calling thread's region if it is open on this graph's pool, else null. */
    RegionState region() {
        RegionState r = REGIONS.get();
        return r.depth > 0 && r.graph == this ? r : null;
    }

    // ---- transitive persistence (Algorithms 3 and 4) ------------------

    /**
     * Makes {@code v} and everything it reaches recoverable and durable, and
     * returns its image address (0 for null). {@code path} names where it is
     * being stored, for the error when something in it cannot be persisted;
     * then nothing is changed.
     */
    long persist(Object v, Supplier<String> path) {
        if (v == null) {
            return 0;
        }
        Img img = tracked(v);
        if (img != null) {
            return img.addr;
        }
        persistLock.lock();
        conversions.incrementAndGet();
        // the conversion's allocations live in the caller's region, or in one of its own
        boolean own = region() == null;
        Conversion c = new Conversion();
        try {
            if (own) {
                heap.begin();
            }
            img = table.get(v);
            long addr = img != null ? img.addr : c.publish(v, null, path.get()).addr;
            c.run();
            c.finish();
            if (own) {
                heap.commit();
            }
            return addr;
        } catch (RuntimeException | Error e) {
            c.rollback(own);
            throw e;
        } finally {
            conversions.incrementAndGet();
            persistLock.unlock();
        }
    }

    /** One conversion: the objects it published, in discovery order. */
    private final class Conversion {
        record Pending(Object obj, Img img, Pending parent, String edge) {
        }

        final List<Pending> todo = new ArrayList<>();

        String path(Pending p, String edge) {
            StringBuilder sb = new StringBuilder(edge);
            for (Pending q = p; q != null; q = q.parent) {
                sb.insert(0, q.edge);
            }
            return sb.toString();
        }

        Img publish(Object v, Pending parent, String edge) {
            JType t = typeOf(v.getClass(), () -> path(parent, edge));
            Img img = new Img(allocImage(v, t), t);
            Graph.this.publish(v, img);
            todo.add(new Pending(v, img, parent, edge));
            return img;
        }

        long child(Object v, Pending parent, String edge) {
            if (v == null) {
                return 0;
            }
            Img img = table.get(v);
            return img != null ? img.addr : publish(v, parent, edge).addr;
        }

        void run() {
            for (int k = 0; k < todo.size(); k++) {
                fill(todo.get(k));
            }
        }

        void fill(Pending p) {
            Object o = p.obj;
            Img img = p.img;
            switch (img.type.kind) {
                case OBJECT, RECORD -> fillObject(p);
                case ARRAY -> fillArray(p);
                case STRING -> {
                    if (!((String) o).isEmpty()) {
                        heap.write(heap.getLong(img.addr + 16), MemorySegment.ofArray(((String) o).toCharArray()));
                    }
                }
                case BOX -> heap.putLong(img.addr + 8, Codec.boxBits(o));
                case ENUM -> heap.putLong(img.addr + 8, ((Enum<?>) o).ordinal());
                case COLLECTION, MAP -> {
                    Object[] elems = Codec.snapshot(o);
                    long[] addrs = new long[elems.length];
                    for (int i = 0; i < elems.length; i++) {
                        addrs[i] = child(elems[i], p, "{" + i + "}");
                    }
                    heap.putLong(img.addr + 24, child(Codec.comparator(o), p, ".comparator()"));
                    writeCollectionData(img, addrs, false);
                    img.shadow = elems;
                }
            }
        }

        void fillObject(Pending p) {
            JType.Slot[] ss = p.img.type.slots;
            long[] bits = new long[ss.length];
            Object[] refs = new Object[ss.length];
            synchronized (stripe(p.obj)) {
                for (int i = 0; i < ss.length; i++) {
                    if (ss[i].isRef()) {
                        refs[i] = Codec.get(ss[i].field(), p.obj);
                    } else {
                        bits[i] = Codec.readBits(ss[i], p.obj);
                    }
                }
            }
            for (int i = 0; i < ss.length; i++) {
                if (ss[i].isRef()) {
                    bits[i] = child(refs[i], p, "." + ss[i].field().getName());
                }
                heap.putLong(p.img.addr + ss[i].offset(), bits[i]);
            }
        }

        void fillArray(Pending p) {
            long data = heap.getLong(p.img.addr + 16);
            if (data == 0) {
                return;
            }
            if (p.img.type.elem != 'L' && p.img.type.elem != '[') {
                synchronized (stripe(p.obj)) {
                    heap.write(data, Codec.primSegment(p.obj));
                }
                return;
            }
            Object[] copy;
            synchronized (stripe(p.obj)) {
                copy = ((Object[]) p.obj).clone();
            }
            long[] addrs = new long[copy.length];
            for (int i = 0; i < copy.length; i++) {
                addrs[i] = child(copy[i], p, "[" + i + "]");
            }
            heap.write(data, MemorySegment.ofArray(addrs));
        }

        /** Every image durable (one fence), then ready; in a region, forgotten again on abort. */
        void finish() {
            for (Pending p : todo) {
                flushImage(p.img);
            }
            RegionState r = region();
            if (r == null || !r.implicit) {
                heap.fence(); // an implicit region's commit fences them (nothing links them before it)
            }
            for (Pending p : todo) {
                if (r == null || !r.implicit) {
                    p.img.ready = true; // an implicit region's become ready at its commit
                }
                if (r != null) {
                    r.created.add(p.obj);
                }
            }
        }

        /** Forgets what was published; its own region's abort frees the images, else they are freed here. */
        void rollback(boolean own) {
            for (Pending p : todo) {
                table.remove(p.obj);
                if (!own) {
                    freeImage(p.img);
                }
            }
            if (own) {
                try {
                    heap.abort();
                } catch (EngramException ignored) {
                    // the region never began (begin itself failed)
                }
            }
        }
    }

    private long allocImage(Object v, JType t) {
        long a = heap.alloc(t.typeId);
        try {
            heap.putLong(a, t.typeId);
            long n = switch (t.kind) {
                case ARRAY -> Array.getLength(v);
                case STRING -> ((String) v).length();
                default -> -1;
            };
            if (n >= 0) {
                heap.putLong(a + 8, n);
                heap.putLong(a + 16, n == 0 ? 0 : heap.allocArray(elemTypeId(t.elem), n));
            }
            return a;
        } catch (RuntimeException e) {
            heap.free(a);
            throw e;
        }
    }

    private long dataOf(Img img) {
        return switch (img.type.kind) {
            case ARRAY, STRING, COLLECTION, MAP -> heap.getLong(img.addr + 16);
            default -> 0;
        };
    }

    private long dataBytes(Img img) {
        long n = heap.getLong(img.addr + 8);
        return switch (img.type.kind) {
            case ARRAY, STRING -> n * img.type.elemSize;
            case COLLECTION, MAP -> n * 8;
            default -> 0;
        };
    }

    private void flushImage(Img img) {
        heap.flush(img.addr, img.type.imageSize);
        long data = dataOf(img);
        if (data != 0) {
            heap.flush(data, Math.max(8, dataBytes(img)));
        }
    }

    private void freeImage(Img img) {
        try {
            long data = img.addr != 0 ? heap.getLong(img.addr + 16) : 0;
            if (data != 0 && img.type.kind != JType.Kind.OBJECT && img.type.kind != JType.Kind.RECORD
                    && img.type.kind != JType.Kind.BOX && img.type.kind != JType.Kind.ENUM) {
                heap.free(data);
            }
            heap.free(img.addr);
        } catch (EngramException ignored) {
            // a half-built image: what could be freed was; the rest is swept at the next open
        }
    }

    // ---- write-through ------------------------------------------------

    /**
     * Seeded fault for the crash explorer's self-test: region stores are
     * not undo-logged (a store made non-atomic). Never set outside tests.
     */
    public static volatile boolean faultSkipRegionLog;

    /** Writes one 8-aligned word of an image: undo-logged in a region, else durable on return. */
    void writeWord(long at, long bits) {
        RegionState r = region();
        if (r != null) {
            if (r.logged.add(at) && !faultSkipRegionLog) {
                heap.log(at, 8);
            }
            heap.putLong(at, bits);
        } else {
            heap.putLong(at, bits);
            heap.persist(at, 8);
        }
    }

    /** Writes a range of an image (array elements) the same way. */
    void writeRange(long at, MemorySegment src) {
        RegionState r = region();
        long len = src.byteSize();
        if (len == 0) {
            return;
        }
        if (r != null) {
            if (!faultSkipRegionLog) {
                heap.log(at, len);
            }
            heap.write(at, src);
        } else {
            heap.write(at, src);
            heap.persist(at, len);
        }
    }

    /** Store of a field of a recoverable object, before the putfield (the pre-store hook). */
    void storeField(Object o, Img img, JType.Slot s, Object ref, long bits) {
        long v = s.isRef() ? persist(ref, () -> describe(o) + "." + s.field().getName()) : bits;
        synchronized (stripe(o)) {
            RegionState r = region();
            if (r != null) {
                Object old = Codec.get(s.field(), o);
                r.javaUndo.add(() -> Codec.set(s.field(), o, old));
            }
            writeWord(img.addr + s.offset(), v);
        }
    }

    /** After the putfield: the image slot is rewritten from the field if a racing store changed it. */
    void resyncField(Object o, Img img, JType.Slot s) {
        while (true) {
            Object v = Codec.get(s.field(), o);
            long bits = s.isRef() ? persist(v, () -> describe(o) + "." + s.field().getName()) : Codec.readBits(s, o);
            synchronized (stripe(o)) {
                Object now = Codec.get(s.field(), o);
                if (s.isRef() ? now == v : Objects.equals(now, v)) {
                    long at = img.addr + s.offset();
                    if (heap.getLong(at) != bits) {
                        writeWord(at, bits);
                    }
                    return;
                }
            }
        }
    }

    /** An array element of a recoverable array: image first, then the Java store, under the stripe lock. */
    void storeElement(Object arr, Img img, int i, Object ref, long bits, Runnable javaStore) {
        char e = img.type.elem;
        long v = (e == 'L' || e == '[') ? persist(ref, () -> describe(arr) + "[" + i + "]") : bits;
        long at = heap.getLong(img.addr + 16) + (long) i * img.type.elemSize;
        synchronized (stripe(arr)) {
            RegionState r = region();
            if (r != null) {
                Object old = Array.get(arr, i);
                r.javaUndo.add(() -> Array.set(arr, i, old));
            }
            writeElem(at, img.type.elemSize, v);
            javaStore.run();
        }
    }

    private void writeElem(long at, int size, long v) {
        if (size == 8) {
            writeWord(at, v);
            return;
        }
        MemorySegment one = switch (size) {
            case 1 -> MemorySegment.ofArray(new byte[] {(byte) v});
            case 2 -> MemorySegment.ofArray(new short[] {(short) v});
            default -> MemorySegment.ofArray(new int[] {(int) v});
        };
        writeRange(at, one);
    }

    /** Rewrites elements [from, from+len) of a recoverable array from the Java array. */
    void resyncElements(Object arr, Img img, int from, int len) {
        if (len <= 0) {
            return;
        }
        long data = heap.getLong(img.addr + 16);
        char e = img.type.elem;
        if (e == 'L' || e == '[') {
            Object[] a = (Object[]) arr;
            while (true) {
                Object[] snap = java.util.Arrays.copyOfRange(a, from, from + len);
                long[] addrs = new long[len];
                for (int k = 0; k < len; k++) {
                    int idx = from + k;
                    addrs[k] = persist(snap[k], () -> describe(arr) + "[" + idx + "]");
                }
                synchronized (stripe(arr)) {
                    if (java.util.Arrays.equals(snap, 0, len, a, from, from + len, (x, y) -> x == y ? 0 : 1)) {
                        writeRange(data + (long) from * 8, MemorySegment.ofArray(addrs));
                        return;
                    }
                }
            }
        }
        synchronized (stripe(arr)) {
            MemorySegment all = Codec.primSegment(arr);
            int es = img.type.elemSize;
            writeRange(data + (long) from * es, all.asSlice((long) from * es, (long) len * es));
        }
    }

    /** Saves an array range for the region's Java-side undo. */
    void saveArrayRange(Object arr, int from, int len) {
        RegionState r = region();
        if (r == null || len <= 0) {
            return;
        }
        Object copy = Array.newInstance(arr.getClass().getComponentType(), len);
        System.arraycopy(arr, from, copy, 0, len);
        r.javaUndo.add(() -> System.arraycopy(copy, 0, arr, from, len));
    }

    // ---- collections --------------------------------------------------

    /** Before a mutating call on a recoverable collection: saves its contents for the region's undo. */
    void beforeMutation(Object coll) {
        RegionState r = region();
        if (r == null || r.snapshotted.put(coll, Boolean.TRUE) != null) {
            return;
        }
        Object[] saved = Codec.snapshot(coll);
        r.javaUndo.add(() -> Codec.restore(coll, saved));
    }

    /** After a mutating call: the collection's image is replaced by its current contents. */
    void resyncCollection(Object coll, Img img) {
        while (true) {
            Object[] snap = Codec.snapshot(coll);
            Object[] shadow;
            long capacity;
            synchronized (stripe(coll)) {
                shadow = img.shadow;
                capacity = img.capacity;
            }
            int from = shadow != null && snap.length <= capacity && extendsBy(shadow, snap) ? shadow.length : 0;
            long[] addrs = new long[snap.length];
            for (int i = from; i < snap.length; i++) {
                int idx = i;
                addrs[i] = persist(snap[i], () -> describe(coll) + "{" + idx + "}");
            }
            synchronized (stripe(coll)) {
                Object[] now = Codec.snapshot(coll);
                if (!java.util.Arrays.equals(snap, now, (x, y) -> x == y ? 0 : 1)
                        || img.shadow != shadow || img.capacity != capacity) {
                    continue; // changed meanwhile: again, with what it holds now
                }
                img.index = null; // the image is in the snapshot's order now
                if (from > 0) {
                    appendData(img, from, java.util.Arrays.copyOfRange(addrs, from, snap.length));
                } else {
                    writeCollectionData(img, addrs, true);
                }
                img.shadow = snap;
                commitIfImplicit();
                return;
            }
        }
    }

    /** Does {@code now} hold {@code old}'s elements (the same objects) followed by more? */
    private static boolean extendsBy(Object[] old, Object[] now) {
        if (now.length <= old.length) {
            return false;
        }
        for (int i = 0; i < old.length; i++) {
            if (old[i] != now[i]) {
                return false;
            }
        }
        return true;
    }

    /**
     * Appends to a collection image in place (its data array has room):
     * 1. the new element pointers go past the valid length, where nothing
     *    reads them (undo-logged in a region, so an abort zeroes them again);
     * 2. one 8-byte store of the new length publishes them.
     */
    void appendData(Img img, int from, long[] added) {
        long at = heap.getLong(img.addr + 16) + from * 8L;
        long len = added.length * 8L;
        RegionState r = region();
        if (r != null) {
            heap.log(at, len);
        }
        heap.write(at, MemorySegment.ofArray(added));
        if (r == null) {
            heap.persist(at, len);
        }
        writeWord(img.addr + 8, from + added.length);
    }

    /**
     * Points a collection image at a new data array holding {@code addrs}:
     * 1. the new array is written and persisted while nothing points to it;
     * 2. size and data change together in one region (the caller's, or one
     *    of its own), so a crash leaves the old or the new contents;
     * 3. the old array is freed once that is committed.
     */
    void writeCollectionData(Img img, long[] addrs, boolean replace) {
        if (replace) {
            REIMAGES.incrementAndGet();
        }
        if (!replace) {
            long data = newData(img, addrs);
            heap.putLong(img.addr + 8, addrs.length);
            heap.putLong(img.addr + 16, data);
            return;
        }
        boolean own = region() == null;
        if (own) {
            heap.begin();
        }
        try {
            long data = newData(img, addrs);
            long old = heap.getLong(img.addr + 16);
            if (own) {
                heap.log(img.addr + 8, 16);
                heap.putLong(img.addr + 8, addrs.length);
                heap.putLong(img.addr + 16, data);
            } else {
                writeWord(img.addr + 8, addrs.length);
                writeWord(img.addr + 16, data);
            }
            if (old != 0) {
                heap.free(old);
            }
        } catch (RuntimeException e) {
            img.shadow = null; // unknown now: rewrite whole next time
            img.capacity = 0;
            img.index = null;
            if (own) {
                heap.abort();
            }
            throw e;
        }
        if (own) {
            heap.commit();
        }
    }

    /** 1. a new data array, written and persisted while nothing points to it. */
    private long newData(Img img, long[] addrs) {
        if (addrs.length == 0) {
            img.capacity = 0;
            return 0;
        }
        long cap = addrs.length + (addrs.length >> 1) + 4;
        long data = heap.allocArray(refElem, cap);
        img.capacity = cap;
        heap.write(data, MemorySegment.ofArray(addrs));
        heap.persist(data, cap * 8); // the spare room too: it must read as null after a crash
        return data;
    }

    // ---- roots --------------------------------------------------------

    /** A durable root was assigned: its value is made recoverable, then the root set. */
    void storeRoot(String name, Field field, Object v) {
        long addr = persist(v, () -> name);
        RegionState r = region();
        if (r != null) {
            Object old = Codec.get(field, null);
            r.javaUndo.add(() -> Codec.set(field, null, old));
        }
        if (heap.root(name) != addr) {
            heap.setRoot(name, addr);
        }
    }

    // ---- one commit per collection change ------------------------------

    /**
     * Runs a collection's after-call hook as one implicit region of its own
     * when the calling thread is in no region, so the whole change (the
     * conversion of the new elements, the image entry, the length) is one
     * commit instead of one per conversion and one persist per word.
     *
     * <p>It holds {@code persistLock} from begin to commit, so implicit
     * regions never overlap each other or a conversion, and its conversions
     * stay not ready until it commits (other threads' hooks wait for them
     * instead of linking images a crash could still roll back). The hook
     * calls {@link #commitIfImplicit} under the collection's stripe lock,
     * so no other writer of the collection's image words runs between its
     * writes and its commit. An exception aborts it: the image and the
     * objects it made recoverable go back, the Java collection keeps the
     * call's change (as before: see Limits in docs/java.md).
     */
    void oneCommit(Runnable hook) {
        if (region() != null) {
            hook.run();
            return;
        }
        RegionState r = REGIONS.get();
        persistLock.lock();
        try {
            beginRegion(r);
            r.depth = 1;
            r.implicit = true;
            try {
                hook.run();
            } catch (RuntimeException | Error e) {
                if (r.implicit && r.graph == this) {
                    endImplicit(r, false);
                }
                throw e;
            }
            commitIfImplicit(); // a hook that wrote no collection word
        } finally {
            persistLock.unlock();
        }
    }

    /** Commits the calling thread's implicit region, if one is open (a hook calls this under the stripe lock). */
    void commitIfImplicit() {
        RegionState r = REGIONS.get();
        if (r.implicit && r.graph == this) {
            endImplicit(r, true);
        }
    }

    private void endImplicit(RegionState r, boolean commit) {
        r.depth = 0;
        r.implicit = false;
        if (commit) {
            List<Object> made = new ArrayList<>(r.created);
            commitRegion(r);
            for (Object o : made) {
                Img img = table.get(o);
                if (img != null) {
                    img.ready = true;
                }
            }
        } else {
            abortRegion(r);
        }
    }

    /**
     * Checks, without changing anything, that {@code v} and everything it
     * reaches that is not recoverable yet could be made recoverable: the
     * {@link NotPersistableException} a conversion would throw, with the
     * same path, before the collection call that inserts {@code v} happens.
     */
    void checkPersistable(Object v, Supplier<String> path) {
        if (v == null || tracked(v) != null) {
            return;
        }
        record Step(Object obj, int parent, String edge) {
        }
        List<Step> steps = new ArrayList<>();
        java.util.IdentityHashMap<Object, Boolean> seen = new java.util.IdentityHashMap<>();
        steps.add(new Step(v, -1, null));
        seen.put(v, Boolean.TRUE);
        for (int k = 0; k < steps.size(); k++) {
            int at = k;
            Object o = steps.get(k).obj;
            JType t = typeOf(o.getClass(), () -> {
                StringBuilder sb = new StringBuilder();
                for (int i = at; i >= 0; i = steps.get(i).parent) {
                    sb.insert(0, i == 0 ? path.get() : steps.get(i).edge);
                }
                return sb.toString();
            });
            Codec.children(o, t, (child, edge) -> {
                if (child != null && seen.put(child, Boolean.TRUE) == null && tracked(child) == null) {
                    steps.add(new Step(child, at, edge));
                }
            });
        }
    }

    // ---- regions ------------------------------------------------------

    void beginRegion(RegionState r) {
        heap.begin();
        r.graph = this;
    }

    void commitRegion(RegionState r) {
        heap.commit();
        r.clear();
        r.graph = null;
    }

    void abortRegion(RegionState r) {
        heap.abort();
        for (Object coll : r.snapshotted.keySet()) {
            Img img = table.get(coll);
            if (img != null) {
                synchronized (stripe(coll)) {
                    img.shadow = null; // the image went back: rewrite it whole next time
                    img.capacity = 0;
                    img.index = null;
                }
            }
        }
        for (int i = r.javaUndo.size() - 1; i >= 0; i--) {
            r.javaUndo.get(i).run();
        }
        for (Object o : r.created) {
            table.remove(o);
        }
        r.clear();
        r.graph = null;
    }

    static String describe(Object o) {
        return o.getClass().getName() + "@" + Integer.toHexString(System.identityHashCode(o));
    }

    private static final AtomicLong REIMAGES = new AtomicLong();

    /**
     * How many times a collection's image got a new data array (a whole
     * re-imaging, or an in-place image growing), in this JVM: for tests that
     * check which path a change took. Not an API.
     */
    public static long collectionReimages() {
        return REIMAGES.get();
    }

    /** Number of conversions run so far (for tests and reports). */
    long conversions() {
        return conversions.get() / 2;
    }

    /** Every recoverable object -> its image address (for recovery and sweeping). */
    void forEach(java.util.function.BiConsumer<Object, Long> f) {
        table.forEach((o, img) -> f.accept(o, img.addr));
    }

    Map<Integer, JType> knownTypes() {
        return byId;
    }

    static boolean isCollection(Object o) {
        return o instanceof Collection<?> || o instanceof Map<?, ?>;
    }

    static boolean sorted(Object o) {
        return o instanceof SortedMap<?, ?> || o instanceof SortedSet<?>;
    }
}
