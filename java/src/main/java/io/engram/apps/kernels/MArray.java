package io.engram.apps.kernels;

import io.engram.DurableRoot;

/**
 * MArray, AutoPersist style: a mutable array of longs, ordinary Java plus one
 * marking (the durable root). Each element store on the recoverable array is
 * durable in program order (sequential persistency), so after a crash the
 * array holds every update that returned. Without an open pool it is plain
 * volatile Java.
 */
public final class MArray implements Seq {
    @DurableRoot
    static long[] data;

    private MArray() {
    }

    /** A new array of {@code n} zeros, published as the root. */
    public static MArray create(int n) {
        data = new long[n];
        return new MArray();
    }

    /** The array recovered from the root (null if there is none). */
    public static MArray attach() {
        return data == null ? null : new MArray();
    }

    /** Drops the Java reference (to prove a reopen brings it back). */
    public static void forget() {
        data = null;
    }

    @Override public int size() { return data.length; }
    @Override public long get(int i) { return data[i]; }
    @Override public void set(int i, long v) { data[i] = v; }
}
