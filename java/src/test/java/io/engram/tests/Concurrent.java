package io.engram.tests;

import io.engram.DurableRoot;

import java.util.IdentityHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The concurrent workload: several threads each grow their own chain
 * (plain stores, so each chain is durable in program order), link nodes to
 * five shared objects that start non-recoverable (so conversions of
 * overlapping graphs race), store their newest node into one shared root,
 * and increment the shared objects' counters under their monitors (stores
 * racing with those objects' conversion).
 *
 * <p>Invariants after recovery: every chain is 0, 1, 2, ... without a gap;
 * all links to shared objects reach at most five distinct objects, each a
 * "shared" node; after a clean close each shared counter equals the value
 * the Java object had.
 */
public final class Concurrent {
    private Concurrent() {
    }

    public static final int SHARED = 5;

    @DurableRoot
    public static Object[] chains;
    @DurableRoot
    public static Node last;
    /** Every 10th node of every chain, by "thread:value" (concurrent puts into one recoverable map). */
    @DurableRoot
    public static java.util.concurrent.ConcurrentHashMap<String, Node> index;

    public static void reset() {
        chains = null;
        last = null;
        index = null;
    }

    /** Runs the workload; returns the shared nodes (their values are the expected counters). */
    public static Node[] run(int threads, int ops, long haltAfter) throws InterruptedException {
        Node[] shared = new Node[SHARED];
        for (int i = 0; i < SHARED; i++) {
            shared[i] = new Node(0, "shared" + i);
        }
        chains = new Object[threads];
        index = new java.util.concurrent.ConcurrentHashMap<>();
        AtomicLong total = new AtomicLong();
        CountDownLatch start = new CountDownLatch(1);
        Thread[] ts = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            int id = t;
            ts[t] = new Thread(() -> work(id, ops, shared, total, haltAfter, start));
            ts[t].start();
        }
        start.countDown();
        for (Thread t : ts) {
            t.join();
        }
        return shared;
    }

    private static void work(int t, int ops, Node[] shared, AtomicLong total, long haltAfter, CountDownLatch start) {
        try {
            start.await();
        } catch (InterruptedException e) {
            return;
        }
        Node head = new Node(0, "t" + t);
        head.other = shared[t % SHARED];
        chains[t] = head;
        Node tail = head;
        for (int k = 1; k <= ops; k++) {
            Node n = new Node(k, null);
            n.other = shared[(k + t) % SHARED];
            tail.next = n;
            tail = n;
            last = n;
            if (k % 10 == 0) {
                index.put(t + ":" + k, n);
            }
            Node s = shared[(k * 7 + t) % SHARED];
            synchronized (s) {
                s.value++;
            }
            if (total.incrementAndGet() == haltAfter) {
                Runtime.getRuntime().halt(3);
            }
        }
    }

    /** Checks the invariants; returns the number of chain nodes found. */
    public static long check(int threads, int opsIfComplete) {
        IdentityHashMap<Node, Boolean> distinct = new IdentityHashMap<>();
        long nodes = 0;
        for (int t = 0; t < threads; t++) {
            Node n = (Node) chains[t];
            long expect = 0;
            for (; n != null; n = n.next, expect++, nodes++) {
                if (n.value != expect) {
                    throw new AssertionError("thread " + t + ": chain has " + n.value + " where " + expect + " was expected");
                }
                if (n.other == null || n.other.label == null || !n.other.label.startsWith("shared")) {
                    throw new AssertionError("thread " + t + ": node " + n.value + " lost its shared link");
                }
                distinct.put(n.other, true);
            }
            if (opsIfComplete >= 0 && chains[t] != null && expect != opsIfComplete + 1) {
                throw new AssertionError("thread " + t + ": " + expect + " nodes, " + (opsIfComplete + 1) + " expected");
            }
        }
        if (index != null) {
            for (var e : index.entrySet()) {
                int t = Integer.parseInt(e.getKey().substring(0, e.getKey().indexOf(':')));
                long k = Long.parseLong(e.getKey().substring(e.getKey().indexOf(':') + 1));
                Node n = (Node) chains[t];
                while (n != null && n != e.getValue()) {
                    n = n.next;
                }
                if (n == null || n.value != k) {
                    throw new AssertionError("index entry " + e.getKey() + " is not that node of the chain");
                }
            }
            if (opsIfComplete >= 0 && index.size() != threads * (opsIfComplete / 10)) {
                throw new AssertionError(index.size() + " index entries, " + threads * (opsIfComplete / 10) + " expected");
            }
        }
        if (distinct.size() > SHARED) {
            throw new AssertionError(distinct.size() + " distinct shared objects: sharing was not preserved");
        }
        if (last != null && (last.label != null || last.value < 1)) {
            throw new AssertionError("the last root holds a node that no thread stored there");
        }
        return nodes;
    }
}
