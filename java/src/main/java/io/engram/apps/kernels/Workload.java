package io.engram.apps.kernels;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

/**
 * The kernels' workload: a seeded mix of reads (40%), updates (40%, 60% on
 * arrays) and, on lists, inserts and removes (10% each). The same seed
 * gives the same operations on every implementation, so results and final
 * contents can be compared with the plain reference.
 */
public final class Workload {
    private Workload() {
    }

    /** Runs {@code ops} operations; returns a checksum of every value read. */
    public static long run(Seq s, long seed, int ops) {
        return run(s, seed, ops, k -> { });
    }

    /** As {@link #run(Seq, long, int)}, calling {@code before} with each operation's index before it. */
    public static long run(Seq s, long seed, int ops, java.util.function.IntConsumer before) {
        SplittableRandom r = new SplittableRandom(seed);
        long sum = 0;
        for (int k = 0; k < ops; k++) {
            before.accept(k);
            int c = r.nextInt(10);
            int n = s.size();
            if (s.structural() && c == 0) {
                s.insert(r.nextInt(n + 1), r.nextLong(1_000_000));
            } else if (s.structural() && c == 1 && n > 1) {
                s.remove(r.nextInt(n));
            } else if (c < 6) {
                s.set(r.nextInt(n), r.nextLong(1_000_000));
            } else {
                sum = sum * 31 + s.get(r.nextInt(n));
            }
        }
        return sum;
    }

    /** Fills positions 0..n-1 with i*7 (through set, so every kernel starts alike). */
    public static void fill(Seq s) {
        for (int i = 0; i < s.size(); i++) {
            s.set(i, i * 7L);
        }
    }

    /** The contents, in order. */
    public static List<Long> contents(Seq s) {
        List<Long> out = new ArrayList<>(s.size());
        for (int i = 0; i < s.size(); i++) {
            out.add(s.get(i));
        }
        return out;
    }

    /**
     * Every state the reference passes through from the filled start: its
     * contents after 0, 1, ..., {@code ops} operations (what a crash may leave).
     */
    public static java.util.Set<List<Long>> states(int n, boolean structural, long seed, int ops) {
        Seq ref = new Reference(n, structural);
        fill(ref);
        java.util.Set<List<Long>> out = new java.util.HashSet<>();
        run(ref, seed, ops, k -> out.add(contents(ref)));
        out.add(contents(ref));
        return out;
    }

    /** The plain-Java reference: an ArrayList, never persisted. */
    public static final class Reference implements Seq {
        private final List<Long> list = new ArrayList<>();
        private final boolean structural;

        public Reference(int n, boolean structural) {
            for (int i = 0; i < n; i++) {
                list.add(0L);
            }
            this.structural = structural;
        }

        @Override public int size() { return list.size(); }
        @Override public long get(int i) { return list.get(i); }
        @Override public void set(int i, long v) { list.set(i, v); }
        @Override public void insert(int i, long v) { list.add(i, v); }
        @Override public void remove(int i) { list.remove(i); }
        @Override public boolean structural() { return structural; }
    }
}
