package io.engram.apps.kernels.explicit;

import io.engram.apps.kernels.Seq;
import io.engram.heap.Durability;
import io.engram.heap.EngineHeap;
import io.engram.heap.Heap;
import io.engram.heap.Heap.TypeDesc;

import java.nio.file.Path;

/**
 * MList written against the explicit low-level API: a head {size, first}
 * and nodes {value, next} allocated, written and persisted by hand; a new
 * node is persisted before it is linked; an insert or remove logs the link
 * and the size in a region (undo log) and frees the removed node at commit.
 * A crash leaves size equal to the number of nodes.
 */
public final class XMList implements Seq, AutoCloseable {
    private static final String ROOT = "x.mlist";
    private final Heap heap;
    private final int nodeType;
    private final long head;

    private XMList(Heap heap, int nodeType, long head) {
        this.heap = heap;
        this.nodeType = nodeType;
        this.head = head;
    }

    public static XMList open(Path p, int n, Durability d) {
        return open(EngineHeap.open(p, 256L << 20, d, true), n);
    }

    /** Over an open heap: frees what no root reaches, then {@link #attach}. */
    public static XMList open(Heap heap, int n) {
        heap.sweep(a -> true);
        return attach(heap, n);
    }

    /** Over an open heap (the crash explorer's images too): attaches to the root, or creates it with {@code n} elements. */
    public static XMList attach(Heap heap, int n) {
        int nt = heap.registerType(new TypeDesc("x.mnode", 16, new int[] {8}, "x.mnode{value:i64,next:ptr}"));
        int ht = heap.registerType(new TypeDesc("x.mhead", 16, new int[] {8}, "x.mhead{size:i64,first:ptr}"));
        long h = heap.root(ROOT);
        if (h == 0) {
            h = heap.alloc(ht);
            long first = 0;
            for (int i = 0; i < n; i++) {
                long node = heap.alloc(nt);
                heap.putLong(node + 8, first);
                heap.persist(node, 16);
                first = node;
            }
            heap.putLong(h, n);
            heap.putLong(h + 8, first);
            heap.persist(h, 16);
            heap.setRoot(ROOT, h);
        }
        return new XMList(heap, nt, h);
    }

    /** The address of the link (a next field, or head.first) that points to node i. */
    private long link(int i) {
        long at = head + 8;
        for (int k = 0; k < i; k++) {
            at = heap.getLong(at) + 8;
        }
        return at;
    }

    @Override public int size() { return (int) heap.getLong(head); }
    @Override public long get(int i) { return heap.getLong(heap.getLong(link(i))); }
    @Override public boolean structural() { return true; }

    @Override
    public void set(int i, long v) {
        long node = heap.getLong(link(i));
        heap.putLong(node, v);
        heap.persist(node, 8);
    }

    @Override
    public void insert(int i, long v) {
        long at = link(i);
        long node = heap.alloc(nodeType);
        heap.putLong(node, v);
        heap.putLong(node + 8, heap.getLong(at));
        heap.persist(node, 16);
        heap.begin();
        heap.log(at, 8);
        heap.putLong(at, node);
        heap.log(head, 8);
        heap.putLong(head, heap.getLong(head) + 1);
        heap.commit();
    }

    @Override
    public void remove(int i) {
        long at = link(i);
        long node = heap.getLong(at);
        heap.begin();
        heap.log(at, 8);
        heap.putLong(at, heap.getLong(node + 8));
        heap.log(head, 8);
        heap.putLong(head, heap.getLong(head) - 1);
        heap.free(node);
        heap.commit();
    }

    @Override
    public void close() {
        heap.close();
    }
}
