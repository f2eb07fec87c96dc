package io.engram.runtime;

import io.engram.DurableRoot;
import io.engram.runtime.IdentityTable.Img;

import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.util.Collection;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The hooks the agent puts into application classes. Each starts with the
 * cheap check: no pool open ({@code Graph.current == null}) returns at
 * once; otherwise an identity-table lookup finds whether the stored-into
 * object is recoverable. Only recoverable objects take the slow path.
 *
 * <pre>
 *   putfield   pre(o, v, id); putfield; post(o, id)     pre: closure of v + image slot;
 *                                                        post: re-sync after a race
 *   putstatic  staticPre(v, id); putstatic; staticPost(id)   durable roots only
 *   xastore    xastore(a, i, v)      does the store itself (image first)
 *   System.arraycopy -> arraycopy(...)
 *   coll.m(..) -> a bridge: before(c); insert(c, x)...; c.m(..); after(c)
 *   keyed calls (put(k, ..), remove(k), add(x), ...) end with afterKey(c, k) instead
 *   c a registered view, iterator or entry ({@link Views}): the hooks act on its
 *   root collection: one key changed when it is known ({@link ViewKeys}), else re-imaged whole
 * </pre>
 *
 * Outside a region, a collection change is one commit: insert only checks
 * that the new elements can be persisted, and after/afterKey convert them
 * and write the image in one implicit region ({@code Graph.oneCommit}).
 *
 * Public because instrumented classes call it; not an API.
 */
public final class Barriers {
    private Barriers() {
    }

    // ---- putfield -----------------------------------------------------

    public static void preA(Object o, Object v, int id) {
        Graph g = Graph.current;
        if (g == null || o == null) {
            return;
        }
        Img img = g.tracked(o);
        if (img != null) {
            JType.Slot s = g.slot(img.type, id);
            if (s != null) {
                g.storeField(o, img, s, v, 0);
            }
        }
    }

    public static void preI(Object o, int v, int id) {
        Graph g = Graph.current;
        if (g == null || o == null) {
            return;
        }
        Img img = g.tracked(o);
        if (img != null) {
            JType.Slot s = g.slot(img.type, id);
            if (s != null) {
                g.storeField(o, img, s, null, Codec.intBits(s.kind(), v));
            }
        }
    }

    public static void preF(Object o, float v, int id) {
        preBits(o, Float.floatToRawIntBits(v) & 0xffffffffL, id);
    }

    /** Takes the value first (the agent's stack shuffle for 2-word values) and gives it back. */
    public static long preJ(long v, Object o, int id) {
        preBits(o, v, id);
        return v;
    }

    public static double preD(double v, Object o, int id) {
        preBits(o, Double.doubleToRawLongBits(v), id);
        return v;
    }

    private static void preBits(Object o, long bits, int id) {
        Graph g = Graph.current;
        if (g == null || o == null) {
            return;
        }
        Img img = g.tracked(o);
        if (img != null) {
            JType.Slot s = g.slot(img.type, id);
            if (s != null) {
                g.storeField(o, img, s, null, bits);
            }
        }
    }

    public static void post(Object o, int id) {
        Graph g = Graph.current;
        if (g == null) {
            return;
        }
        Img img = g.trackedAfterStore(o);
        if (img != null) {
            JType.Slot s = g.slot(img.type, id);
            if (s != null) {
                g.resyncField(o, img, s);
            }
        }
    }

    // ---- putstatic (durable roots) ------------------------------------

    private record RootField(Field field, String name) {
    }

    private static final ConcurrentHashMap<Integer, Object> ROOTS = new ConcurrentHashMap<>();
    private static final Object NOT_ROOT = new Object();

    /** Is field {@code id} a durable root (a reference-typed {@code @DurableRoot} static)? For {@link StoreGuards#root}. */
    static boolean isRoot(int id) {
        return rootField(id) != null;
    }

    private static RootField rootField(int id) {
        Object r = ROOTS.computeIfAbsent(id, Barriers::resolveRoot);
        return r == NOT_ROOT ? null : (RootField) r;
    }

