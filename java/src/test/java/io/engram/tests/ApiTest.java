package io.engram.tests;

import io.engram.DurableRoot;
import io.engram.Engram;
import io.engram.EngramException;
import io.engram.NotPersistableException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.*;

/** Semantics of every annotation and API call. */
class ApiTest {
    private Engram pool;

    @AfterEach
    void close() {
        if (pool != null && Engram.isOpen()) {
            pool.close();
        }
        pool = null;
    }

    private Path open(String name) throws Exception {
        Path p = Pools.fresh(name);
        pool = Pools.open(p);
        return p;
    }

    private void reopen(Path p) {
        pool = Pools.reopen(pool, p);
    }

    @Test
    void durableRootMakesItsGraphRecoverable() throws Exception {
        open("api-root");
        Node a = new Node(1, "a");
        Node b = new Node(2, "b");
        a.next = b;
        assertFalse(Engram.isRecoverable(a));
        assertFalse(Engram.inPersistentMemory(a));
        Roots.head = a;
        assertTrue(Engram.isRecoverable(a));
        assertTrue(Engram.isRecoverable(b));
        assertTrue(Engram.isRecoverable("b"), "the label string is reached too");
        assertTrue(Engram.inPersistentMemory(b));
        Node c = new Node(3, "c");
        b.next = c; // a store into a recoverable object makes its value recoverable
        assertTrue(Engram.isRecoverable(c));
    }

    @Test
    void plainStaticFieldIsNotARoot() throws Exception {
        open("api-plain");
        Node n = new Node(1, "x");
        Roots.plain = n;
        assertFalse(Engram.isRecoverable(n));
    }

    @Test
    void isDurableRootReportsTheAnnotation() throws Exception {
        assertTrue(Engram.isDurableRoot(Roots.class.getField("head")));
        assertFalse(Engram.isDurableRoot(Roots.class.getField("plain")));
        assertFalse(Engram.isDurableRoot(Node.class.getField("next")));
        assertNotNull(Roots.class.getField("head").getAnnotation(DurableRoot.class));
    }

    @Test
    void unrecoverableAndTransientFieldsAreNotPersisted() throws Exception {
        Path p = open("api-unrec");
        Node a = new Node(1, "a");
        Node hidden = new Node(99, "hidden");
        a.scratch = hidden;
        a.cache = 7;
        Roots.head = a;
        assertFalse(Engram.isRecoverable(hidden), "reached only through an @Unrecoverable field");
        Node later = new Node(5, "later");
        a.scratch = later;
        assertFalse(Engram.isRecoverable(later));
        reopen(p);
        assertEquals(1, Roots.head.value);
        assertNull(Roots.head.scratch);
        assertEquals(0, Roots.head.cache);
    }

    @Test
    void storesOutsideRegionsAreDurable() throws Exception {
        Path p = open("api-seq");
        Roots.head = new Node(1, "a");
        Roots.head.value = 2;
        Roots.head.label = "changed";
        Roots.head.next = new Node(3, "n");
        Roots.head.next.value = 4;
        reopen(p);
        assertEquals(2, Roots.head.value);
        assertEquals("changed", Roots.head.label);
        assertEquals(4, Roots.head.next.value);
    }

    @Test
    void regionIntrospectionAndNesting() throws Exception {
        open("api-depth");
        assertFalse(Engram.inFailureAtomicRegion());
        assertEquals(0, Engram.regionDepth());
        List<Integer> depths = new ArrayList<>();
        Engram.atomic(() -> {
            depths.add(Engram.regionDepth());
            Engram.atomic(() -> depths.add(Engram.regionDepth()));
            assertTrue(Engram.inFailureAtomicRegion());
        });
        assertEquals(List.of(1, 2), depths);
        assertEquals(0, Engram.regionDepth());
        assertEquals(42, Engram.atomic(() -> 42));
    }

    @Test
    void regionCommitsAllStores() throws Exception {
        Path p = open("api-commit");
        Node a = new Node(100, "a"), b = new Node(0, "b");
        a.next = b;
        Roots.head = a;
        Engram.atomic(() -> {
            a.value -= 30;
            b.value += 30;
            b.next = new Node(7, "new");
        });
        reopen(p);
        assertEquals(70, Roots.head.value);
        assertEquals(30, Roots.head.next.value);
        assertEquals(7, Roots.head.next.next.value);
    }

