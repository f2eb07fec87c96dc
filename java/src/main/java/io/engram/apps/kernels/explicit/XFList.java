package io.engram.apps.kernels.explicit;

import io.engram.apps.kernels.Seq;
import io.engram.heap.Durability;
import io.engram.heap.EngineHeap;
import io.engram.heap.Heap;
import io.engram.heap.Heap.TypeDesc;

import java.nio.file.Path;

/**
 * FList written against the explicit low-level API: immutable cells {head,
 * tail} under a holder {size, first}. An update, insert or remove at i
 * allocates and persists copies of the i cells before it (sharing the rest),
 * then in one region logs and rewrites the holder and frees the replaced
 * cells (at commit). A crash leaves the old or the new version.
 */
public final class XFList implements Seq, AutoCloseable {
    private static final String ROOT = "x.flist";
    private final Heap heap;
    private final int cellType;
    private final long holder;

    private XFList(Heap heap, int cellType, long holder) {
        this.heap = heap;
        this.cellType = cellType;
        this.holder = holder;
    }

    public static XFList open(Path p, int n, Durability d) {
        return open(EngineHeap.open(p, 256L << 20, d, true), n);
    }

    /** Over an open heap: frees what no root reaches, then {@link #attach}. */
    public static XFList open(Heap heap, int n) {
        heap.sweep(a -> true);
        return attach(heap, n);
    }

    /** Over an open heap (the crash explorer's images too): attaches to the root, or creates it with {@code n} elements. */
    public static XFList attach(Heap heap, int n) {
        int ct = heap.registerType(new TypeDesc("x.cons", 16, new int[] {8}, "x.cons{head:i64,tail:ptr}"));
        int ht = heap.registerType(new TypeDesc("x.fholder", 16, new int[] {8}, "x.fholder{size:i64,root:ptr}"));
        long h = heap.root(ROOT);
        XFList x = new XFList(heap, ct, h == 0 ? heap.alloc(ht) : h);
        if (h == 0) {
            long first = 0;
            for (int i = 0; i < n; i++) {
                first = x.cons(0, first);
            }
            heap.putLong(x.holder, n);
            heap.putLong(x.holder + 8, first);
            heap.persist(x.holder, 16);
            heap.setRoot(ROOT, x.holder);
        }
        return x;
    }

    private long cons(long head, long tail) {
        long a = heap.alloc(cellType);
        heap.putLong(a, head);
        heap.putLong(a + 8, tail);
        heap.persist(a, 16);
        return a;
    }

    private long drop(long c, int i) {
        for (int k = 0; k < i; k++) {
            c = heap.getLong(c + 8);
        }
        return c;
    }

    /** Copies the first i cells in front of rest (persisted), then publishes the new version. */
    private void publish(int i, long rest, long size, long dropped) {
        long first = heap.getLong(holder + 8);
        long[] heads = new long[i];
        long[] old = new long[i];
        long c = first;
        for (int k = 0; k < i; k++) {
            old[k] = c;
            heads[k] = heap.getLong(c);
            c = heap.getLong(c + 8);
        }
        for (int k = i - 1; k >= 0; k--) {
            rest = cons(heads[k], rest);
        }
        heap.begin();
        heap.log(holder, 16);
        heap.putLong(holder, size);
        heap.putLong(holder + 8, rest);
        for (long o : old) {
            heap.free(o);
        }
        if (dropped != 0) {
            heap.free(dropped);
        }
        heap.commit();
    }

    @Override public int size() { return (int) heap.getLong(holder); }
    @Override public long get(int i) { return heap.getLong(drop(heap.getLong(holder + 8), i)); }
    @Override public boolean structural() { return true; }

    @Override
    public void set(int i, long v) {
        long at = drop(heap.getLong(holder + 8), i);
        publish(i, cons(v, heap.getLong(at + 8)), size(), at);
    }

    @Override
    public void insert(int i, long v) {
        publish(i, cons(v, drop(heap.getLong(holder + 8), i)), size() + 1L, 0);
    }

    @Override
    public void remove(int i) {
        long at = drop(heap.getLong(holder + 8), i);
        publish(i, heap.getLong(at + 8), size() - 1L, at);
    }

    @Override
    public void close() {
        heap.close();
    }
}
