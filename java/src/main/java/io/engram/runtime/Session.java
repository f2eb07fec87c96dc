package io.engram.runtime;

import io.engram.DurableRoot;
import io.engram.EngramException;
import io.engram.EngramException.Code;
import io.engram.heap.Heap;
import io.engram.runtime.IdentityTable.Img;

import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.function.Supplier;

/**
 * One open pool and the runtime state around it: opening (recovery of the
 * durable roots into their static fields), closing, failure-atomic
 * regions and introspection. {@link io.engram.Engram} is its public face.
 *
 * <p>One pool is open per JVM at a time (the paper's single image).
 */
public final class Session {
    private static final Object LOCK = new Object();
    private static volatile Session currentSession;
    private final Heap heap;
    private final Graph graph;
    private final String report;

    private Session(Heap heap, Graph graph, String report) {
        this.heap = heap;
        this.graph = graph;
        this.report = report;
    }

    /**
     * Opens a session on {@code heap}: rebuilds the graph from its roots,
     * assigns each root to its {@code @DurableRoot} static field (running
     * the class's static initializer first), sweeps unreachable images, and
     * makes the values of durable roots already assigned but not in the pool
     * recoverable.
     */
    public static Session open(Heap heap, ClassLoader loader) {
        synchronized (LOCK) {
            if (Graph.current != null) {
                heap.close();
                throw new EngramException(Code.BUSY, "a pool is already open in this JVM; close it first");
            }
            try {
                currentSession = start(heap, loader);
                return currentSession;
            } catch (RuntimeException | Error e) {
                Graph.current = null;
                heap.close();
                throw e;
            }
        }
    }

    private static Session start(Heap heap, ClassLoader loader) {
        Graph g = new Graph(heap);
        Map<String, Long> roots = new LinkedHashMap<>();
        for (String name : heap.rootNames()) {
            roots.put(name, heap.root(name));
        }
        long t0 = cpuNanos();
        Recovery rec = new Recovery(g, loader);
        Map<String, Object> values = rec.recover(roots);
        long t1 = cpuNanos();
        Map<String, Field> fields = new HashMap<>();
        for (String name : roots.keySet()) {
            fields.put(name, rootField(name, loader));
        }
        for (var e : values.entrySet()) {
            Field f = fields.get(e.getKey());
            if (e.getValue() != null && !f.getType().isInstance(e.getValue())) {
                throw new EngramException(Code.ROOT_TYPE, "root " + e.getKey() + " holds a "
                        + e.getValue().getClass().getName() + ", the field is a " + f.getType().getName());
            }
            Codec.set(f, null, e.getValue());
        }
        rec.publish();
        LongMap<Boolean> live = rec.liveAddresses();
        long t2 = cpuNanos();
        heap.sweep(live::containsKey);
        long t3 = cpuNanos();
        Graph.current = g;
        persistAssignedRoots(g, roots.keySet(), loader);
        if (Boolean.getBoolean("engram.timing")) { // phases of an open, for profiling restarts
            System.err.printf("engram open (thread CPU): recover %.1f ms, publish %.1f ms, sweep %.1f ms, roots %.1f ms%n",
                    (t1 - t0) / 1e6, (t2 - t1) / 1e6, (t3 - t2) / 1e6, (cpuNanos() - t3) / 1e6);
        }
        return new Session(heap, g, heap.openReport() + ", " + live.size() + " live images, " + roots.size()
                + " roots");
    }

    /** The calling thread's CPU time (for {@code -Dengram.timing}), or wall time where not supported. */
    public static long cpuNanos() {
        java.lang.management.ThreadMXBean b = java.lang.management.ManagementFactory.getThreadMXBean();
        return b.isCurrentThreadCpuTimeSupported() ? b.getCurrentThreadCpuTime() : System.nanoTime();
    }

    /** The static field a root name ({@code pkg.Class.field}) names, its class initialised. */
    private static Field rootField(String name, ClassLoader loader) {
        int dot = name.lastIndexOf('.');
        try {
            Class<?> c = Class.forName(name.substring(0, dot), true, loader);
            Field f = c.getDeclaredField(name.substring(dot + 1));
            if (!Modifier.isStatic(f.getModifiers()) || !f.isAnnotationPresent(DurableRoot.class)) {
                throw new EngramException(Code.LAYOUT_MISMATCH, "root " + name + " is no longer a @DurableRoot static field");
            }
            f.setAccessible(true);
            return f;
        } catch (ClassNotFoundException | NoSuchFieldException e) {
            throw new EngramException(Code.LAYOUT_MISMATCH, "the pool has root " + name
                    + ", which this program does not declare", e);
        }
    }

