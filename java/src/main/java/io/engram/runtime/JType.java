package io.engram.runtime;

import io.engram.NotPersistableException;
import io.engram.Unrecoverable;
import io.engram.heap.Heap;

import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * How one Java class is imaged in the pool. Every image starts with the
 * heap type id of its class (word 0), so recovery needs nothing but the
 * pool to find the class again.
 *
 * <pre>
 *   OBJECT, RECORD  [type][slot 0][slot 1]...   one 8-byte slot per persisted field
 *                   (superclass fields first, each class's fields by name;
 *                   static, transient and @Unrecoverable fields have none)
 *   ARRAY           [type][length][data]        data: an array of length elements,
 *                   8-byte pool pointers for reference arrays, packed primitives otherwise
 *   STRING          [type][length][data]        data: the UTF-16 chars
 *   BOX             [type][bits]
 *   ENUM            [type][ordinal]
 *   COLLECTION, MAP [type][words][data][comparator]  data: that many element pointers
 *                   (keys and values interleaved for maps); words and data change
 *                   together in one region
 * </pre>
 *
 * The signature registered with the heap names every field with its type
 * (enum constants for enums), so a class that changed since the pool was
 * written is refused with LAYOUT_MISMATCH naming it.
 */
final class JType {
    enum Kind { OBJECT, RECORD, ARRAY, STRING, BOX, ENUM, COLLECTION, MAP }

    /** Supported JDK collections (exact classes). */
    static final Set<Class<?>> COLLECTIONS = Set.of(java.util.ArrayList.class, java.util.LinkedList.class,
            java.util.ArrayDeque.class, java.util.HashSet.class, java.util.LinkedHashSet.class, java.util.TreeSet.class);
    static final Set<Class<?>> MAPS = Set.of(java.util.HashMap.class, java.util.LinkedHashMap.class,
            java.util.TreeMap.class, ConcurrentHashMap.class);
    static final Set<Class<?>> BOXES = Set.of(Boolean.class, Byte.class, Short.class, Character.class,
            Integer.class, Long.class, Float.class, Double.class);

    /** One persisted field: its reflective handle, slot offset in the image, descriptor char. */
    record Slot(Field field, long offset, char kind) {
        boolean isRef() {
            return kind == 'L' || kind == '[';
        }
    }

    final Class<?> type;
    final Kind kind;
    final int typeId;
    final Slot[] slots;
    /** Element descriptor char for arrays ('L' for references). */
    final char elem;
    final int elemSize;
    final long imageSize;
    /** For records: component fields in canonical-constructor order. */
    final java.lang.reflect.Constructor<?> recordCtor;

    private JType(Class<?> type, Kind kind, Slot[] slots, char elem, java.lang.reflect.Constructor<?> ctor, Heap heap) {
        this.type = type;
        this.kind = kind;
        this.slots = slots;
        this.elem = elem;
        this.elemSize = elemSize(elem);
        this.recordCtor = ctor;
        this.imageSize = switch (kind) {
            case OBJECT, RECORD -> 8 + 8L * slots.length;
            case ARRAY, STRING -> 24;
            case BOX, ENUM -> 16;
            case COLLECTION, MAP -> 32;
        };
        this.typeId = heap.registerType(new Heap.TypeDesc(type.getName(), imageSize, ptrOffsets(), signature()));
    }

    static int elemSize(char c) {
        return switch (c) {
            case 'Z', 'B' -> 1;
            case 'C', 'S' -> 2;
            case 'I', 'F' -> 4;
            default -> 8;
        };
    }

    static char descChar(Class<?> c) {
        if (!c.isPrimitive()) {
            return c.isArray() ? '[' : 'L';
        }
        return c.descriptorString().charAt(0);
    }

    private int[] ptrOffsets() {
        return switch (kind) {
            case OBJECT, RECORD -> Arrays.stream(slots).filter(Slot::isRef).mapToInt(s -> (int) s.offset).toArray();
            case ARRAY, STRING -> new int[] {16};
            case COLLECTION, MAP -> new int[] {16, 24};
            default -> new int[0];
        };
    }

    private String signature() {
        StringBuilder sb = new StringBuilder(kind.name()).append(':');
        switch (kind) {
            case OBJECT, RECORD -> {
                for (Slot s : slots) {
                    sb.append(s.field.getDeclaringClass().getName()).append('.').append(s.field.getName())
                            .append(':').append(s.field.getType().descriptorString()).append(';');
                }
            }
            case ENUM -> {
                for (Object c : type.getEnumConstants()) {
                    sb.append(((Enum<?>) c).name()).append(';');
                }
            }
            default -> sb.append(type.getName());
        }
        return sb.toString();
    }