    @Test
    void exceptionRollsBackPoolAndObjects() throws Exception {
        Path p = open("api-abort");
        Node a = new Node(100, "a"), b = new Node(0, "b");
        a.next = b;
        Roots.head = a;
        Roots.list = new ArrayList<>(List.of("x"));
        int[] arr = {1, 2, 3};
        a.other = new Node(0, "holder");
        a.other.scratch = null;
        Roots.any = arr;
        Node fresh = new Node(5, "fresh");
        IllegalStateException boom = new IllegalStateException("boom");
        IllegalStateException thrown = assertThrows(IllegalStateException.class, () -> Engram.atomic(() -> {
            a.value -= 30;
            b.value += 30;
            b.next = fresh;
            arr[1] = 20;
            Roots.list.add("y");
            Engram.atomic(() -> {
                a.label = "inner";
                throw boom;
            });
        }));
        assertSame(boom, thrown);
        assertEquals(0, Engram.regionDepth());
        // the Java objects are back to their state before the region
        assertEquals(100, a.value);
        assertEquals(0, b.value);
        assertNull(b.next);
        assertEquals("a", a.label);
        assertArrayEquals(new int[] {1, 2, 3}, arr);
        assertEquals(List.of("x"), Roots.list);
        assertFalse(Engram.isRecoverable(fresh), "made recoverable in the rolled-back region: forgotten");
        // and so is the pool
        reopen(p);
        assertEquals(100, Roots.head.value);
        assertEquals(0, Roots.head.next.value);
        assertNull(Roots.head.next.next);
        assertArrayEquals(new int[] {1, 2, 3}, (int[]) Roots.any);
        assertEquals(List.of("x"), Roots.list);
        // appends after a rolled-back append land where they should
        for (int i = 0; i < 20; i++) {
            Roots.list.add("z" + i);
        }
        assertThrows(IllegalStateException.class, () -> Engram.atomic(() -> {
            Roots.list.add("gone");
            throw new IllegalStateException();
        }));
        Roots.list.add("last");
        List<Object> expected = new ArrayList<>(Roots.list);
        reopen(p);
        assertEquals(expected, Roots.list);
        assertEquals(22, Roots.list.size());
    }

    @Test
    void outerRegionGoesOnAfterCaughtInnerFailure() throws Exception {
        Path p = open("api-inner");
        Roots.head = new Node(1, "a");
        Engram.atomic(() -> {
            Roots.head.value = 2;
            try {
                Engram.atomic(() -> {
                    Roots.head.value = 3;
                    throw new RuntimeException("inner");
                });
            } catch (RuntimeException expected) {
                assertEquals(1, Roots.head.value, "the whole flattened region rolled back");
            }
            Roots.head.label = "after";
        });
        reopen(p);
        assertEquals(1, Roots.head.value);
        assertEquals("after", Roots.head.label);
    }

    @Test
    void threadCannotBePersisted() throws Exception {
        open("api-thread");
        Node a = new Node(1, "a");
        Roots.head = a;
        Node holder = new Node(2, "holder");
        holder.other = new Node(3, "deep");
        Thread t = new Thread(() -> { });
        holder.other.scratch = t; // @Unrecoverable: fine
        Roots.any = null;
        ThreadHolder th = new ThreadHolder();
        th.thread = t;
        holder.other.next = null;
        NotPersistableException e = assertThrows(NotPersistableException.class, () -> Roots.any = wrap(th));
        assertEquals(Thread.class, e.type());
        assertTrue(e.getMessage().contains("java.lang.Thread"), e.getMessage());
        assertTrue(e.path().startsWith("io.engram.tests.Roots.any"), e.path());
        assertTrue(e.path().endsWith(".thread"), e.path());
        assertNull(Roots.any, "the store did not happen");
        assertFalse(Engram.isRecoverable(th));
        Node n = new Node(4, "n");
        assertThrows(NotPersistableException.class, () -> a.other = wrapNode(th));
        assertNull(a.other);
        assertFalse(Engram.isRecoverable(n));
    }

    private static Object wrap(Object o) {
        return new Object[] {o};
    }

    private static Node wrapNode(Object o) {
        Node n = new Node(0, "w");
        n.other = new Node(1, "w2");
        n.next = null;
        n.label = "x";
        Node m = new Node(2, "m");
        m.scratch = o;
        n.other.other = null;
        ThreadHolderNode h = new ThreadHolderNode();
        h.payload = o;
        n.other.next = h;
        return n;
    }

