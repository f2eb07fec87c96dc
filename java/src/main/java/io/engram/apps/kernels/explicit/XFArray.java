package io.engram.apps.kernels.explicit;

import io.engram.apps.kernels.Seq;
import io.engram.heap.Durability;
import io.engram.heap.EngineHeap;
import io.engram.heap.Heap;
import io.engram.heap.Heap.TypeDesc;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * FArray written against the explicit low-level API: the same balanced tree
 * of immutable nodes {left, right, value} as the AutoPersist FArray, under a
 * holder {size, root}. An update allocates and persists the new path nodes,
 * then in one region logs and switches the holder's root and frees the old
 * path (at commit). A crash leaves the old or the new version.
 */
public final class XFArray implements Seq, AutoCloseable {
    private static final String ROOT = "x.farray";
    private final Heap heap;
    private final int nodeType;
    private final long holder;

    private XFArray(Heap heap, int nodeType, long holder) {
        this.heap = heap;
        this.nodeType = nodeType;
        this.holder = holder;
    }

    public static XFArray open(Path p, int n, Durability d) {
        return open(EngineHeap.open(p, 256L << 20, d, true), n);
    }

    /** Over an open heap: frees what no root reaches, then {@link #attach}. */
    public static XFArray open(Heap heap, int n) {
        heap.sweep(a -> true);
        return attach(heap, n);
    }

    /** Over an open heap (the crash explorer's images too): attaches to the root, or creates it with {@code n} elements. */
    public static XFArray attach(Heap heap, int n) {
        int nt = heap.registerType(new TypeDesc("x.fnode", 24, new int[] {0, 8}, "x.fnode{left:ptr,right:ptr,value:i64}"));
        int ht = heap.registerType(new TypeDesc("x.fholder", 16, new int[] {8}, "x.fholder{size:i64,root:ptr}"));
        long h = heap.root(ROOT);
        if (h == 0) {
            h = heap.alloc(ht);
            XFArray x = new XFArray(heap, nt, h);
            heap.putLong(h, n);
            heap.putLong(h + 8, x.build(0, n));
            heap.persist(h, 16);
            heap.setRoot(ROOT, h);
        }
        return new XFArray(heap, nt, h);
    }

    private long node(long left, long right, long value) {
        long a = heap.alloc(nodeType);
        heap.putLong(a, left);
        heap.putLong(a + 8, right);
        heap.putLong(a + 16, value);
        heap.persist(a, 24);
        return a;
    }

    private long build(int lo, int hi) {
        if (hi - lo == 1) {
            return node(0, 0, 0);
        }
        int mid = (lo + hi) >>> 1;
        return node(build(lo, mid), build(mid, hi), 0);
    }

    private long with(long n, int lo, int hi, int i, long v, List<Long> old) {
        old.add(n);
        if (hi - lo == 1) {
            return node(0, 0, v);
        }
        int mid = (lo + hi) >>> 1;
        long l = heap.getLong(n);
        long r = heap.getLong(n + 8);
        return i < mid ? node(with(l, lo, mid, i, v, old), r, 0) : node(l, with(r, mid, hi, i, v, old), 0);
    }

    @Override public int size() { return (int) heap.getLong(holder); }

    @Override
    public long get(int i) {
        long n = heap.getLong(holder + 8);
        int lo = 0;
        int hi = size();
        while (hi - lo > 1) {
            int mid = (lo + hi) >>> 1;
            if (i < mid) {
                n = heap.getLong(n);
                hi = mid;
            } else {
                n = heap.getLong(n + 8);
                lo = mid;
            }
        }
        return heap.getLong(n + 16);
    }

    @Override
    public void set(int i, long v) {
        List<Long> old = new ArrayList<>();
        long root = with(heap.getLong(holder + 8), 0, size(), i, v, old);
        heap.begin();
        heap.log(holder + 8, 8);
        heap.putLong(holder + 8, root);
        for (long o : old) {
            heap.free(o);
        }
        heap.commit();
    }

    @Override
    public void close() {
        heap.close();
    }
}
