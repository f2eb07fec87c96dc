package io.engram.runtime;

import java.lang.ref.ReferenceQueue;
import java.lang.ref.WeakReference;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.BiConsumer;

/**
 * A map from Java objects, by identity, to values, holding the objects
 * weakly: an entry leaves the map once the GC clears its key (expunged on
 * the next insert). Used for the identity table (object -> image) and the
 * registry of collection views ({@link Views}).
 *
 * <p>Thread-safe (a concurrent map). Lookups allocate no weak reference
 * (a probe key compares by identity). Values are held strongly: a value
 * that references its key keeps the entry alive.
 */
class WeakIdentityMap<V> {
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

    private final ConcurrentHashMap<Key, V> map = new ConcurrentHashMap<>();
    private final ReferenceQueue<Object> queue = new ReferenceQueue<>();

    V get(Object o) {
        return map.get(new Probe(o, System.identityHashCode(o)));
    }

    void put(Object o, V v) {
        expunge();
        map.put(new WeakKey(o, queue), v);
    }

    void remove(Object o) {
        map.remove(new Probe(o, System.identityHashCode(o)));
    }

    int size() {
        return map.size();
    }

    boolean isEmpty() {
        return map.isEmpty();
    }

    void forEach(BiConsumer<Object, V> f) {
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
