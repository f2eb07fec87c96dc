package io.engram.runtime;

import io.engram.EngramException;
import io.engram.EngramException.Code;

import java.lang.foreign.MemorySegment;
import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.SortedMap;
import java.util.SortedSet;

/**
 * Conversions between Java values and image words: field access by
 * reflection, primitive bits (ints sign-extended, floats as raw bits),
 * primitive arrays as memory segments, and collections as flat element
 * arrays (maps as key, value, key, value...). No state.
 */
final class Codec {
    private Codec() {
    }

    static Object get(Field f, Object o) {
        try {
            return f.get(o);
        } catch (IllegalAccessException e) {
            throw new EngramException(Code.INTERNAL, "cannot read " + f + ": " + e.getMessage(), e);
        }
    }

    static void set(Field f, Object o, Object v) {
        try {
            f.set(o, v);
        } catch (IllegalAccessException e) {
            throw new EngramException(Code.INTERNAL, "cannot write " + f + ": " + e.getMessage(), e);
        }
    }

    /** The slot bits of a primitive field's current value. */
    static long readBits(JType.Slot s, Object o) {
        return bits(s.kind(), get(s.field(), o));
    }

    /** The slot bits of a boxed primitive value of descriptor kind {@code k}. */
    static long bits(char k, Object v) {
        return switch (k) {
            case 'Z' -> ((Boolean) v) ? 1 : 0;
            case 'B' -> (Byte) v;
            case 'C' -> (Character) v;
            case 'S' -> (Short) v;
            case 'I' -> (Integer) v;
            case 'J' -> (Long) v;
            case 'F' -> Float.floatToRawIntBits((Float) v) & 0xffffffffL;
            case 'D' -> Double.doubleToRawLongBits((Double) v);
            default -> throw new IllegalArgumentException("not a primitive kind: " + k);
        };
    }

    /** The slot bits of an int-typed value on the operand stack (boolean, byte, char, short, int). */
    static long intBits(char k, int v) {
        return switch (k) {
            case 'Z' -> v & 1;
            case 'B' -> (byte) v;
            case 'C' -> (char) v;
            case 'S' -> (short) v;
            default -> v;
        };
    }

    /** The boxed value of slot bits. */
    static Object value(char k, long b) {
        return switch (k) {
            case 'Z' -> b != 0;
            case 'B' -> (byte) b;
            case 'C' -> (char) b;
            case 'S' -> (short) b;
            case 'I' -> (int) b;
            case 'J' -> b;
            case 'F' -> Float.intBitsToFloat((int) b);
            case 'D' -> Double.longBitsToDouble(b);
            default -> throw new IllegalArgumentException("not a primitive kind: " + k);
        };
    }

    static long boxBits(Object v) {
        return switch (v) {
            case Boolean b -> b ? 1 : 0;
            case Byte b -> b;
            case Short s -> s;
            case Character c -> c;
            case Integer i -> i;
            case Long l -> l;
            case Float f -> Float.floatToRawIntBits(f) & 0xffffffffL;
            case Double d -> Double.doubleToRawLongBits(d);
            default -> throw new IllegalArgumentException("not a box: " + v.getClass());
        };
    }

    static Object unbox(Class<?> c, long b) {
        if (c == Boolean.class) {
            return b != 0;
        } else if (c == Byte.class) {
            return (byte) b;
        } else if (c == Short.class) {
            return (short) b;
        } else if (c == Character.class) {
            return (char) b;
        } else if (c == Integer.class) {
            return (int) b;
        } else if (c == Long.class) {
            return b;
        } else if (c == Float.class) {
            return Float.intBitsToFloat((int) b);
        }
        return Double.longBitsToDouble(b);
    }

    /** A primitive array's contents as a heap segment (booleans as bytes). */
    static MemorySegment primSegment(Object arr) {
        return switch (arr) {
            case byte[] a -> MemorySegment.ofArray(a);
            case char[] a -> MemorySegment.ofArray(a);
            case short[] a -> MemorySegment.ofArray(a);
            case int[] a -> MemorySegment.ofArray(a);
            case long[] a -> MemorySegment.ofArray(a);
            case float[] a -> MemorySegment.ofArray(a);
            case double[] a -> MemorySegment.ofArray(a);
            case boolean[] a -> {
                byte[] b = new byte[a.length];
                for (int i = 0; i < a.length; i++) {
                    b[i] = (byte) (a[i] ? 1 : 0);
                }
                yield MemorySegment.ofArray(b);
            }
            default -> throw new IllegalArgumentException("not a primitive array: " + arr.getClass());
        };
    }

    /** Fills a primitive array from its image bytes. */
    static void fillPrim(Object arr, MemorySegment src) {
        if (arr instanceof boolean[] a) {
            for (int i = 0; i < a.length; i++) {
                a[i] = src.get(java.lang.foreign.ValueLayout.JAVA_BYTE, i) != 0;
            }
            return;
        }
        MemorySegment.copy(src, 0, primSegment(arr), 0, src.byteSize());
    }

    /** A collection's elements, or a map's keys and values interleaved. */
    static Object[] snapshot(Object coll) {
        if (coll instanceof Map<?, ?> m) {
            List<Object> out = new ArrayList<>(m.size() * 2);
            for (Map.Entry<?, ?> e : m.entrySet()) {
                out.add(e.getKey());
                out.add(e.getValue());
            }
            return out.toArray();
        }
        return ((Collection<?>) coll).toArray();
    }

    @SuppressWarnings("unchecked")
    static void restore(Object coll, Object[] elems) {
        if (coll instanceof Map<?, ?> m) {
            Map<Object, Object> mm = (Map<Object, Object>) m;
            mm.clear();
            for (int i = 0; i + 1 < elems.length; i += 2) {
                mm.put(elems[i], elems[i + 1]);
            }
            return;
        }
        Collection<Object> c = (Collection<Object>) coll;
        c.clear();
        c.addAll(java.util.Arrays.asList(elems));
    }

    static Object comparator(Object coll) {
        if (coll instanceof SortedMap<?, ?> m) {
            return m.comparator();
        }
        if (coll instanceof SortedSet<?> s) {
            return s.comparator();
        }
        return null;
    }

    /** The references an image of {@code o} (of type {@code t}) would hold, each with its path edge. */
    static void children(Object o, JType t, java.util.function.BiConsumer<Object, String> f) {
        switch (t.kind) {
            case OBJECT, RECORD -> {
                for (JType.Slot s : t.slots) {
                    if (s.isRef()) {
                        f.accept(get(s.field(), o), "." + s.field().getName());
                    }
                }
            }
            case ARRAY -> {
                if (o instanceof Object[] a) {
                    for (int i = 0; i < a.length; i++) {
                        f.accept(a[i], "[" + i + "]");
                    }
                }
            }
            case COLLECTION, MAP -> {
                Object[] elems = snapshot(o);
                for (int i = 0; i < elems.length; i++) {
                    f.accept(elems[i], "{" + i + "}");
                }
                f.accept(comparator(o), ".comparator()");
            }
            default -> {
            }
        }
    }
}
