package io.engram.tests;

import io.engram.DurableRoot;
import io.engram.Engram;

import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The keyed-collection workload (the in-place image path of HashMap,
 * ConcurrentHashMap, HashSet, TreeMap, TreeSet) for crash runs: each of
 * several threads walks i = 0, 1, 2, ... and in every step, in this order,
 * puts key "t:i" and removes "t:(i-W)" in a synchronized HashMap, in a
 * ConcurrentHashMap (no lock), in a synchronized HashSet and in a
 * synchronized TreeMap, bumps its counter in the ConcurrentHashMap with
 * {@code merge}, and moves one random key between two HashMaps in a
 * failure-atomic region.
 *
 * <p>Invariants after recovery ({@link #check}): per thread and structure
 * the keys present are a contiguous window [lo, hi] of length W or W+1
 * (fewer only if lo = 0), each with value i; the structures are at most one
 * step apart and never ahead of the one updated before them (stores are
 * durable in program order); the counter is hi or hi+1 of the
 * ConcurrentHashMap's window; the two bank maps are disjoint and hold
 * exactly the keys 0..BANK-1 between them.
 */
public final class KeyedWork {
    private KeyedWork() {
    }

    static final int W = 8;
    static final int BANK = 40;

    @DurableRoot
    public static HashMap<String, Long> hmap;
    @DurableRoot
    public static ConcurrentHashMap<String, Long> cmap;
    @DurableRoot
    public static HashSet<String> hset;
    @DurableRoot
    public static TreeMap<String, Long> tmap;
    @DurableRoot
    public static HashMap<Integer, String> bankA;
    @DurableRoot
    public static HashMap<Integer, String> bankB;

    private static final Object BANK_LOCK = new Object();

    public static void reset() {
        hmap = null;
        cmap = null;
        hset = null;
        tmap = null;
        bankA = null;
        bankB = null;
    }

    /** Creates the roots (when the pool has none yet). */
    public static void init() {
        if (hmap != null) {
            return;
        }
        hmap = new HashMap<>();
        cmap = new ConcurrentHashMap<>();
        hset = new HashSet<>();
        tmap = new TreeMap<>();
        HashMap<Integer, String> a = new HashMap<>();
        for (int k = 0; k < BANK; k++) {
            a.put(k, "acct" + k);
        }
        bankA = a;
        bankB = new HashMap<>();
    }

    /** Runs {@code threads} threads for {@code steps} steps each; halts the JVM after {@code haltAfter} mutations. */
    public static void run(int threads, int steps, long seed, long haltAfter) throws InterruptedException {
        AtomicLong done = new AtomicLong();
        CountDownLatch start = new CountDownLatch(1);
        Thread[] ts = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            int id = t;
            ts[t] = new Thread(() -> {
                try {
                    start.await();
                } catch (InterruptedException e) {
                    return;
                }
                work(id, steps, new Random(seed + id), () -> {
                    if (done.incrementAndGet() == haltAfter) {
                        Runtime.getRuntime().halt(3);
                    }
                });
            });
            ts[t].start();
        }
        start.countDown();
        for (Thread t : ts) {
            t.join();
        }
    }

    private static void work(int t, int steps, Random rnd, Runnable tick) {
        for (long i = 0; i < steps; i++) {
            String key = t + ":" + i;
            String old = t + ":" + (i - W);
            synchronized (hmap) {
                hmap.put(key, i);
                tick.run();
                hmap.remove(old);
            }
            tick.run();
            cmap.put(key, i);
            tick.run();
            cmap.remove(old);
            tick.run();
            synchronized (hset) {
                hset.add(key);
                tick.run();
                hset.remove(old);
            }
            tick.run();
            synchronized (tmap) {
                tmap.put(key, i);
                tick.run();
                tmap.remove(old);
            }
            tick.run();
            cmap.merge("count:" + t, 1L, Long::sum);
            tick.run();
            int k = rnd.nextInt(BANK);
            synchronized (BANK_LOCK) {
                Engram.atomic(() -> {
                    HashMap<Integer, String> from = bankA.containsKey(k) ? bankA : bankB;
                    HashMap<Integer, String> to = from == bankA ? bankB : bankA;
                    String v = from.remove(k);
                    tick.run();
                    to.put(k, v);
                });
            }
            tick.run();
        }
    }

    /** The window [lo, hi] of thread t's keys in {@code keys} (hi = -1: none), checked contiguous with values i. */
    private static long[] window(String what, int t, Iterable<String> keys, Map<String, Long> values) {
        long lo = Long.MAX_VALUE;
        long hi = -1;
        int n = 0;
        for (String k : keys) {
            if (!k.startsWith(t + ":")) {
                continue;
            }
            long i = Long.parseLong(k.substring(k.indexOf(':') + 1));
            if (values != null && values.get(k) != i) {
                throw new AssertionError(what + ": " + k + " has value " + values.get(k));
            }
            lo = Math.min(lo, i);
            hi = Math.max(hi, i);
            n++;
        }
        if (n == 0) {
            return new long[] {0, -1};
        }
        if (hi - lo + 1 != n || n > W + 1 || (n < W && lo != 0)) {
            throw new AssertionError(what + " thread " + t + ": keys " + lo + ".." + hi + " but " + n + " present");
        }
        return new long[] {lo, hi};
    }

    /** Checks the invariants after recovery; returns the number of steps found done (sum over threads). */
    public static long check(int threads) {
        long total = 0;
        for (int t = 0; t < threads; t++) {
            long h = window("HashMap", t, hmap.keySet(), hmap)[1];
            long c = window("ConcurrentHashMap", t, cmap.keySet(), cmap)[1];
            long s = window("HashSet", t, hset, null)[1];
            long m = window("TreeMap", t, tmap.keySet(), tmap)[1];
            if (!(h >= c && c >= s && s >= m && m >= h - 1)) {
                throw new AssertionError("thread " + t + ": out of program order: HashMap " + h + ", CHM " + c
                        + ", HashSet " + s + ", TreeMap " + m);
            }
            long count = cmap.getOrDefault("count:" + t, 0L);
            if (count != c && count != c + 1) {
                throw new AssertionError("thread " + t + ": counter " + count + " with CHM window ending at " + c);
            }
            total += count;
        }
        for (int k = 0; k < BANK; k++) {
            boolean a = bankA.containsKey(k);
            boolean b = bankB.containsKey(k);
            if (a == b || !("acct" + k).equals(a ? bankA.get(k) : bankB.get(k))) {
                throw new AssertionError("bank key " + k + ": in A " + a + ", in B " + b);
            }
        }
        if (bankA.size() + bankB.size() != BANK) {
            throw new AssertionError("bank holds " + (bankA.size() + bankB.size()) + " keys");
        }
        return total;
    }
}
