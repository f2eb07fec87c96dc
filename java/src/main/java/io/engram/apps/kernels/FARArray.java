package io.engram.apps.kernels;

import io.engram.DurableRoot;

/**
 * FARArray, AutoPersist style: a functional (copy-on-write) array. Every
 * update copies the whole array, changes the copy and publishes it with one
 * store to the durable root; that store makes the copy recoverable first, so
 * a crash leaves the old or the new version, never a mix. One marking.
 */
public final class FARArray implements Seq {
    @DurableRoot
    static long[] current;

    private FARArray() {
    }

    public static FARArray create(int n) {
        current = new long[n];
        return new FARArray();
    }

    public static FARArray attach() {
        return current == null ? null : new FARArray();
    }

    public static void forget() {
        current = null;
    }

    @Override public int size() { return current.length; }
    @Override public long get(int i) { return current[i]; }

    @Override
    public void set(int i, long v) {
        long[] next = current.clone();
        next[i] = v;
        current = next;
    }
}