    private static Object resolveRoot(int id) {
        Registry.FieldRef ref = Registry.field(id);
        try {
            Class<?> c = Class.forName(ref.ownerName(), false, ref.loader());
            for (Class<?> k = c; k != null; k = k.getSuperclass()) {
                for (Field f : k.getDeclaredFields()) {
                    if (f.getName().equals(ref.name()) && Modifier.isStatic(f.getModifiers())) {
                        if (!f.isAnnotationPresent(DurableRoot.class) || f.getType().isPrimitive()) {
                            return NOT_ROOT;
                        }
                        f.setAccessible(true);
                        return new RootField(f, rootName(f));
                    }
                }
            }
        } catch (ClassNotFoundException | RuntimeException e) {
            return NOT_ROOT;
        }
        return NOT_ROOT;
    }

    /** The pool root name of a durable root field: {@code pkg.Class.field}. */
    public static String rootName(Field f) {
        return f.getDeclaringClass().getName() + "." + f.getName();
    }

    public static void staticPre(Object v, int id) {
        Graph g = Graph.current;
        if (g == null) {
            return;
        }
        RootField r = rootField(id);
        if (r != null) {
            g.storeRoot(r.name, r.field, v);
        }
    }

    public static void staticPost(int id) {
        Graph g = Graph.current;
        if (g == null) {
            return;
        }
        RootField r = rootField(id);
        if (r != null) {
            g.storeRoot(r.name, r.field, Codec.get(r.field, null));
        }
    }

    // ---- array stores -------------------------------------------------

    public static void aastore(Object[] a, int i, Object v) {
        Graph g = Graph.current;
        if (g == null) {
            a[i] = v;
            return;
        }
        Object old = a[i]; // NullPointerException, ArrayIndexOutOfBoundsException as the JVM would
        if (v != null && !a.getClass().getComponentType().isInstance(v)) {
            throw new ArrayStoreException(v.getClass().getName());
        }
        Img img = g.tracked(a);
        if (img == null) {
            a[i] = v;
            untracked(g, a, i);
        } else if (old != v || g.region() != null) {
            g.storeElement(a, img, i, v, 0, () -> a[i] = v);
        }
    }

    private static void untracked(Graph g, Object a, int i) {
        Img img = g.trackedAfterStore(a);
        if (img != null) {
            g.resyncElements(a, img, i, 1);
        }
    }

    /**
     * A primitive array store with the pool open: the caller has read the
     * element (so null and bounds were checked as the JVM would); untracked
     * arrays are stored and re-checked, recoverable ones imaged first.
     */
    private static void primStore(Graph g, Object a, int i, long bits, Runnable store) {
        Img img = g.tracked(a);
        if (img == null) {
            store.run();
            untracked(g, a, i);
        } else {
            g.storeElement(a, img, i, null, bits, store);
        }
    }

    public static void iastore(int[] a, int i, int v) {
        Graph g = Graph.current;
        if (g == null) {
            a[i] = v;
            return;
        }
        int old = a[i]; // null and bounds checks, as the JVM's store would
        primStore(g, a, i, v, () -> a[i] = v);
    }

    public static void lastore(long[] a, int i, long v) {
        Graph g = Graph.current;
        if (g == null) {
            a[i] = v;
            return;
        }
        long old = a[i]; // null and bounds checks, as the JVM's store would
        primStore(g, a, i, v, () -> a[i] = v);
    }

    public static void fastore(float[] a, int i, float v) {
        Graph g = Graph.current;
        if (g == null) {
            a[i] = v;
            return;
        }
        float old = a[i]; // null and bounds checks, as the JVM's store would
        primStore(g, a, i, Float.floatToRawIntBits(v), () -> a[i] = v);
    }

    public static void dastore(double[] a, int i, double v) {
        Graph g = Graph.current;
        if (g == null) {
            a[i] = v;
            return;
        }
        double old = a[i]; // null and bounds checks, as the JVM's store would
        primStore(g, a, i, Double.doubleToRawLongBits(v), () -> a[i] = v);
    }

    public static void castore(char[] a, int i, int v) {
        Graph g = Graph.current;
        if (g == null) {
            a[i] = (char) v;
            return;
        }
        char old = a[i]; // null and bounds checks, as the JVM's store would
        primStore(g, a, i, (char) v, () -> a[i] = (char) v);
    }

