package io.engram.runtime;

import io.engram.runtime.IdentityTable.Img;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.SortedMap;
import java.util.SortedSet;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The in-place path for unordered keyed collections ({@code HashMap},
 * {@code HashSet}, {@code ConcurrentHashMap}, {@code TreeMap},
 * {@code TreeSet}): a change through a keyed call ({@code put(k, v)},
 * {@code remove(k)}, {@code add(x)}, {@code merge(k, ...)}, ...) updates
 * only that key's entry of the image, O(1) logged bytes, instead of
 * re-imaging the whole collection.
 *
 * <p>The image keeps its layout ({@code [type][words][data][comparator]},
 * entries of 2 words, key and value, for maps and 1 for sets) but its
 * entries are in no particular order: recovery rebuilds these collections
 * by insertion, where order does not matter (hash tables, sorted trees).
 * A Java-side {@link Index} (guarded by the collection's stripe lock)
 * says which entry holds each key:
 * <ul>
 * <li>a changed value: one 8-byte store of the value word (durable, or
 *     undo-logged in a region);</li>
 * <li>a new key: its words go past the valid length and one 8-byte store of
 *     the length publishes them ({@code Graph.appendData}); when the data
 *     array is full it is replaced by one 1.5x larger (amortised O(1));</li>
 * <li>a removed key: the last entry moves into its place, the vacated words
 *     are zeroed and the length shrinks, all in one undo-logged region (the caller's, or one of its
 *     own), so a crash leaves the old or the new contents.</li>
 * </ul>
 *
 * <p>Invariant: while {@code img.index} is set, the image's entries are
 * exactly the index's keys, at the index's positions, each with the value
 * the collection held for it when its last keyed hook ran. The index is
 * built from {@code img.shadow} (the image's contents after a whole
 * re-imaging) and dropped whenever the whole image is rewritten or a
 * region aborts (then the next change re-images once and rebuilds it).
 *
 * <p>Concurrency: as for fields, each hook reads the key's current state,
 * makes it recoverable (outside the stripe lock: conversions take stripe
 * locks), and writes it under the stripe lock only if the key still has
 * that state; the last hook to run for a key writes its final state. A
 * {@code ConcurrentHashMap} whose key is removed and re-put with an equal
 * but distinct key object concurrently may keep the first key object in
 * the image (an equal key).
 */
final class KeyedImage {
    private KeyedImage() {
    }

    /** Which entry holds each key (equality as the collection defines it), and each entry's key. */
    static final class Index {
        final int width;
        final Map<Object, Integer> pos;
        final ArrayList<Object> keys = new ArrayList<>();

        Index(int width, Map<Object, Integer> pos) {
            this.width = width;
            this.pos = pos;
        }
    }

    /** Does {@code c} take the in-place path (exact classes only: subclasses may keep an order)? */
    static boolean keyed(Object c) {
        Class<?> k = c.getClass();
        return k == HashMap.class || k == HashSet.class || k == ConcurrentHashMap.class || k == TreeMap.class
                || k == TreeSet.class;
    }

    @SuppressWarnings("unchecked")
    private static Index newIndex(Object c) {
        int width = c instanceof Map<?, ?> ? 2 : 1;
        Comparator<Object> cmp = null;
        if (c instanceof SortedMap<?, ?> m) {
            cmp = (Comparator<Object>) m.comparator();
        } else if (c instanceof SortedSet<?> s) {
            cmp = (Comparator<Object>) s.comparator();
        }
        boolean sorted = c instanceof SortedMap<?, ?> || c instanceof SortedSet<?>;
        return new Index(width, sorted ? new TreeMap<>(cmp) : new HashMap<>());
    }

    /** The index of an image whose contents are {@code shadow} (in image order). */
    private static Index build(Object c, Object[] shadow) {
        Index ix = newIndex(c);
        for (int i = 0; i + ix.width <= shadow.length; i += ix.width) {
            ix.pos.put(shadow[i], ix.keys.size());
            ix.keys.add(shadow[i]);
        }
        return ix;
    }

    /** The key's state in the collection: present, and its value (maps). */
    private record State(boolean present, Object value) {
    }

    private static State read(Object c, Object key) {
        if (c instanceof Map<?, ?> m) {
            Object v = m.get(key);
            return new State(v != null || (!(m instanceof ConcurrentHashMap<?, ?>) && m.containsKey(key)), v);
        }
        return new State(((Set<?>) c).contains(key), null);
    }

    /** The state of one key before a keyed call outside a region (this thread's last). */
    private record Before(Object coll, Object key, State state) {
    }

    private static final ThreadLocal<Before> BEFORE = new ThreadLocal<>();

    /** Before a keyed call outside a region: the key's state, for {@link #undoCall}. */
    static void noteBefore(Object c, Object key) {
        BEFORE.set(new Before(c, key, read(c, key)));
    }

    /**
     * The after-call hook failed (its implicit region aborted, the image
     * still has the key's old state): the collection gets it back too, if
     * the state noted before this call is known.
     */
    @SuppressWarnings("unchecked")
    static void undoCall(Object c, Object key) {
        Before b = BEFORE.get();
        BEFORE.remove();
        if (b == null || b.coll != c || b.key != key) {
            return;
        }
        if (c instanceof Map<?, ?> m) {
            Map<Object, Object> mm = (Map<Object, Object>) m;
            if (b.state.present) {
                mm.put(key, b.state.value);
            } else {
                mm.remove(key);
            }
        } else if (b.state.present) {
            ((Set<Object>) c).add(key);
        } else {
            ((Set<Object>) c).remove(key);
        }
    }

    /**
     * After a keyed call on {@code c}: makes its image agree with the
     * collection for {@code key}. Falls back to re-imaging when the index is
     * unknown.
     */
    static void resyncKey(Graph g, Object c, Img img, Object key) {
        boolean needKey = !indexed(g, c, img, key); // an update keeps the image's key: the argument (an
        while (true) {                               // equal object, maybe new) is not converted for nothing
            State s = read(c, key);
            long ka = 0;
            long va = 0;
            if (s.present) {
                ka = needKey ? g.persist(key, () -> Graph.describe(c) + "{+}") : 0;
                va = s.value == null ? 0 : g.persist(s.value, () -> Graph.describe(c) + "{" + key + "}");
            }
            synchronized (g.stripe(c)) {
                State now = read(c, key);
                if (now.present != s.present || now.value != s.value) {
                    continue; // changed meanwhile: again, with what it holds now
                }
                if (img.index == null && img.shadow != null) {
                    img.index = build(c, img.shadow);
                }
                if (img.index != null && s.present && !needKey && !img.index.pos.containsKey(key)) {
                    needKey = true; // removed from the image meanwhile: this change adds it again
                    continue;
                }
                if (img.index != null) {
                    apply(g, img, key, s.present, ka, va);
                    g.commitIfImplicit(); // under the stripe lock: see Graph.oneCommit
                    return;
                }
            }
            g.resyncCollection(c, img); // index unknown: re-image once, then the index is built from it
            synchronized (g.stripe(c)) {
                if (img.index == null && img.shadow != null) {
                    img.index = build(c, img.shadow);
                }
            }
            return;
        }
    }

    /** Does the image already hold an entry for {@code key}? */
    private static boolean indexed(Graph g, Object c, Img img, Object key) {
        synchronized (g.stripe(c)) {
            return img.index != null && img.index.pos.containsKey(key);
        }
    }

    /** Under the stripe lock: the image entry of {@code key} made to agree (present with value {@code va}, or gone). */
    private static void apply(Graph g, Img img, Object key, boolean present, long ka, long va) {
        Index ix = img.index;
        Integer at = ix.pos.get(key);
        try {
            if (present && at != null) {
                if (ix.width == 2) {
                    long word = g.heap.getLong(img.addr + 16) + (at * 2L + 1) * 8;
                    if (g.heap.getLong(word) != va) {
                        g.writeWord(word, va);
                    }
                }
            } else if (present) {
                add(g, img, ix, key, ka, va);
            } else if (at != null) {
                remove(g, img, ix, key, at);
            }
            img.shadow = null; // the image order is the index's now
        } catch (RuntimeException | Error e) {
            img.index = null; // unknown now: re-image next time
            img.shadow = null;
            img.capacity = 0;
            throw e;
        }
    }

    private static void add(Graph g, Img img, Index ix, Object key, long ka, long va) {
        long[] entry = ix.width == 2 ? new long[] {ka, va} : new long[] {ka};
        long words = (long) ix.keys.size() * ix.width;
        if (words + ix.width <= img.capacity) {
            g.appendData(img, (int) words, entry);
        } else {
            long[] all = new long[(int) words + ix.width];
            if (words > 0) {
                g.heap.read(g.heap.getLong(img.addr + 16), MemorySegment.ofArray(all).asSlice(0, words * 8));
            }
            System.arraycopy(entry, 0, all, (int) words, ix.width);
            g.writeCollectionData(img, all, true);
        }
        ix.pos.put(key, ix.keys.size());
        ix.keys.add(key);
    }

    /** The last entry moves into the removed one's place; both words and the length change atomically. */
    private static void remove(Graph g, Img img, Index ix, Object key, int at) {
        int last = ix.keys.size() - 1;
        long data = g.heap.getLong(img.addr + 16);
        int w = ix.width;
        long[] moved = new long[w];
        if (at != last) {
            g.heap.read(data + (long) last * w * 8, MemorySegment.ofArray(moved));
        }
        boolean own = g.region() == null;
        if (own) {
            g.heap.begin();
        }
        try {
            for (int k = 0; at != last && k < w; k++) {
                logged(g, own, data + ((long) at * w + k) * 8, moved[k]);
            }
            for (int k = 0; k < w; k++) { // the vacated entry reads as null, as spare room must
                logged(g, own, data + ((long) last * w + k) * 8, 0);
            }
            logged(g, own, img.addr + 8, (long) last * w);
        } catch (RuntimeException | Error e) {
            if (own) {
                g.heap.abort();
            }
            throw e;
        }
        if (own) {
            g.heap.commit();
        }
        Object movedKey = ix.keys.remove(last);
        ix.pos.remove(key);
        if (at != last) {
            ix.keys.set(at, movedKey);
            ix.pos.put(movedKey, at);
        }
    }

    /** One word: in the caller's region through {@code writeWord}, in our own by logging it first. */
    private static void logged(Graph g, boolean own, long at, long bits) {
        if (own) {
            g.heap.log(at, 8);
            g.heap.putLong(at, bits);
        } else {
            g.writeWord(at, bits);
        }
    }
}
