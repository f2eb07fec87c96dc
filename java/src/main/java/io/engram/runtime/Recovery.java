package io.engram.runtime;

import io.engram.EngramException;
import io.engram.EngramException.Code;
import io.engram.heap.Heap;
import io.engram.runtime.IdentityTable.Img;

import java.lang.foreign.MemorySegment;
import java.lang.reflect.Array;
import java.lang.reflect.Field;
import java.lang.reflect.RecordComponent;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Rebuilds the typed Java graph from the images reachable from the pool's
 * roots, keeping identity (one object per image: two roots reaching one
 * image reach one object), sharing and cycles.
 *
 * <p>Steps: 1. walk every image reachable from a root (breadth first),
 * finding each one's class from its type id; 2. create a shell per image
 * without running constructors (arrays with their length, strings, boxes
 * and enum constants complete); 3. fill fields and array elements;
 * 4. fill collections, most deeply nested first, so that keys are complete
 * before they are hashed. Records and sorted collections (whose final
 * components or comparator must be known at construction) are built on
 * demand, their dependencies first. Reads only; a bad pointer or unknown
 * type is a typed error (CORRUPT, LAYOUT_MISMATCH).
 *
 * <p>Each image is one {@link Node} (address, type, object), found by
 * address in one table only when a pointer is followed; the steps iterate
 * the nodes in walk order. (With separate address-keyed tables for types
 * and objects, each image cost about a dozen lookups, each a cache miss in
 * a table of 100,000s of entries: the largest share of a 100,000-record
 * restart's recovery.)
 */
final class Recovery {
    private static final sun.misc.Unsafe UNSAFE = unsafe();

    private final Graph g;
    private final Heap heap;
    private final ClassLoader loader;
    /** One image: its address, type, and (once built) object. */
    private static final class Node {
        final long a;
        final JType t;
        Object o;
        boolean building;

        Node(long a, JType t) {
            this.a = a;
            this.t = t;
        }
    }

    private final LongMap<Node> nodes = new LongMap<>();
    private final List<Node> order = new ArrayList<>();

    Recovery(Graph g, ClassLoader loader) {
        this.g = g;
        this.heap = g.heap;
        this.loader = loader;
    }

    private static sun.misc.Unsafe unsafe() {
        try {
            Field f = sun.misc.Unsafe.class.getDeclaredField("theUnsafe");
            f.setAccessible(true);
            return (sun.misc.Unsafe) f.get(null);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** Rebuilds everything reachable from {@code roots} (name -> address); returns name -> object. */
    Map<String, Object> recover(Map<String, Long> roots) {
        for (long a : roots.values()) {
            walk(a);
        }
        for (Node n : order) {
            shell(n);
        }
        for (Node n : order) {
            fill(n);
        }
        for (int i = order.size() - 1; i >= 0; i--) {
            fillCollection(order.get(i));
        }
        Map<String, Object> out = new HashMap<>();
        roots.forEach((name, a) -> out.put(name, resolve(a)));
        return out;
    }

    /** Registers every rebuilt object as recoverable, with its image. */
    void publish() {
        java.util.Set<Class<?>> classes = new java.util.HashSet<>();
        for (Node n : order) {
            classes.add(resolve(n).getClass());
        }
        StoreGuards.unguard(classes); // one safepoint for every class, not one per class
        for (Node n : order) {
            Img img = new Img(n.a, n.t);
            img.ready = true;
            g.publish(resolve(n), img);
        }
    }

    /** Is {@code addr} an image (or image data) the rebuilt graph uses? */
    LongMap<Boolean> liveAddresses() {
        LongMap<Boolean> live = new LongMap<>(order.size() * 2);
        for (Node n : order) {
            live.put(n.a, Boolean.TRUE);
            switch (n.t.kind) {
                case ARRAY, STRING, COLLECTION, MAP -> {
                    long d = heap.getLong(n.a + 16);
                    if (d != 0) {
                        live.put(d, Boolean.TRUE);
                    }
                }
                default -> {
                }
            }
        }
        return live;
    }

    /** The node of the image at {@code a}, reading its type; {@code a} is not in the table yet. */
    private Node newNode(long a) {
        heap.validate(a, 8);
        long word = heap.getLong(a);
        if (word <= 0 || word > Integer.MAX_VALUE) {
            throw new EngramException(Code.CORRUPT, "image at " + a + " has no type (word " + word + ")");
        }
        Node n = new Node(a, g.typeById((int) word, loader));
        nodes.put(a, n);
        order.add(n);
        return n;
    }

    // 1. the walk
    private void walk(long root) {
        if (root == 0 || nodes.get(root) != null) {
            return;
        }
        int next = order.size(); // breadth first: the nodes added from here on are the queue
        newNode(root);
        while (next < order.size()) {
            Node n = order.get(next++);
            for (long c : children(n.a, n.t)) {
                if (c != 0 && nodes.get(c) == null) {
                    newNode(c);
                }
            }
        }
    }

    private long[] children(long a, JType t) {
        return switch (t.kind) {
            case OBJECT, RECORD -> {
                long[] out = new long[t.slots.length];
                for (int i = 0; i < t.slots.length; i++) {
                    out[i] = t.slots[i].isRef() ? heap.getLong(a + t.slots[i].offset()) : 0;
                }
                yield out;
            }
            case ARRAY -> t.elem == 'L' || t.elem == '[' ? words(heap.getLong(a + 16), heap.getLong(a + 8)) : new long[0];
            case COLLECTION, MAP -> {
                long n = heap.getLong(a + 8);
                long[] w = words(heap.getLong(a + 16), n);
                long[] out = java.util.Arrays.copyOf(w, w.length + 1);
                out[w.length] = heap.getLong(a + 24);
                yield out;
            }
            default -> new long[0];
        };
    }

    private long[] words(long data, long n) {
        if (n < 0 || n > Integer.MAX_VALUE || (n > 0 && data == 0)) {
            throw new EngramException(Code.CORRUPT, "bad array image: " + n + " elements at " + data);
        }
        long[] out = new long[(int) n];
        if (n > 0) {
            heap.validate(data, n * 8);
            heap.read(data, MemorySegment.ofArray(out));
        }
        return out;
    }

    // 2. shells
    private void shell(Node n) {
        long a = n.a;
        JType t = n.t;
        Object o = switch (t.kind) {
            case OBJECT -> allocate(t.type);
            case ARRAY -> Array.newInstance(t.type.getComponentType(), (int) heap.getLong(a + 8));
            case STRING -> {
                char[] cs = new char[(int) heap.getLong(a + 8)];
                if (cs.length > 0) {
                    heap.read(heap.getLong(a + 16), MemorySegment.ofArray(cs));
                }
                yield new String(cs);
            }
            case BOX -> Codec.unbox(t.type, heap.getLong(a + 8));
            case ENUM -> enumConstant(t, heap.getLong(a + 8));
            case COLLECTION, MAP -> heap.getLong(a + 24) == 0 ? newCollection(t.type) : null;
            case RECORD -> null;
        };
        n.o = o;
    }

    private static Object allocate(Class<?> c) {
        try {
            return UNSAFE.allocateInstance(c);
        } catch (InstantiationException e) {
            throw new EngramException(Code.INTERNAL, "cannot instantiate " + c.getName(), e);
        }
    }

    private static Object enumConstant(JType t, long ordinal) {
        Object[] cs = t.type.getEnumConstants();
        if (ordinal < 0 || ordinal >= cs.length) {
            throw new EngramException(Code.CORRUPT, "enum " + t.type.getName() + " has no constant " + ordinal);
        }
        return cs[(int) ordinal];
    }

    private static Object newCollection(Class<?> c) {
        try {
            return c.getDeclaredConstructor().newInstance();
        } catch (ReflectiveOperationException e) {
            throw new EngramException(Code.INTERNAL, "cannot create " + c.getName(), e);
        }
    }

    /** The object of an image; records and sorted collections are built here on first use. */
    private Object resolve(long a) {
        if (a == 0) {
            return null;
        }
        Node n = nodes.get(a);
        if (n == null) {
            throw new EngramException(Code.CORRUPT, "pointer " + a + " to an image the walk did not reach");
        }
        return resolve(n);
    }

    private Object resolve(Node n) {
        if (n.o != null) {
            return n.o;
        }
        if (n.building) {
            throw new EngramException(Code.CORRUPT, "a cycle through records or sorted-collection comparators at "
                    + n.t.type.getName() + " cannot be rebuilt");
        }
        n.building = true;
        Object o = n.t.kind == JType.Kind.RECORD ? buildRecord(n.a, n.t) : buildSorted(n.a, n.t);
        n.building = false;
        n.o = o;
        return o;
    }

    private Object buildRecord(long a, JType t) {
        RecordComponent[] rc = t.type.getRecordComponents();
        Object[] args = new Object[rc.length];
        for (int i = 0; i < rc.length; i++) {
            for (JType.Slot s : t.slots) {
                if (s.field().getName().equals(rc[i].getName()) && s.field().getDeclaringClass() == t.type) {
                    args[i] = slotValue(a, s);
                }
            }
        }
        try {
            return t.recordCtor.newInstance(args);
        } catch (ReflectiveOperationException e) {
            throw new EngramException(Code.INTERNAL, "cannot rebuild record " + t.type.getName() + ": " + e, e);
        }
    }

    private Object buildSorted(long a, JType t) {
        Object cmp = resolve(heap.getLong(a + 24));
        try {
            return t.type.getDeclaredConstructor(java.util.Comparator.class).newInstance(cmp);
        } catch (ReflectiveOperationException e) {
            throw new EngramException(Code.INTERNAL, "cannot create " + t.type.getName(), e);
        }
    }

    private Object slotValue(long a, JType.Slot s) {
        long bits = heap.getLong(a + s.offset());
        return s.isRef() ? resolve(bits) : Codec.value(s.kind(), bits);
    }

    // 3. fields and elements
    private void fill(Node n) {
        long a = n.a;
        JType t = n.t;
        switch (t.kind) {
            case OBJECT -> {
                Object o = resolve(n);
                for (JType.Slot s : t.slots) {
                    Object v = slotValue(a, s);
                    if (s.isRef() && v != null && !s.field().getType().isInstance(v)) {
                        throw new EngramException(Code.LAYOUT_MISMATCH, s.field() + " cannot hold the recovered "
                                + v.getClass().getName());
                    }
                    Codec.set(s.field(), o, v);
                }
            }
            case ARRAY -> fillArray(n);
            case RECORD -> resolve(n);
            default -> {
            }
        }
    }

    private void fillArray(Node node) {
        long a = node.a;
        JType t = node.t;
        Object arr = resolve(node);
        int n = Array.getLength(arr);
        if (n == 0) {
            return;
        }
        long data = heap.getLong(a + 16);
        if (t.elem == 'L' || t.elem == '[') {
            long[] w = words(data, n);
            Object[] oa = (Object[]) arr;
            for (int i = 0; i < n; i++) {
                oa[i] = resolve(w[i]);
            }
            return;
        }
        byte[] bytes = new byte[n * t.elemSize];
        heap.read(data, MemorySegment.ofArray(bytes));
        Codec.fillPrim(arr, MemorySegment.ofArray(bytes));
    }

    // 4. collections, deepest first
    private void fillCollection(Node node) {
        long a = node.a;
        JType t = node.t;
        if (t.kind != JType.Kind.COLLECTION && t.kind != JType.Kind.MAP) {
            return;
        }
        long n = heap.getLong(a + 8);
        long[] w = words(heap.getLong(a + 16), n);
        Object[] elems = new Object[w.length];
        for (int i = 0; i < w.length; i++) {
            elems[i] = resolve(w[i]);
        }
        Codec.restore(resolve(node), elems);
    }
}
