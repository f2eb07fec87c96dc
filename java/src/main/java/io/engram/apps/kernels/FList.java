package io.engram.apps.kernels;

import io.engram.DurableRoot;

/**
 * FList, AutoPersist style: a persistent (functional) cons list in the style
 * of PCollections' ConsPStack, written in plain Java. An update, insert or
 * remove at position i copies the i cells before it, shares the rest, and
 * publishes the new version (size and first cell) with one store to the
 * durable root: a crash leaves the old or the new version. One marking.
 */
public final class FList implements Seq {
    /** An immutable cell. */
    static final class Cons {
        final long head;
        final Cons tail;

        Cons(long head, Cons tail) {
            this.head = head;
            this.tail = tail;
        }
    }

    static final class Version {
        final int size;
        final Cons first;

        Version(int size, Cons first) {
            this.size = size;
            this.first = first;
        }
    }

    @DurableRoot
    static Version current;

    private FList() {
    }

    public static FList create(int n) {
        Cons c = null;
        for (int i = 0; i < n; i++) {
            c = new Cons(0, c);
        }
        current = new Version(n, c);
        return new FList();
    }

    public static FList attach() {
        return current == null ? null : new FList();
    }

    public static void forget() {
        current = null;
    }

    /** The list with its first {@code i} cells copied in front of {@code rest}. */
    private static Cons copyPrefix(Cons c, int i, Cons rest) {
        if (i == 0) {
            return rest;
        }
        return new Cons(c.head, copyPrefix(c.tail, i - 1, rest));
    }

    private static Cons drop(Cons c, int i) {
        for (int k = 0; k < i; k++) {
            c = c.tail;
        }
        return c;
    }

    @Override public int size() { return current.size; }
    @Override public long get(int i) { return drop(current.first, i).head; }
    @Override public boolean structural() { return true; }

    @Override
    public void set(int i, long v) {
        Version o = current;
        current = new Version(o.size, copyPrefix(o.first, i, new Cons(v, drop(o.first, i).tail)));
    }

    @Override
    public void insert(int i, long v) {
        Version o = current;
        current = new Version(o.size + 1, copyPrefix(o.first, i, new Cons(v, drop(o.first, i))));
    }

    @Override
    public void remove(int i) {
        Version o = current;
        current = new Version(o.size - 1, copyPrefix(o.first, i, drop(o.first, i).tail));
    }
}
