package io.engram.apps.bench;

import io.engram.apps.kv.Item;
import io.engram.apps.kv.KvMap;
import org.h2.mvstore.MVMap;
import org.h2.mvstore.MVStore;

import java.nio.ByteBuffer;
import java.nio.file.Path;

/**
 * The benchmark's embedded persistent store: H2 MVStore, one MVMap of
 * key -> encoded item, on the same file system as the Engram pool. With
 * {@code durable} every change is committed and synced (fsync) before it
 * returns, the guarantee Engram's msync mode gives; otherwise MVStore's
 * default background auto-commit (about once a second).
 */
public final class H2Store implements KvMap {
    private final MVStore store;
    private final MVMap<String, byte[]> map;
    private final boolean durable;
    private final Object[] locks = new Object[1024];
    private final java.util.concurrent.atomic.AtomicLong cas;

    public H2Store(Path file, boolean durable) {
        this.store = new MVStore.Builder().fileName(file.toString()).open();
        this.map = store.openMap("items");
        this.durable = durable;
        for (int i = 0; i < locks.length; i++) {
            locks[i] = new Object();
        }
        MVMap<String, Long> meta = store.openMap("meta");
        cas = new java.util.concurrent.atomic.AtomicLong(meta.getOrDefault("cas", 0L) + (1L << 32));
    }

    private void durable() {
        if (durable) {
            store.commit();
            store.sync();
        }
    }

    static byte[] encode(Item it) {
        ByteBuffer b = ByteBuffer.allocate(4 + 8 * 3 + it.value.length);
        b.putInt(it.flags).putLong(it.exptime).putLong(it.cas).putLong(it.storedMs).put(it.value);
        return b.array();
    }

    static Item decode(byte[] a) {
        ByteBuffer b = ByteBuffer.wrap(a);
        int flags = b.getInt();
        long exp = b.getLong();
        long cas = b.getLong();
        long stored = b.getLong();
        byte[] v = new byte[b.remaining()];
        b.get(v);
        return new Item(v, flags, exp, cas, stored);
    }

    @Override
    public Item get(String key) {
        byte[] a = map.get(key);
        return a == null ? null : decode(a);
    }

    @Override
    public void put(String key, Item item) {
        map.put(key, encode(item));
        durable();
    }

    @Override
    public boolean remove(String key) {
        boolean gone = map.remove(key) != null;
        durable();
        return gone;
    }

    @Override
    public long nextCas(String key) {
        return cas.incrementAndGet();
    }

    @Override
    public Object lock(String key) {
        return locks[Math.floorMod(key.hashCode(), locks.length)];
    }

    @Override
    public void clear() {
        map.clear();
        durable();
    }

    @Override
    public long flushAt() {
        return 0;
    }

    @Override
    public void setFlushAt(long epochMs) {
        // delayed flush_all is not used by the benchmark
    }

    @Override
    public long size() {
        return map.sizeAsLong();
    }

    @Override
    public void close() {
        store.openMap("meta").put("cas", cas.get());
        store.close();
    }
}
