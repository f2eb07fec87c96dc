package io.engram.apps.kernels;

import io.engram.DurableRoot;
import io.engram.Engram;

/**
 * MList, AutoPersist style: a mutable singly linked list with a size field,
 * ordinary Java plus three markings (the durable root and two failure-atomic
 * regions). An update is one durable store; an insert or a remove changes a
 * link and the size together, inside a region, so after a crash the size
 * always equals the number of nodes.
 */
public final class MList implements Seq {
    static final class Node {
        long value;
        Node next;

        Node(long value, Node next) {
            this.value = value;
            this.next = next;
        }
    }

    static final class Head {
        int size;
        Node first;
    }

    @DurableRoot
    static Head list;

    private MList() {
    }

    /** A list of {@code n} zeros, published as the root. */
    public static MList create(int n) {
        Head h = new Head();
        for (int i = 0; i < n; i++) {
            h.first = new Node(0, h.first);
        }
        h.size = n;
        list = h;
        return new MList();
    }

    public static MList attach() {
        return list == null ? null : new MList();
    }

    public static void forget() {
        list = null;
    }

    private static Node node(int i) {
        Node n = list.first;
        for (int k = 0; k < i; k++) {
            n = n.next;
        }
        return n;
    }

    @Override public int size() { return list.size; }
    @Override public long get(int i) { return node(i).value; }
    @Override public void set(int i, long v) { node(i).value = v; }
    @Override public boolean structural() { return true; }

    @Override
    public void insert(int i, long v) {
        Engram.atomic(() -> {
            if (i == 0) {
                list.first = new Node(v, list.first);
            } else {
                Node prev = node(i - 1);
                prev.next = new Node(v, prev.next);
            }
            list.size++;
        });
    }

    @Override
    public void remove(int i) {
        Engram.atomic(() -> {
            if (i == 0) {
                list.first = list.first.next;
            } else {
                Node prev = node(i - 1);
                prev.next = prev.next.next;
            }
            list.size--;
        });
    }
}
