package io.engram.runtime;

import java.lang.ref.ReferenceQueue;
import java.lang.ref.WeakReference;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.BiConsumer;

/**
 * Java object -> its image, by identity, holding objects weakly: an object
 * the program dropped (and that is then unreachable from every root, since
 * the image mirrors the heap) leaves the table when the GC clears it; its
 * image stays allocated until the next open sweeps it.
 *
 * <p>Thread-safe (a concurrent map); cleared keys are expunged on insert.
 */
final class IdentityTable {
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

    private interface Key {
        Object referent();
    }

    private static final class WeakKey extends WeakReference<Object> implements Key {
        final int hash;

        WeakKey(Object o, ReferenceQueue<Object> q) {
            super(o, q);
            hash = System.identityHashCode(o);
        }

        public Object referent() {
            return get();
        }

        @Override
        public int hashCode() {
            return hash;
        }

        @Override
        public boolean equals(Object other) {
            if (other == this) {
                return true;
            }
            Object r = get();
            return r != null && other instanceof Key k && k.referent() == r;
        }
    }

    private record Probe(Object referent, int hash) implements Key {
        @Override
        public int hashCode() {
            return hash;
        }

        @Override
        public boolean equals(Object other) {
            return other instanceof Key k && k.referent() == referent;
        }
    }

    private final ConcurrentHashMap<Key, Img> map = new ConcurrentHashMap<>();
    private final ReferenceQueue<Object> queue = new ReferenceQueue<>();

    Img get(Object o) {
        return map.get(new Probe(o, System.identityHashCode(o)));
    }

    void put(Object o, Img img) {
        expunge();
        map.put(new WeakKey(o, queue), img);
    }

    void remove(Object o) {
        map.remove(new Probe(o, System.identityHashCode(o)));
    }

    int size() {
        return map.size();
    }

    void forEach(BiConsumer<Object, Img> f) {
        map.forEach((k, v) -> {
            Object o = k.referent();
            if (o != null) {
                f.accept(o, v);
            }
        });
    }

    private void expunge() {
        for (Object k; (k = queue.poll()) != null; ) {
            map.remove(k);
        }
    }
}
