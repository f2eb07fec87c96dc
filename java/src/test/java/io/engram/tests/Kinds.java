package io.engram.tests;

import java.util.Comparator;

/** Small types for the round-trip tests. */
public final class Kinds {
    private Kinds() {
    }

    public enum Color { RED, GREEN, BLUE }

    /** An enum whose constants have bodies (subclasses). */
    public enum Op {
        ADD { int apply(int a, int b) { return a + b; } },
        SUB { int apply(int a, int b) { return a - b; } };

        abstract int apply(int a, int b);
    }

    public record Point(int x, int y, String name) {
    }

    /** Every primitive field type, and some references. */
    public static class Prims {
        public boolean z;
        public byte b;
        public char c;
        public short s;
        public int i;
        public long j;
        public float f;
        public double d;
        public Object ref;
        public final String fin;

        public Prims() {
            this.fin = "final";
        }
    }

    /** A user comparator (persistable, unlike a lambda). */
    public static final class Reverse implements Comparator<String> {
        @Override
        public int compare(String a, String b) {
            return b.compareTo(a);
        }
    }

    public static class Base {
        public int baseValue;
        public Object baseRef;
    }

    public static class Derived extends Base {
        public int derivedValue;
    }

    /** Key with value semantics for hash maps. */
    public static final class Key {
        public int id;

        public Key(int id) {
            this.id = id;
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Key k && k.id == id;
        }

        @Override
        public int hashCode() {
            return Integer.hashCode(id);
        }
    }
}