    public static void sastore(short[] a, int i, int v) {
        Graph g = Graph.current;
        if (g == null) {
            a[i] = (short) v;
            return;
        }
        short old = a[i]; // null and bounds checks, as the JVM's store would
        primStore(g, a, i, (short) v, () -> a[i] = (short) v);
    }

    /** byte[] or boolean[] (the JVM's baload/bastore serve both). */
    public static void bastore(Object a, int i, int v) {
        Graph g = Graph.current;
        if (a instanceof boolean[] z) {
            if (g == null) {
                z[i] = (v & 1) != 0;
                return;
            }
            boolean old = z[i];
            primStore(g, z, i, v & 1, () -> z[i] = (v & 1) != 0);
            return;
        }
        byte[] b = (byte[]) a;
        if (g == null) {
            b[i] = (byte) v;
            return;
        }
        byte old = b[i]; // null and bounds checks, as the JVM's store would
        primStore(g, b, i, (byte) v, () -> b[i] = (byte) v);
    }

    public static void arraycopy(Object src, int sp, Object dst, int dp, int len) {
        Graph g = Graph.current;
        if (g == null) {
            System.arraycopy(src, sp, dst, dp, len);
            return;
        }
        Img img = dst == null ? null : g.tracked(dst);
        if (img == null) {
            System.arraycopy(src, sp, dst, dp, len);
            if (dst != null) {
                Img now = g.trackedAfterStore(dst);
                if (now != null) {
                    g.resyncElements(dst, now, dp, len);
                }
            }
            return;
        }
        if (len > 0 && dst.getClass().isArray() && dp >= 0 && (long) dp + len <= java.lang.reflect.Array.getLength(dst)) {
            g.saveArrayRange(dst, dp, len);
        }
        System.arraycopy(src, sp, dst, dp, len); // throws as the JVM would, before the image changes
        g.resyncElements(dst, img, dp, len);
    }

    // ---- collections (bridges) ----------------------------------------

    public static void before(Object c) {
        Graph g = Graph.current;
        if (g == null || c == null) {
            return;
        }
        Img img = g.tracked(c);
        if (img != null) {
            g.beforeMutation(c);
        } else {
            Object root = viewRoot(g, c);
            if (root != null) {
                beforeRoot(g, root);
                ViewKeys.before(g, c, root); // it.remove(), e.setValue(v): the one key it changes, if known
            }
        }
    }

    /** Saves a view's root for the region's undo: a collection's contents, or an array's ({@code Arrays.asList}). */
    private static void beforeRoot(Graph g, Object root) {
        if (root.getClass().isArray()) {
            g.saveArrayRange(root, 0, java.lang.reflect.Array.getLength(root));
        } else {
            g.beforeMutation(root);
        }
    }

    /**
     * The recoverable collection {@code c} writes through to when {@code c}
     * is not itself recoverable: a registered view, iterator or map entry
     * of it ({@link Views}), or null.
     */
    static Object viewRoot(Graph g, Object c) {
        Object root = Views.root(c);
        return root != null && g.tracked(root) != null ? root : null;
    }

    /** {@code c} if recoverable, else the recoverable collection it is a view of, else null. */
    private static Object target(Graph g, Object c) {
        return g.tracked(c) != null ? c : viewRoot(g, c);
    }

    /**
     * Before a keyed call (its bridge calls this instead of {@link #before}):
     * outside a region, notes the key's state, so that a failing after-call
     * hook (a full pool) can put the collection back as the image still has it.
     */
    public static void beforeKey(Object c, Object key) {
        Graph g = Graph.current;
        if (g == null || c == null) {
            return;
        }
        if (g.tracked(c) != null) {
            g.beforeMutation(c);
            if (g.region() == null && KeyedImage.keyed(c)) {
                KeyedImage.noteBefore(c, key);
            }
        } else {
            Object root = viewRoot(g, c);
            if (root != null) {
                beforeRoot(g, root);
                ViewKeys.beforeKeyed(g, c, root, key); // keySet().remove(k), headMap(..).put(k, v), ...
            }
        }
    }

    /** An element about to be inserted into {@code c}: made recoverable before it becomes visible. */
    public static void insert(Object c, Object v) {
        Graph g = Graph.current;
        if (g == null || c == null || v == null) {
            return;
        }
        Object t = target(g, c);
        if (t != null) {
            inserting(g, t, v);
        }
    }

