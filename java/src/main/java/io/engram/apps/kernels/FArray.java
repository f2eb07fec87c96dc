package io.engram.apps.kernels;

import io.engram.DurableRoot;

/**
 * FArray, AutoPersist style: a persistent (functional) array in the style of
 * PCollections' TreePVector, written in plain Java: an immutable balanced
 * binary tree over the index range; an update copies the O(log n) nodes on
 * the path and publishes the new version with one store to the durable root
 * (the unchanged subtrees are shared between versions). A crash leaves the
 * old or the new version. One marking.
 */
public final class FArray implements Seq {
    /** An immutable node: a leaf (lo+1 == hi) holds a value, an inner node two halves. */
    static final class Node {
        final Node left;
        final Node right;
        final long value;

        Node(Node left, Node right, long value) {
            this.left = left;
            this.right = right;
            this.value = value;
        }
    }

    /** An immutable version: size and tree. */
    static final class Version {
        final int size;
        final Node root;

        Version(int size, Node root) {
            this.size = size;
            this.root = root;
        }
    }

    @DurableRoot
    static Version current;

    private FArray() {
    }

    public static FArray create(int n) {
        current = new Version(n, build(0, n));
        return new FArray();
    }

    public static FArray attach() {
        return current == null ? null : new FArray();
    }

    public static void forget() {
        current = null;
    }

    private static Node build(int lo, int hi) {
        if (hi - lo == 1) {
            return new Node(null, null, 0);
        }
        int mid = (lo + hi) >>> 1;
        return new Node(build(lo, mid), build(mid, hi), 0);
    }

    private static Node with(Node n, int lo, int hi, int i, long v) {
        if (hi - lo == 1) {
            return new Node(null, null, v);
        }
        int mid = (lo + hi) >>> 1;
        return i < mid ? new Node(with(n.left, lo, mid, i, v), n.right, 0)
                : new Node(n.left, with(n.right, mid, hi, i, v), 0);
    }

    @Override public int size() { return current.size; }

    @Override
    public long get(int i) {
        Node n = current.root;
        int lo = 0;
        int hi = current.size;
        while (hi - lo > 1) {
            int mid = (lo + hi) >>> 1;
            if (i < mid) {
                n = n.left;
                hi = mid;
            } else {
                n = n.right;
                lo = mid;
            }
        }
        return n.value;
    }

    @Override
    public void set(int i, long v) {
        Version old = current;
        current = new Version(old.size, with(old.root, 0, old.size, i, v));
    }
}
