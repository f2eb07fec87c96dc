package io.engram.apps.kv;

/**
 * One cached value, immutable: every change stores a new Item in the map
 * (one store, so a crash leaves the old or the new item, never a mix of
 * their fields). {@code exptime} is absolute (epoch seconds, 0 = never);
 * {@code storedMs} orders the item against a delayed flush_all.
 */
public final class Item {
    public final byte[] value;
    public final int flags;
    public final long exptime;
    public final long cas;
    public final long storedMs;

    public Item(byte[] value, int flags, long exptime, long cas, long storedMs) {
        this.value = value;
        this.flags = flags;
        this.exptime = exptime;
        this.cas = cas;
        this.storedMs = storedMs;
    }
}