    /**
     * In a region the element is converted now; outside one only checked
     * (a NotPersistableException before the call, as a conversion would
     * throw): the after-call hook converts it in the change's one commit.
     */
    private static void inserting(Graph g, Object c, Object v) {
        if (g.region() != null) {
            g.persist(v, () -> Graph.describe(c) + "{+}");
        } else {
            g.checkPersistable(v, () -> Graph.describe(c) + "{+}");
        }
    }

    /** The elements of a collection or map about to be inserted into {@code c}. */
    public static void insertAll(Object c, Object from) {
        Graph g = Graph.current;
        Object t = g == null || c == null || from == null ? null : target(g, c);
        if (t == null) {
            return;
        }
        if (from instanceof Collection<?> || from instanceof Map<?, ?>) {
            for (Object v : Codec.snapshot(from)) {
                inserting(g, t, v);
            }
        } else if (from instanceof Object[] a) {
            for (Object v : a) {
                inserting(g, t, v);
            }
        }
    }

    /**
     * After a keyed call ({@code put(k, ..)}, {@code remove(k)}, {@code add(x)}, ...):
     * hash maps/sets and sorted maps/sets update only that key's image entry
     * ({@link KeyedImage}); other collections are re-synchronised whole.
     */
    public static void afterKey(Object c, Object key) {
        Graph g = Graph.current;
        if (g == null || c == null) {
            return;
        }
        Img img = g.trackedAfterStore(c);
        if (img == null) {
            Object root = viewRoot(g, c);
            if (root != null && ViewKeys.keyedView(c, root)) {
                afterKey(root, key); // a key set's or sub-map's keyed call changes that key of the root
            } else {
                afterView(g, c);
            }
            return;
        }
        if (!KeyedImage.keyed(c)) {
            afterWhole(g, c, img);
            return;
        }
        boolean implicit = g.region() == null;
        try {
            g.oneCommit(() -> KeyedImage.resyncKey(g, c, img, key));
        } catch (RuntimeException | Error e) {
            if (implicit) {
                KeyedImage.undoCall(c, key); // the image kept the key's old state: so does the collection
            }
            throw e;
        }
    }

    public static void after(Object c) {
        Graph g = Graph.current;
        if (g == null || c == null) {
            return;
        }
        Img img = g.trackedAfterStore(c);
        if (img != null) {
            afterWhole(g, c, img);
        } else {
            afterView(g, c);
        }
    }

    /**
     * After a mutating call on a view, iterator or entry: its root changes
     * the one key the call changed if it is known ({@link ViewKeys}),
     * else the root is re-imaged whole.
     */
    private static void afterView(Graph g, Object c) {
        Object root = viewRoot(g, c);
        Object key = ViewKeys.takePending(c);
        if (root != null && key != ViewKeys.none() && ViewKeys.changed(c, root, key)) {
            afterKey(root, key);
        } else if (root != null && root.getClass().isArray()) {
            CallBarriers.afterArray(root, null); // Arrays.asList(a): the array is re-imaged, one commit
        } else if (root != null) {
            Img img = g.tracked(root);
            if (img != null) {
                afterWhole(g, root, img);
            }
        }
    }

    /**
     * The whole-collection hook. Not in a region of its own: an append is
     * already atomic (one 8-byte length store publishes it) and a re-imaging
     * is its own region, and in msync mode each undo-log entry of a region
     * costs an msync, so an append costs fewer durability points as the
     * new elements' conversion (one commit) and two persists than logged in
     * one region. If it fails outside a region (a full pool), the image
     * keeps its old contents; when they are known (the shadow), the Java
     * collection is put back to them, so the call did not happen on either side.
     */
    private static void afterWhole(Graph g, Object c, Img img) {
        boolean implicit = g.region() == null;
        Object[] old = img.shadow;
        try {
            g.resyncCollection(c, img);
        } catch (RuntimeException | Error e) {
            if (implicit && old != null) {
                Codec.restore(c, old);
                img.shadow = null; // re-image from scratch next time
                img.capacity = 0;
            }
            throw e;
        }
    }
}