    @Test
    void lambdaCannotBePersisted() throws Exception {
        open("api-lambda");
        Roots.list = new ArrayList<>();
        int captured = 3;
        Runnable r = () -> System.out.println(captured);
        NotPersistableException e = assertThrows(NotPersistableException.class, () -> Roots.list.add(r));
        assertTrue(e.getMessage().contains("lambda"), e.getMessage());
        assertTrue(Roots.list.isEmpty());
    }

    @Test
    void socketCannotBePersisted() throws Exception {
        open("api-socket");
        Roots.list = new ArrayList<>();
        try (java.net.Socket s = new java.net.Socket()) {
            NotPersistableException e = assertThrows(NotPersistableException.class, () -> Roots.any = wrap(s));
            assertEquals(java.net.Socket.class, e.type());
            assertTrue(e.getMessage().contains("java.net.Socket"), e.getMessage());
            assertEquals("io.engram.tests.Roots.any[0]", e.path());
            assertThrows(NotPersistableException.class, () -> Roots.list.add(s));
        }
        assertNull(Roots.any);
        assertTrue(Roots.list.isEmpty());
    }

    @Test
    void classesWrittenThroughHandlesCannotBePersisted() throws Exception {
        open("api-handles");
        Roots.list = new ArrayList<>();
        VhCounter vc = new VhCounter();
        vc.increment();
        NotPersistableException e = assertThrows(NotPersistableException.class, () -> Roots.list.add(wrap(vc)));
        assertEquals(VhCounter.class, e.type());
        assertTrue(e.getMessage().contains("VarHandle"), e.getMessage());
        assertTrue(e.path().contains("ArrayList") && e.path().endsWith("[0]"), e.path());
        assertTrue(Roots.list.isEmpty(), "the store did not happen");
        UpdatedCell cell = new UpdatedCell();
        CellUpdater.bump(cell);
        e = assertThrows(NotPersistableException.class, () -> Roots.any = cell);
        assertEquals(UpdatedCell.class, e.type());
        assertTrue(e.getMessage().contains("AtomicIntegerFieldUpdater"), e.getMessage());
        assertTrue(e.getMessage().contains(CellUpdater.class.getName()), e.getMessage());
        assertNull(Roots.any);
        Roots.any = new CellUpdater(); // the class holding the updater is itself persistable
        assertTrue(Engram.isRecoverable(Roots.any));
    }

    /** Writes its own field through a VarHandle. */
    public static final class VhCounter {
        private static final java.lang.invoke.VarHandle N;
        static {
            try {
                N = java.lang.invoke.MethodHandles.lookup().findVarHandle(VhCounter.class, "n", int.class);
            } catch (ReflectiveOperationException ex) {
                throw new ExceptionInInitializerError(ex);
            }
        }
        volatile int n;

        void increment() {
            N.getAndAdd(this, 1);
        }
    }

    /** A cell whose field another class writes through a field updater. */
    public static final class UpdatedCell {
        volatile int value;
    }

    /** Holds the updater of UpdatedCell.value. */
    public static final class CellUpdater {
        private static final java.util.concurrent.atomic.AtomicIntegerFieldUpdater<UpdatedCell> U =
                java.util.concurrent.atomic.AtomicIntegerFieldUpdater.newUpdater(UpdatedCell.class, "value");
        public int unrelated;

        static void bump(UpdatedCell c) {
            U.incrementAndGet(c);
        }
    }

    @Test
    void explicitConversionAndOpenChecks() throws Exception {
        open("api-explicit");
        Node n = new Node(1, "n");
        Engram.makeRecoverable(n);
        assertTrue(Engram.isRecoverable(n));
        EngramException busy = assertThrows(EngramException.class, () -> Pools.open(Pools.fresh("api-other")));
        assertEquals(EngramException.Code.BUSY, busy.code());
    }

    @Test
    void recoverNeedsAnExistingImage() throws Exception {
        Path p = Pools.fresh("api-recover");
        EngramException e = assertThrows(EngramException.class, () -> Engram.recover(p.toString()));
        assertEquals(EngramException.Code.IO, e.code());
        pool = Pools.open(p);
        Roots.head = new Node(11, "r");
        pool.close();
        Roots.reset();
        pool = Engram.recover(p.toString(), Pools.OPTIONS);
        assertEquals(11, Roots.head.value);
    }

    /** Holds a thread (not persistable). */
    public static final class ThreadHolder {
        public Thread thread;
    }

    /** A node subclass with an untyped payload. */
    public static final class ThreadHolderNode extends Node {
        public Object payload;
    }
}
