package io.engram.tests;

import io.engram.Unrecoverable;

/** A plain user class for the tests: a value, two links, a scratch field that is not persisted. */
public class Node {
    public long value;
    public Node next;
    public Node other;
    public String label;
    @Unrecoverable
    public Object scratch;
    public transient int cache;

    public Node() {
    }

    public Node(long value, String label) {
        this.value = value;
        this.label = label;
    }
}
