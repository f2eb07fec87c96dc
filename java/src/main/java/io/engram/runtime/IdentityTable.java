package io.engram.runtime;

/**
 * Java object -> its image, by identity, holding objects weakly: an object
 * the program dropped (and that is then unreachable from every root, since
 * the image mirrors the heap) leaves the table when the GC clears it; its
 * image stays allocated until the next open sweeps it.
 *
 * <p>Thread-safe (a concurrent map); cleared keys are expunged on insert
 * ({@link WeakIdentityMap}).
 */
final class IdentityTable extends WeakIdentityMap<IdentityTable.Img> {
    /** One recoverable object's image. {@code ready} once its closure is durable. */
    static final class Img {
        final long addr;
        final JType type;
        volatile boolean ready;
        /**
         * Collections only, guarded by the collection's stripe lock: the
         * contents its image holds (null: unknown, rewrite whole next time)
         * and the capacity of its data array.
         */
        Object[] shadow;
        long capacity;
        /** Keyed collections on the in-place path: which entry holds each key (see {@link KeyedImage}), or null. */
        KeyedImage.Index index;

        Img(long addr, JType type) {
            this.addr = addr;
            this.type = type;
        }
    }
}
