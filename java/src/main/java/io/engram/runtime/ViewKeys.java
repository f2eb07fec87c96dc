package io.engram.runtime;

import java.util.Map;

/**
 * Which one key a mutation through a view changes, so that a keyed root
 * (a {@code HashMap}, {@code TreeMap}, {@code HashSet}, ... see
 * {@link KeyedImage}) gets its O(1) in-place image change instead of a
 * whole re-imaging:
 *
 * <ul>
 * <li>{@code it.remove()} on an iterator over a key set, a set or an entry
 *     set: the key of the element the iterator returned last (noted per
 *     thread by {@link #element}, read by {@link #before});</li>
 * <li>{@code e.setValue(v)} on an entry of an entry set: its key;</li>
 * <li>a keyed call ({@code remove(k)}, {@code add(k)}, {@code put(k, v)},
 *     ...) on a key set, a sub-set or a sub-map: its first argument.</li>
 * </ul>
 *
 * Anything else through a view (a {@code values()} iterator, {@code
 * removeIf}, a list's views) re-images the root whole.
 *
 * <p>Invariants: the per-thread note belongs to one iterator (identity) and
 * is replaced when that thread's next element comes from another; a
 * pending key is taken by the after-call hook of the same view object and
 * replaced by the next before-call hook, so a call that threw leaves
 * nothing that a later call could use for another object.
 *
 * <p>Crash behaviour: none of its own (Java-side bookkeeping); the change
 * it selects is {@link KeyedImage}'s, one commit outside a region.
 */
final class ViewKeys {
    private ViewKeys() {
    }

    private static final Object NONE = new Object();

    /** Per thread: the last iterator that returned an element, what it is, and a key taken by a before-call hook. */
    private static final class Last {
        Object it;
        Object root;
        int kind;
        Object elem = NONE;
        /** The link every entry this iterator returns is registered with (made once per iterator). */
        Views.Link entryLink;
        Object pendingFor;
        Object pendingKey = NONE;
    }

    private static final ThreadLocal<Last> LAST = ThreadLocal.withInitial(Last::new);

    /** An element {@code it.next()} returned (the pool is open): entries are registered, keys noted. */
    static void element(Graph g, Object it, Object v) {
        Last l = LAST.get();
        if (l.it != it) {
            l.it = it;
            l.root = Views.root(it);
            l.kind = Views.kind(it);
            l.elem = NONE;
            l.entryLink = null;
        }
        if (l.root == null) {
            return;
        }
        if (v instanceof Map.Entry<?, ?>) {
            if (l.entryLink == null) {
                l.entryLink = new Views.Link(l.root, l.kind == Views.ENTRIES ? Views.ENTRY : Views.NONE);
            }
            Views.put(v, l.entryLink);
        }
        if (l.kind == Views.KEYS || l.kind == Views.ENTRIES) {
            l.elem = v;
        }
    }

    /** The key a mutator of view {@code c} (an iterator's remove, an entry's setValue) changes, or NONE. */
    private static Object keyOf(Object c) {
        Last l = LAST.get();
        if (l.it == c && l.elem != NONE) {
            return l.kind == Views.KEYS ? l.elem : ((Map.Entry<?, ?>) l.elem).getKey();
        }
        if (c instanceof Map.Entry<?, ?> e && Views.kind(c) == Views.ENTRY) {
            return e.getKey();
        }
        return NONE;
    }

    /** Before a non-keyed mutator of view {@code c} of recoverable {@code root}: notes the key it changes, if one. */
    static void before(Graph g, Object c, Object root) {
        Last l = LAST.get();
        Object key = KeyedImage.keyed(root) ? keyOf(c) : NONE;
        l.pendingFor = key == NONE ? null : c;
        l.pendingKey = key;
        if (key != NONE && g.region() == null) {
            KeyedImage.noteBefore(root, key);
        }
    }

    /** Before a keyed call on view {@code c}: true (and the key's state noted) if its first argument is a key of root. */
    static boolean beforeKeyed(Graph g, Object c, Object root, Object key) {
        if (!keyedView(c, root)) {
            return false;
        }
        if (g.region() == null) {
            KeyedImage.noteBefore(root, key);
        }
        return true;
    }

    /** Whether a keyed call's first argument on view {@code c} of {@code root} is a key of the root. */
    static boolean keyedView(Object c, Object root) {
        int k = Views.kind(c);
        return (k == Views.KEYS || k == Views.MAP_VIEW) && KeyedImage.keyed(root);
    }

    /** The key noted for view {@code c} by {@link #before} (taken: noted once, used once), or {@link #none()}. */
    static Object takePending(Object c) {
        Last l = LAST.get();
        if (l.pendingFor != c) {
            return NONE;
        }
        Object key = l.pendingKey;
        l.pendingFor = null;
        l.pendingKey = NONE;
        return key;
    }

    /**
     * Whether the noted key is the one {@code c}'s call changed: an
     * iterator's remove must have removed it (if the iterator was advanced
     * by code the agent does not see, e.g. {@code forEachRemaining}, the
     * noted element is stale and still present: the root is re-imaged whole
     * instead); an entry's setValue always changes its own key.
     */
    static boolean changed(Object c, Object root, Object key) {
        if (!(c instanceof java.util.Iterator<?>)) {
            return true;
        }
        return root instanceof Map<?, ?> m ? !m.containsKey(key) : !((java.util.Collection<?>) root).contains(key);
    }

    static Object none() {
        return NONE;
    }
}