    private static void persistAssignedRoots(Graph g, Set<String> restored, ClassLoader loader) {
        for (String cn : Registry.ROOT_CLASSES) {
            Class<?> c;
            try {
                c = Class.forName(cn, false, loader);
            } catch (ClassNotFoundException e) {
                continue; // loaded by another loader: its own stores will persist it
            }
            for (Field f : c.getDeclaredFields()) {
                if (Modifier.isStatic(f.getModifiers()) && f.isAnnotationPresent(DurableRoot.class)
                        && !restored.contains(Barriers.rootName(f)) && !f.getType().isPrimitive()) {
                    f.setAccessible(true);
                    Object v = Codec.get(f, null);
                    if (v != null) {
                        g.storeRoot(Barriers.rootName(f), f, v);
                    }
                }
            }
        }
    }

    /** Closes the pool; objects stay in the Java heap but are no longer persisted. */
    public void close() {
        synchronized (LOCK) {
            if (Graph.current == graph) {
                Graph.current = null;
                currentSession = null;
                StoreGuards.rearm(); // no object is recoverable now
            }
            heap.close();
        }
    }

    /** Drops the pool as a crash would (no clean close; the next open recovers it). */
    public void abandon() {
        synchronized (LOCK) {
            if (Graph.current == graph) {
                Graph.current = null;
                currentSession = null;
                StoreGuards.rearm(); // no object is recoverable now
            }
            if (heap instanceof io.engram.heap.EngineHeap e) {
                e.abandon();
            } else {
                heap.close();
            }
        }
    }

    /**
     * Rebuilds the graph of {@code heap}'s roots without opening a session
     * (no static field is assigned, no hook sees it): root name -> object.
     * For the crash explorer's invariant checks.
     */
    public static Map<String, Object> inspect(Heap heap, ClassLoader loader) {
        Graph g = new Graph(heap);
        Map<String, Long> roots = new LinkedHashMap<>();
        for (String name : heap.rootNames()) {
            roots.put(name, heap.root(name));
        }
        return new Recovery(g, loader).recover(roots);
    }

    public String report() {
        return report;
    }

    public Heap heap() {
        return heap;
    }

    /** Recoverable objects known to the identity table now. */
    public int recoverableObjects() {
        return graph.table.size();
    }

    // ---- regions ------------------------------------------------------

    /**
     * Runs {@code body} as a failure-atomic region (flattened nesting). An
     * exception leaving any level rolls back everything since the outermost
     * level began, both the pool and the Java objects, and is rethrown; an
     * outer level that catches it goes on in a fresh region.
     */
    public static <T> T atomic(Supplier<T> body) {
        RegionState r = Graph.REGIONS.get();
        if (r.depth == 0) {
            Graph g = Graph.current;
            if (g != null) {
                g.beginRegion(r);
            }
        }
        r.depth++;
        T out;
        try {
            out = body.get();
        } catch (RuntimeException | Error e) {
            r.depth--;
            rollback(r);
            throw e;
        }
        r.depth--;
        if (r.depth == 0 && r.graph != null) {
            r.graph.commitRegion(r);
        }
        return out;
    }

    private static void rollback(RegionState r) {
        Graph g = r.graph;
        if (g == null) {
            r.clear();
            return;
        }
        g.abortRegion(r);
        if (r.depth > 0 && Graph.current == g) {
            g.beginRegion(r);
        }
    }

    public static boolean inRegion() {
        return Graph.REGIONS.get().depth > 0;
    }

    public static int regionDepth() {
        return Graph.REGIONS.get().depth;
    }

    // ---- introspection ------------------------------------------------

    public static boolean isRecoverable(Object o) {
        Graph g = Graph.current;
        if (g == null || o == null) {
            return false;
        }
        Img img = g.tracked(o);
        return img != null && img.ready;
    }

    /** The pool address of {@code o}'s image, or 0. */
    public static long imageAddress(Object o) {
        Graph g = Graph.current;
        Img img = g == null || o == null ? null : g.tracked(o);
        return img == null ? 0 : img.addr;
    }

    /** Makes {@code o} recoverable without a root (the paper's explicit conversion); returns its image. */
    public static long makeRecoverable(Object o) {
        Graph g = Graph.current;
        if (g == null) {
            throw new EngramException(Code.NO_POOL, "no pool is open");
        }
        return g.persist(o, () -> "makeRecoverable(" + Graph.describe(o) + ")");
    }

    /** The open session, or null. */
    public static Session current() {
        return currentSession;
    }
}
