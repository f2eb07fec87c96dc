package io.engram.apps.kv;

import io.engram.DurableRoot;
import io.engram.Unrecoverable;

import java.util.HashMap;

/**
 * The key-value server's store: ordinary {@link HashMap}s reached from one
 * durable root, and nothing else persistence-specific. With a pool open
 * (Engram on) every put/remove is durable before it returns and survives a
 * restart; without one (Engram off) the same code is a volatile HashMap.
 *
 * <p>The keys are spread over {@code shards} HashMaps (lock stripes) rather
 * than one: the runtime re-images a JDK map on every change that is not an
 * append (docs/java.md, "Collections"), so a change costs O(entries of its
 * map); sharding keeps that O(items / shards).
 *
 * <p>Cas uniques cost no durable store per item: each shard counts in an
 * {@link Unrecoverable} field, under an epoch that {@link #attach} bumps
 * with one durable store per open, so every unique of this open is larger
 * than any handed out before the restart (a unique is {@code ((epoch << 32)
 * + count) * shards + shard}). With the counter durable, every set cost two
 * commits (two {@code fdatasync}s in {@code wal} mode): the counter's, then
 * the put's.
 */
public final class EngramStore implements KvMap {
    /** One lock stripe: its map and its cas counter. */
    static final class Shard {
        final HashMap<String, Item> map = new HashMap<>();
        /** Uniques handed out under {@link #epoch} in this open (not persisted). */
        @Unrecoverable long cas;
        /** This shard's epoch in this open (not persisted; 0: not taken yet). */
        @Unrecoverable long epoch;
    }

    /** Everything the server keeps. */
    static final class Data {
        final Shard[] shards;
        long flushAt;
        /** Bumped at every open and whenever a shard's count runs out: the high part of every cas unique. */
        long epoch;

        Data(int n) {
            shards = new Shard[n];
            for (int i = 0; i < n; i++) {
                shards[i] = new Shard();
            }
        }
    }

    @DurableRoot
    static Data data;

    private final Data d;

    private EngramStore(Data d) {
        this.d = d;
    }

    /** The store recovered from the root, or a new one with {@code shards} stripes published as the root. */
    public static EngramStore attach(int shards) {
        if (data == null) {
            data = new Data(shards);
        }
        synchronized (data) {
            data.epoch++; // durable before any unique of this open is handed out
        }
        return new EngramStore(data);
    }

    /** Drops the Java reference to the root (tests: proves a reopen brings it back). */
    public static void forget() {
        data = null;
    }

    private Shard shard(String key) {
        return d.shards[Math.floorMod(key.hashCode() * 0x9E3779B9, d.shards.length)];
    }

    @Override public Item get(String key) { return shard(key).map.get(key); }
    @Override public void put(String key, Item item) { shard(key).map.put(key, item); }
    @Override public boolean remove(String key) { return shard(key).map.remove(key) != null; }
    @Override public Object lock(String key) { return shard(key); }
    @Override public long flushAt() { return d.flushAt; }
    @Override public void setFlushAt(long epochMs) { d.flushAt = epochMs; }

    @Override
    public long nextCas(String key) {
        Shard s = shard(key);
        if (s.epoch == 0 || s.cas == 0xFFFF_FFFFL) { // the first unique of this open, or the count ran out
            synchronized (d) {
                s.epoch = s.epoch == 0 ? d.epoch : ++d.epoch;
            }
            s.cas = 0;
        }
        s.cas++;
        return ((s.epoch << 32) + s.cas) * d.shards.length + Math.floorMod(key.hashCode() * 0x9E3779B9, d.shards.length);
    }

    @Override
    public void clear() {
        for (Shard s : d.shards) {
            synchronized (s) {
                if (!s.map.isEmpty()) {
                    s.map.clear();
                }
            }
        }
    }

    @Override
    public long size() {
        long n = 0;
        for (Shard s : d.shards) {
            synchronized (s) {
                n += s.map.size();
            }
        }
        return n;
    }
}
