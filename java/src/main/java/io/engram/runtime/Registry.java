package io.engram.runtime;

import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * What the agent learnt while instrumenting classes, shared with the
 * runtime: the field references its hooks name by id, the classes it
 * instrumented (only their objects can be kept in sync), and the classes
 * that declare durable roots. Filled at class-load time, read by hooks.
 */
public final class Registry {
    private Registry() {
    }

    /** A field named by a putfield/putstatic the agent hooked. */
    public record FieldRef(String owner, String name, String desc, boolean isStatic, ClassLoader loader) {
        public String ownerName() {
            return owner.replace('/', '.');
        }
    }

    private static final CopyOnWriteArrayList<FieldRef> FIELDS = new CopyOnWriteArrayList<>();
    private static final ConcurrentHashMap<FieldRef, Integer> IDS = new ConcurrentHashMap<>();
    /** Binary names of instrumented classes. */
    public static final Set<String> INSTRUMENTED = ConcurrentHashMap.newKeySet();
    /** Binary names of classes declaring @DurableRoot fields. */
    public static final Set<String> ROOT_CLASSES = ConcurrentHashMap.newKeySet();
    /**
     * Binary names of classes whose fields some instrumented code writes
     * behind the agent's back (a VarHandle or field updater created for
     * the class, an Unsafe field offset taken of it, Unsafe stores in it),
     * each with how: such a class is not persistable.
     */
    public static final Map<String, String> HANDLE_WRITTEN = new ConcurrentHashMap<>();

    /** The id of a field reference (stable for this JVM). */
    public static int fieldId(String owner, String name, String desc, boolean isStatic, ClassLoader loader) {
        FieldRef ref = new FieldRef(owner, name, desc, isStatic, loader);
        return IDS.computeIfAbsent(ref, r -> {
            synchronized (FIELDS) {
                FIELDS.add(r);
                return FIELDS.size() - 1;
            }
        });
    }

    static FieldRef field(int id) {
        return FIELDS.get(id);
    }
}
