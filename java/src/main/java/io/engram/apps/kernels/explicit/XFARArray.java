package io.engram.apps.kernels.explicit;

import io.engram.apps.kernels.Seq;
import io.engram.heap.Durability;
import io.engram.heap.EngineHeap;
import io.engram.heap.Heap;
import io.engram.heap.Heap.TypeDesc;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;

/**
 * FARArray written against the explicit low-level API: every update
 * allocates a new image [n][v...], copies the current one into it, changes
 * one value, persists it, then in one region switches the root to it and
 * frees the old image (at commit). A crash leaves the old or the new version.
 */
public final class XFARArray implements Seq, AutoCloseable {
    private static final String ROOT = "x.fararray";
    private final Heap heap;
    private final int type;
    private long arr;

    private XFARArray(Heap heap, int type, long arr) {
        this.heap = heap;
        this.type = type;
        this.arr = arr;
    }

    public static XFARArray open(Path p, int n, Durability d) {
        return open(EngineHeap.open(p, 256L << 20, d, true), n);
    }

    /** Over an open heap: frees what no root reaches, then {@link #attach}. */
    public static XFARArray open(Heap heap, int n) {
        heap.sweep(a -> true);
        return attach(heap, n);
    }

    /** Over an open heap (the crash explorer's images too): attaches to the root, or creates it with {@code n} elements. */
    public static XFARArray attach(Heap heap, int n) {
        int t = heap.registerType(new TypeDesc("x.i64", 8, new int[0], "i64"));
        long a = heap.root(ROOT);
        if (a == 0) {
            a = heap.allocArray(t, n + 1L);
            heap.putLong(a, n);
            heap.persist(a, 8L * (n + 1));
            heap.setRoot(ROOT, a);
        }
        return new XFARArray(heap, t, a);
    }

    @Override public int size() { return (int) heap.getLong(arr); }
    @Override public long get(int i) { return heap.getLong(arr + 8L * (i + 1)); }

    @Override
    public void set(int i, long v) {
        int n = size();
        long[] copy = new long[n + 1];
        heap.read(arr, MemorySegment.ofArray(copy));
        copy[i + 1] = v;
        long next = heap.allocArray(type, n + 1L);
        heap.write(next, MemorySegment.ofArray(copy));
        heap.persist(next, 8L * (n + 1));
        heap.begin();
        heap.setRoot(ROOT, next);
        heap.free(arr);
        heap.commit();
        arr = next;
    }

    @Override
    public void close() {
        heap.close();
    }
}