    /**
     * The image layout of {@code c}, or a NotPersistableException naming the
     * class and {@code path} when it cannot be persisted.
     */
    static JType of(Class<?> c, Heap heap, Set<String> instrumented, java.util.function.Supplier<String> path) {
        if (c.isEnum() || (c.getSuperclass() != null && c.getSuperclass().isEnum())) {
            Class<?> e = c.isEnum() ? c : c.getSuperclass();
            return new JType(e, Kind.ENUM, new Slot[0], 'L', null, heap);
        }
        if (c.isArray()) {
            return new JType(c, Kind.ARRAY, new Slot[0], descChar(c.getComponentType()), null, heap);
        }
        if (c == String.class) {
            return new JType(c, Kind.STRING, new Slot[0], 'C', null, heap);
        }
        if (BOXES.contains(c)) {
            return new JType(c, Kind.BOX, new Slot[0], 'J', null, heap);
        }
        if (COLLECTIONS.contains(c)) {
            return new JType(c, Kind.COLLECTION, new Slot[0], 'L', null, heap);
        }
        if (MAPS.contains(c)) {
            return new JType(c, Kind.MAP, new Slot[0], 'L', null, heap);
        }
        String why = refusal(c, instrumented);
        if (why != null) {
            throw new NotPersistableException(c, path.get(), why);
        }
        Slot[] slots = slotsOf(c, path);
        if (c.isRecord()) {
            Class<?>[] params = Arrays.stream(c.getRecordComponents()).map(r -> r.getType()).toArray(Class<?>[]::new);
            try {
                var ctor = c.getDeclaredConstructor(params);
                ctor.setAccessible(true);
                return new JType(c, Kind.RECORD, slots, 'L', ctor, heap);
            } catch (ReflectiveOperationException | RuntimeException e) {
                throw new NotPersistableException(c, path.get(), "record without an accessible canonical constructor");
            }
        }
        return new JType(c, Kind.OBJECT, slots, 'L', null, heap);
    }

    /** Why a class cannot be persisted, or null. */
    private static String refusal(Class<?> c, Set<String> instrumented) {
        if (c.isHidden()) {
            return "a lambda or hidden class (its captured state cannot be recovered)";
        }
        String n = c.getName();
        if (c.getClassLoader() == null || c.getClassLoader() == ClassLoader.getPlatformClassLoader()
                || n.startsWith("java.") || n.startsWith("javax.") || n.startsWith("jdk.") || n.startsWith("sun.")) {
            return "a JDK class Engram does not support (supported: arrays, String, boxed primitives, enums, "
                    + "ArrayList, LinkedList, ArrayDeque, HashMap, LinkedHashMap, TreeMap, ConcurrentHashMap, "
                    + "HashSet, LinkedHashSet, TreeSet)";
        }
        for (Class<?> k = c; k != null && k != Object.class && k != Record.class; k = k.getSuperclass()) {
            if (!instrumented.contains(k.getName())) {
                return k == c ? "the class was not instrumented by the Engram agent (started without -javaagent, "
                        + "or loaded before it)" : "its superclass " + k.getName() + " is not instrumented";
            }
            String how = Registry.HANDLE_WRITTEN.get(k.getName());
            if (how != null) {
                return (k == c ? "" : "its superclass " + k.getName() + ": ") + "its fields are written through " + how
                        + ", which the Engram agent cannot see";
            }
        }
        return null;
    }

    private static Slot[] slotsOf(Class<?> c, java.util.function.Supplier<String> path) {
        List<Class<?>> chain = new ArrayList<>();
        for (Class<?> k = c; k != null && k != Object.class && k != Record.class; k = k.getSuperclass()) {
            chain.add(0, k);
        }
        List<Slot> out = new ArrayList<>();
        for (Class<?> k : chain) {
            Field[] fs = k.getDeclaredFields();
            Arrays.sort(fs, Comparator.comparing(Field::getName));
            for (Field f : fs) {
                int m = f.getModifiers();
                if (Modifier.isStatic(m) || Modifier.isTransient(m) || f.isAnnotationPresent(Unrecoverable.class)) {
                    continue;
                }
                try {
                    f.setAccessible(true);
                } catch (RuntimeException e) {
                    throw new NotPersistableException(c, path.get(), "field " + f + " is not accessible: " + e.getMessage());
                }
                out.add(new Slot(f, 8 + 8L * out.size(), descChar(f.getType())));
            }
        }
        return out.toArray(new Slot[0]);
    }

    /** Does this type's image reference other images? */
    boolean hasRefs() {
        return switch (kind) {
            case OBJECT, RECORD -> Arrays.stream(slots).anyMatch(Slot::isRef);
            case ARRAY -> elem == 'L' || elem == '[';
            case COLLECTION, MAP -> true;
            default -> false;
        };
    }

    static final Map<Character, String> ELEM_TYPES = Map.of('1', "java.i8", '2', "java.i16", '4', "java.i32",
            '8', "java.i64", 'R', "java.ref");
}
