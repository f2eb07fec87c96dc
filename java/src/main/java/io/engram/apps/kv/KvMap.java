package io.engram.apps.kv;

/**
 * What the memcached protocol needs of a store. The protocol does every
 * read-modify-write under {@link #lock}(key); implementations make single
 * operations atomic across a crash (if they persist at all).
 */
public interface KvMap extends AutoCloseable {
    Item get(String key);

    void put(String key, Item item);

    boolean remove(String key);

    /** A cas unique larger than any this store handed out before (for the key's lock stripe). */
    long nextCas(String key);

    /** The monitor guarding {@code key}'s read-modify-writes. */
    Object lock(String key);

    /** Drops every item. */
    void clear();

    /** Items stored before this epoch-ms instant are invalid once it has passed (0: none). */
    long flushAt();

    void setFlushAt(long epochMs);

    long size();

    @Override
    default void close() {
    }
}
