package io.engram.apps.kernels.explicit;

import io.engram.apps.kernels.Seq;
import io.engram.heap.Durability;
import io.engram.heap.EngineHeap;
import io.engram.heap.Heap;
import io.engram.heap.Heap.TypeDesc;

import java.nio.file.Path;

/**
 * MArray written against the explicit low-level API (the runtime's Heap seam
 * over the engine's C ABI), as a programmer without AutoPersist would: the
 * pool image [n][v0]...[vn-1] is allocated, written and flushed by hand;
 * every update is stored and persisted before it returns (the same
 * sequential persistency as the AutoPersist MArray). Every {@code heap.}
 * call is counted by {@link io.engram.apps.kernels.Markings}.
 */
public final class XMArray implements Seq, AutoCloseable {
    private static final String ROOT = "x.marray";
    private final Heap heap;
    private final long arr;

    private XMArray(Heap heap, long arr) {
        this.heap = heap;
        this.arr = arr;
    }

    /** Opens (or creates with {@code n} zeros) the array in the pool at {@code p}. */
    public static XMArray open(Path p, int n, Durability d) {
        return open(EngineHeap.open(p, 256L << 20, d, true), n);
    }

    /** Over an open heap: frees what no root reaches, then {@link #attach}. */
    public static XMArray open(Heap heap, int n) {
        heap.sweep(a -> true);
        return attach(heap, n);
    }

    /** Over an open heap (the crash explorer's images too): attaches to the root, or creates it with {@code n} elements. */
    public static XMArray attach(Heap heap, int n) {
        int t = heap.registerType(new TypeDesc("x.i64", 8, new int[0], "i64"));
        long a = heap.root(ROOT);
        if (a == 0) {
            a = heap.allocArray(t, n + 1L);
            heap.putLong(a, n);
            heap.persist(a, 8L * (n + 1));
            heap.setRoot(ROOT, a);
        }
        return new XMArray(heap, a);
    }

    @Override public int size() { return (int) heap.getLong(arr); }
    @Override public long get(int i) { return heap.getLong(arr + 8L * (i + 1)); }

    @Override
    public void set(int i, long v) {
        long at = arr + 8L * (i + 1);
        heap.putLong(at, v);
        heap.persist(at, 8);
    }

    @Override
    public void close() {
        heap.close();
    }
}
