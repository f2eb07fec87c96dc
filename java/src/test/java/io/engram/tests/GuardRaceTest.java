package io.engram.tests;

import io.engram.Engram;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.function.IntFunction;

import static org.junit.jupiter.api.Assertions.*;

/**
 * The store hooks' class guards (StoreGuards) under the race they must
 * close: writer threads hammer field and array stores into objects of a
 * class that has no recoverable instance (so their hooks run the guarded,
 * folded-away path) while the main thread makes the first objects of that
 * class recoverable. After the writers stop, the pool is closed and
 * recovered in this JVM, and every recovered object must equal the Java
 * object as the writers left it. Each round uses a class of its own, or a
 * class whose guards the previous pool's close re-armed; one class is
 * written through its superclass's fields (the guard is keyed by the
 * field's owner class). Progress is counted, never timed.
 *
 * <p>{@code -Dengram.test.brokenGuards=true} (a seeded fault: the guards
 * never fail) makes this test fail: the stores after the conversion are
 * then never written to the images.
 */
class GuardRaceTest {
    static final int CELLS = 48;
    static final int WRITERS = 2;
    static final int ROUNDS = Integer.getInteger("engram.guardrace.rounds", 12);
    /** Stores each writer makes before and after the conversion (counted per writer). */
    static final int BEFORE = 20_000;
    static final int AFTER = 300;

    /** A small object stored into the cells (converted by the hooks once a cell is recoverable). */
    static final class Leaf {
        int v;

        Leaf(int v) {
            this.v = v;
        }
    }

    /** Cells of each kind have fields a, b, ref and arr (their own, so that each kind's putfields have their own owner). */
    abstract static class Cell {
        abstract void set(int v, Leaf leaf);

        /** The value of field {@code name} (a copy of the array, the Leaf's value) by reflection. */
        Object get(String name) throws ReflectiveOperationException {
            for (Class<?> k = getClass(); k != Cell.class; k = k.getSuperclass()) {
                try {
                    java.lang.reflect.Field f = k.getDeclaredField(name);
                    Object v = f.get(this);
                    return v instanceof Leaf l ? (Object) l.v : v instanceof int[] a ? java.util.Arrays.toString(a) : v;
                } catch (NoSuchFieldException e) {
                    // declared further up
                }
            }
            throw new NoSuchFieldException(name);
        }
    }

    static final class C0 extends Cell {
        int a;
        long b;
        Leaf ref;
        int[] arr = new int[4];

        void set(int v, Leaf leaf) {
            a = v;
            b = v * 3L;
            ref = leaf;
            arr[v & 3] = v;
        }
    }

    static final class C1 extends Cell {
        int a;
        long b;
        Leaf ref;
        int[] arr = new int[4];

        void set(int v, Leaf leaf) {
            ref = leaf;
            arr[v & 3] = v;
            b = v * 3L;
            a = v;
        }
    }

    static final class C2 extends Cell {
        long b;
        int a;
        int[] arr = new int[4];
        Leaf ref;

        void set(int v, Leaf leaf) {
            b = v * 3L;
            a = v;
            arr[v & 3] = v;
            ref = leaf;
        }
    }

    /** Its fields are written by putfields owned by this class, into objects of {@link Derived}. */
    static class Base extends Cell {
        int a;
        long b;
        Leaf ref;
        int[] arr = new int[4];

        void set(int v, Leaf leaf) {
            a = v;
            ref = leaf;
            b = v * 3L;
            arr[v & 3] = v;
        }
    }

    static final class Derived extends Base {
    }

    @SuppressWarnings("unchecked")
    static final IntFunction<Cell>[] KINDS = new IntFunction[] {i -> new C0(), i -> new C1(), i -> new C2(),
        i -> new Derived()};

    private Engram pool;

    @AfterEach
    void close() {
        if (pool != null && Engram.isOpen()) {
            pool.close();
        }
        Roots.reset();
    }

    @Test
    void storesRacingTheFirstConversionOfTheirClassAreNeverLost() throws Exception {
        for (int round = 0; round < ROUNDS; round++) {
            round(round, KINDS[round % KINDS.length]);
        }
    }

    private void round(int round, IntFunction<Cell> kind) throws Exception {
        Path p = Pools.fresh("guard-race-" + round);
        pool = Pools.open(p);
        Cell[] cells = new Cell[CELLS];
        for (int i = 0; i < CELLS; i++) {
            cells[i] = kind.apply(i);
        }
        AtomicBoolean converted = new AtomicBoolean();
        AtomicLongArray before = new AtomicLongArray(WRITERS);
        AtomicLongArray after = new AtomicLongArray(WRITERS);
        Thread[] ws = new Thread[WRITERS];
        for (int t = 0; t < WRITERS; t++) {
            int id = t;
            ws[t] = new Thread(() -> write(id, cells, converted, before, after));
            ws[t].start();
        }
        for (int t = 0; t < WRITERS; t++) {
            while (before.get(t) < BEFORE) {
                Thread.onSpinWait();
            }
        }
        Roots.any = cells; // the first objects of the class become recoverable while the writers store
        converted.set(true);
        for (Thread w : ws) {
            w.join();
        }
        String what = "round " + round + " (" + cells[0].getClass().getSimpleName() + ")";
        for (int t = 0; t < WRITERS; t++) {
            assertTrue(after.get(t) >= AFTER, what + ": writer " + t + " stopped early");
        }
        pool.close();
        Roots.reset();
        pool = Pools.open(p);
        Object[] back = (Object[]) Roots.any;
        assertNotNull(back, what + ": the root was not recovered");
        for (int i = 0; i < CELLS; i++) {
            Cell want = cells[i];
            Cell got = (Cell) back[i];
            String at = what + ", cell " + i;
            assertSame(want.getClass(), got.getClass(), at);
            for (String f : new String[] {"a", "b", "ref", "arr"}) {
                assertEquals(want.get(f), got.get(f), at + ": " + f);
            }
        }
        pool.close();
        Files.deleteIfExists(p);
    }

    /**
     * Writer {@code t}: stores values of its own into every cell, a new
     * {@link Leaf} every 8th store (null otherwise), counting stores before the conversion
     * and {@link #AFTER} stores after it (then stops).
     */
    private static void write(int t, Cell[] cells, AtomicBoolean converted, AtomicLongArray before,
            AtomicLongArray after) {
        for (int i = 0;; i++) {
            int v = i * WRITERS + t;
            Cell c = cells[(i * 7 + t) % CELLS];
            c.set(v, (i & 7) == 0 ? new Leaf(v) : null);
            if (!converted.get()) {
                before.lazySet(t, before.get(t) + 1);
            } else if (after.incrementAndGet(t) >= AFTER) {
                return;
            }
        }
    }
}
