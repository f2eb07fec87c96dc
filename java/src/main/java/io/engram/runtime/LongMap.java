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
    private long[] keys;
    private Object[] vals;
    private int size;

    LongMap() {
        this(32);
    }

    /** A map that holds {@code expected} keys without growing. */
    LongMap(int expected) {
        int n = Integer.highestOneBit(Math.max(32, expected) * 2 - 1) * 2;
        keys = new long[n];
        vals = new Object[n];
    }

    /**
     * The home slot: every bit of the address mixed into the low bits (the
     * finaliser of MurmurHash3). A plain multiplicative hash's middle bits
     * are not enough: images of one size class sit a power of two apart
     * (1 KiB for a YCSB record's bytes), and with {@code (k * φ) >>> 40}
     * 400,000 keys 4 KiB apart took 24.6 probes per insert instead of 1.3.
     */
    static int slot(long k, int mask) {
        long h = k ^ (k >>> 33);
        h *= 0xff51afd7ed558ccdL;
        h ^= h >>> 33;
        h *= 0xc4ceb9fe1a85ec53L;
        h ^= h >>> 33;
        return (int) h & mask;
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

    /** Mean probes a lookup of a present key takes (1 = every key in its home slot); for tests. */
    double meanProbes() {
        int mask = keys.length - 1;
        long probes = 0;
        for (int j = 0; j < keys.length; j++) {
            if (keys[j] != 0) {
                probes += ((j - slot(keys[j], mask)) & mask) + 1;
            }
        }
        return size == 0 ? 0 : (double) probes / size;
    }

    @Override
    public String toString() {
        return "LongMap" + Arrays.toString(Arrays.copyOf(keys, Math.min(keys.length, 8)));
    }
}
