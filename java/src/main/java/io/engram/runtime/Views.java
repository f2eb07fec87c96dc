package io.engram.runtime;

import java.lang.ref.WeakReference;

/**
 * Which recoverable collection a view, iterator or map entry writes
 * through to: a weak identity map from the view object to its root
 * collection (the recoverable collection itself, never another view).
 *
 * <p>The agent rewrites instrumented call sites that obtain a view
 * ({@code iterator()}, {@code keySet()}, {@code subList(..)},
 * {@code headMap(..)}, {@code Iterator.next()} returning a map entry,
 * {@code Collections.synchronizedList(..)}, ...) to register the result
 * here when the receiver is recoverable or is itself a registered view (so
 * nested views map to the same root). The collection hooks
 * ({@link Barriers#before}, {@link Barriers#after}, ...) that get a view
 * instead of a recoverable collection look it up here and re-image the
 * root. Identity, not equality: views compare by contents.
 *
 * <p>Invariants: keys are held weakly ({@link WeakIdentityMap}: a view dies with its last user);
 * values are weak too (a view usually holds its parent, and the parent
 * may cache the view, as {@code HashMap.keySet()} does, so a strong value
 * would keep both alive for ever). While a view is reachable its root is,
 * so a live key never maps to a cleared value. Cleared keys are dropped
 * on the next {@link #put}.
 *
 * <p>Crash behaviour: none; this is Java-side bookkeeping only, rebuilt
 * as views are obtained after an open.
 */
final class Views {
    private Views() {
    }

    // What a view's elements are to its root (a keyed call through it can then change one key in place).
    /** Nothing known (a list's view, {@code values()}, an iterator over them). */
    static final int NONE = 0;
    /** Its elements (or its keyed calls' first argument) are keys of the root: a key set, a set's iterator or sub-set. */
    static final int KEYS = 1;
    /** Its elements are the root map's entries: {@code entrySet()} and its iterators. */
    static final int ENTRIES = 2;
    /** A request only: the view is of its parent's kind (an iterator, a sub-set, a wrapper). */
    static final int SAME = 3;
    /** A sub-map of the root map ({@code headMap}, ...): keyed calls take a key; its key set is KEYS. */
    static final int MAP_VIEW = 4;
    /** An entry of the root map (from an ENTRIES iterator): its {@code setValue} changes its key. */
    static final int ENTRY = 5;

    /** A registered view's root (weak) and kind; one link may serve many views (an iterator's entries). */
    record Link(WeakReference<Object> root, int kind) {
        Link(Object root, int kind) {
            this(new WeakReference<>(root), kind);
        }
    }

    private static final WeakIdentityMap<Link> MAP = new WeakIdentityMap<>();

    /**
     * Set (for good) once a key-set or entry-set view is registered: until
     * then an iterator's elements need not be looked at unless they are map
     * entries, so iterating lists costs no per-thread note.
     */
    static volatile boolean keyViews;

    /** Registers {@code view} as writing through to the recoverable collection {@code root}. */
    static void put(Object view, Object root, int kind) {
        if ((kind == KEYS || kind == ENTRIES) && !keyViews) {
            keyViews = true;
        }
        MAP.put(view, new Link(root, kind));
    }

    /** Registers {@code view} with an existing link (its root and kind). */
    static void put(Object view, Link link) {
        MAP.put(view, link);
    }

    private static Link link(Object o) {
        return o == null || MAP.isEmpty() ? null : MAP.get(o);
    }

    /** The root collection {@code o} is a view of, or null (also when nothing is registered). */
    static Object root(Object o) {
        Link l = link(o);
        return l == null ? null : l.root.get();
    }

    /** The kind of view {@code o} is ({@link #NONE} if not registered). */
    static int kind(Object o) {
        Link l = link(o);
        return l == null ? NONE : l.kind;
    }

    /**
     * The kind of a view obtained from {@code parent} (of kind {@code parentKind})
     * by a call of requested kind {@code requested}: KEYS and ENTRIES views
     * only of a map or sub-map, SAME inherits.
     */
    static int derive(int parentKind, int requested) {
        if (requested == SAME) {
            return parentKind;
        }
        if (requested == KEYS || requested == ENTRIES) {
            return parentKind == MAP_VIEW ? requested : NONE;
        }
        return requested == MAP_VIEW && parentKind == MAP_VIEW ? MAP_VIEW : NONE;
    }

    /** How many views are registered (tests). */
    static int size() {
        return MAP.size();
    }
}
