package io.engram.runtime;

import java.util.Arrays;

/**
 * A map from pool addresses (non-zero longs) to values, open addressing
 * with a multiplicative hash. Recovery keys its tables by image address;
 * {@code HashMap<Long, V>} hashes aligned addresses into few buckets
 * (their low bits are zero and {@code Long.hashCode} folds only the high
 * word in), so its bins turn into trees and a 100,000-record restart spent
 * most of its time there. Not thread-safe; no removal (recovery only adds).
 */
final class LongMap<V> {
    private long[] keys = new long[64];
    private Object[] vals = new Object[64];
    private int size;

    private static int slot(long k, int mask) {
        return (int) ((k * 0x9E3779B97F4A7C15L) >>> 40) & mask;
    }

    private int find(long k) {
        int mask = keys.length - 1;
        int i = slot(k, mask);
        while (keys[i] != 0 && keys[i] != k) {
            i = (i + 1) & mask;
        }
        return i;
    }

    @SuppressWarnings("unchecked")
    V get(long k) {
        int i = find(k);
        return keys[i] == 0 ? null : (V) vals[i];
    }

    boolean containsKey(long k) {
        return keys[find(k)] != 0;
    }

    /** Adds or replaces; {@code k} must not be 0 (the null address). */
    void put(long k, V v) {
        if (k == 0) {
            throw new IllegalArgumentException("address 0");
        }
        int i = find(k);
        if (keys[i] == 0) {
            if (++size * 2 > keys.length) {
                grow();
                i = find(k);
            }
            keys[i] = k;
        }
        vals[i] = v;
    }

    private void grow() {
        long[] ok = keys;
        Object[] ov = vals;
        keys = new long[ok.length * 2];
        vals = new Object[ok.length * 2];
        for (int j = 0; j < ok.length; j++) {
            if (ok[j] != 0) {
                int i = find(ok[j]);
                keys[i] = ok[j];
                vals[i] = ov[j];
            }
        }
    }

    int size() {
        return size;
    }

    @Override
    public String toString() {
        return "LongMap" + Arrays.toString(Arrays.copyOf(keys, Math.min(keys.length, 8)));
    }
}
