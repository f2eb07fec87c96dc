package io.engram.runtime;

import io.engram.runtime.IdentityTable.Img;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.reflect.Array;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.util.Map;

/**
 * The hooks for mutations that do not go through a store instruction or a
 * collection's own mutator: views and iterators, the JDK's in-place
 * helpers ({@code java.util.Arrays}, {@code java.util.Collections}) and
 * reflection ({@code Field.set*}, {@code java.lang.reflect.Array.set*},
 * setter method handles).
 * The agent rewrites those call sites in instrumented classes to private
 * static bridges in the class that call these around the real call.
 *
 * <pre>
 *   r = c.iterator() / keySet() / subList(..) / ...   -> view(c, r, kind)  r registered in {@link Views}
 *   e = it.next() / previous()                        -> element(it, e)  a map entry registered
 *   v.forEach(c) / it.forEachRemaining(c)             -> c wrapped: element(v, e) before each accept
 *   r = Collections.synchronizedX(c) / checkedX(c)    -> view(c, r, SAME)
 *   Arrays.fill/sort/setAll/parallel*(a, ..)          -> s = beforeArray(a); [insertArray(a, v)]; call; afterArray(a, s)
 *   Collections.sort/reverse/... (l, ..)              -> Barriers.before(l); call; Barriers.after(l)
 *   field.setX(o, v)                                  -> fieldPre(f, o, v); call; fieldPost(f, o)
 *   Array.setX(a, i, v)                               -> arrayPre(a, i, v); call; arrayPost(a, i)
 *   lookup.findSetter/findStaticSetter/unreflectSetter -> the handle wrapped: fieldPre; set; fieldPost
 * </pre>
 *
 * Mutations through a registered view (iterator remove, {@code
 * ListIterator.set/add}, {@code Map.Entry.setValue}, {@code
 * keySet().remove}, {@code subList(..).clear()}, ...) go through the
 * ordinary collection bridges, whose hooks resolve the view to its root
 * collection and re-image it ({@link Barriers#before}, {@link Barriers#after}).
 *
 * <p>Invariants: each hook starts with the cheap check (no pool open
 * returns at once; an object that is not recoverable costs one identity
 * lookup). Nothing is persisted before the call; a value that cannot be
 * persisted is refused before the call (a {@code NotPersistableException},
 * the call does not happen). Inside a region, the Java side is saved for
 * the region's undo before the call.
 *
 * <p>Crash behaviour: an in-place helper on a recoverable array outside a
 * region is one implicit region ({@link Graph#oneCommit}): a crash leaves
 * the array's old or new contents, never a partial sort or fill; a
 * reflective field or element store is one word, like the store it mirrors.
 *
 * <p>Public because instrumented classes call it; not an API.
 */
public final class CallBarriers {
    private CallBarriers() {
    }

    // ---- views ---------------------------------------------------------

    /**
     * {@code v} was obtained from {@code parent} (a view, iterator or
     * wrapper): registered if it writes through to a recoverable
     * collection. {@code kind} is what the call gives ({@link Views#KEYS}
     * for a key set, {@link Views#ENTRIES}, {@link Views#MAP_VIEW} for a
     * sub-map, {@link Views#SAME} for an iterator, sub-set or wrapper,
     * {@link Views#NONE}), resolved against the parent's.
     */
    public static void view(Object parent, Object v, int kind) {
        Graph g = Graph.current;
        if (g == null || parent == null || v == null) {
            return;
        }
        if (g.tracked(parent) != null) {
            int rootKind = parent instanceof Map<?, ?> ? Views.MAP_VIEW
                    : parent instanceof java.util.Set<?> ? Views.KEYS : Views.NONE;
            Views.put(v, parent, Views.derive(rootKind, kind));
            return;
        }
        Object root = Barriers.viewRoot(g, parent);
        if (root != null) {
            Views.put(v, root, Views.derive(Views.kind(parent), kind));
        }
    }

    /** An element an iterator returned: a map entry (its {@code setValue} writes through) is registered, a key noted. */
    public static void element(Object it, Object v) {
        Graph g = Graph.current;
        if (g != null && it != null && v != null && (Views.keyViews || v instanceof Map.Entry<?, ?>)) {
            ViewKeys.element(g, it, v);
        }
    }

    /**
     * The consumer to pass to {@code v.forEach(c)} or {@code
     * it.forEachRemaining(c)}: for a key-set or entry-set view (or iterator)
     * of a recoverable collection, {@code c} wrapped so that each element is
     * seen as {@code next()} would show it (entries registered, keys noted
     * for a later {@code remove()}); otherwise {@code c} itself.
     */
    public static <T> java.util.function.Consumer<T> consumer(Object v, java.util.function.Consumer<T> c) {
        Graph g = Graph.current;
        if (g == null || v == null || c == null || Views.root(v) == null) {
            return c;
        }
        int kind = Views.kind(v);
        if (kind != Views.KEYS && kind != Views.ENTRIES) {
            return c;
        }
        return e -> {
            if (e != null) {
                ViewKeys.element(g, v, e);
            }
            c.accept(e);
        };
    }

    // ---- java.util.Arrays ---------------------------------------------

    /**
     * Before an in-place helper on array {@code a}: in a region its contents
     * are saved for the region's undo; outside one a copy is returned, to put
     * the array back if the image cannot follow (a full pool).
     */
    public static Object beforeArray(Object a) {
        Graph g = Graph.current;
        if (g == null || a == null || !a.getClass().isArray() || g.tracked(a) == null) {
            return null;
        }
        int len = Array.getLength(a);
        if (g.region() != null) {
            g.saveArrayRange(a, 0, len);
            return null;
        }
        Object copy = Array.newInstance(a.getClass().getComponentType(), len);
        System.arraycopy(a, 0, copy, 0, len);
        return copy;
    }

    /** A value {@code Arrays.fill} stores into a recoverable array: refused before the call if it cannot be persisted. */
    public static void insertArray(Object a, Object v) {
        Graph g = Graph.current;
        if (g == null || a == null || v == null || g.tracked(a) == null) {
            return;
        }
        g.checkPersistable(v, () -> Graph.describe(a) + "[*]");
    }

    /** After the helper: the whole image is rewritten from the array, as one commit outside a region. */
    public static void afterArray(Object a, Object saved) {
        Graph g = Graph.current;
        if (g == null || a == null || !a.getClass().isArray()) {
            return;
        }
        Img img = g.trackedAfterStore(a);
        if (img == null) {
            return;
        }
        int len = Array.getLength(a);
        try {
            g.oneCommit(() -> g.resyncElements(a, img, 0, len));
        } catch (RuntimeException | Error e) {
            if (saved != null) {
                System.arraycopy(saved, 0, a, 0, len); // the image kept the old contents: so does the array
            }
            throw e;
        }
    }

    // ---- reflection ----------------------------------------------------

    /** The id the agent would give a putfield/putstatic of {@code f}. */
    private static int fieldId(Field f) {
        Class<?> k = f.getDeclaringClass();
        return Registry.fieldId(k.getName().replace('.', '/'), f.getName(), f.getType().descriptorString(),
                Modifier.isStatic(f.getModifiers()), k.getClassLoader());
    }

    /** The persisted slot {@code f} names in recoverable object {@code o}, or null. */
    private static JType.Slot slotOf(Graph g, Img img, Field f) {
        return g.slot(img.type, fieldId(f));
    }

    /**
     * Before {@code f.setX(o, v)}: a value that cannot be persisted is
     * refused (the store does not happen); in a region the old value is
     * saved for the undo. {@code v} is null for primitive setters.
     */
    public static void fieldPre(Field f, Object o, Object v) {
        Graph g = Graph.current;
        if (g == null || f == null) {
            return;
        }
        if (Modifier.isStatic(f.getModifiers())) {
            if (Registry.ROOT_CLASSES.contains(f.getDeclaringClass().getName()) && v != null
                    && f.getType().isInstance(v)) {
                g.checkPersistable(v, () -> Barriers.rootName(f));
                saveOld(g, f, null);
            }
            return;
        }
        Img img = o == null ? null : g.tracked(o);
        JType.Slot s = img == null ? null : slotOf(g, img, f);
        if (s == null) {
            return;
        }
        if (s.isRef() && v != null) {
            g.checkPersistable(v, () -> Graph.describe(o) + "." + f.getName());
        }
        saveOld(g, s.field(), o);
    }

    private static void saveOld(Graph g, Field f, Object o) {
        RegionState r = g.region();
        if (r != null) {
            try {
                f.setAccessible(true);
            } catch (RuntimeException e) {
                return; // not ours to undo (a JDK field): the store will be refused or not persisted
            }
            Object old = Codec.get(f, o);
            r.javaUndo.add(() -> Codec.set(f, o, old));
        }
    }

    /** After {@code f.setX(o, v)}: the image slot (or durable root) is rewritten from the field. */
    public static void fieldPost(Field f, Object o) {
        Graph g = Graph.current;
        if (g == null || f == null) {
            return;
        }
        if (Modifier.isStatic(f.getModifiers())) {
            Barriers.staticPost(fieldId(f));
            return;
        }
        Img img = o == null ? null : g.trackedAfterStore(o);
        JType.Slot s = img == null ? null : slotOf(g, img, f);
        if (s != null) {
            g.resyncField(o, img, s);
        }
    }

    // ---- method handles that set fields ---------------------------------

    private static final MethodHandle PRE;
    private static final MethodHandle POST;

    static {
        try {
            MethodHandles.Lookup l = MethodHandles.lookup();
            PRE = l.findStatic(CallBarriers.class, "fieldPre",
                    MethodType.methodType(void.class, Field.class, Object.class, Object.class));
            POST = l.findStatic(CallBarriers.class, "fieldPost", MethodType.methodType(void.class, Field.class,
                    Object.class));
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** {@code lookup.findSetter(refc, name, type)} returned {@code mh}: the same handle with the field hooks. */
    public static MethodHandle findSetter(MethodHandle mh, Class<?> refc, String name, Class<?> type) {
        Field f = declared(refc, name);
        return f == null ? mh : hooked(mh, f);
    }

    /** {@code lookup.findStaticSetter(refc, name, type)}: as {@link #findSetter} (a durable root is rewritten after). */
    public static MethodHandle findStaticSetter(MethodHandle mh, Class<?> refc, String name, Class<?> type) {
        return findSetter(mh, refc, name, type);
    }

    /** {@code lookup.unreflectSetter(f)}: as {@link #findSetter}. */
    public static MethodHandle unreflectSetter(MethodHandle mh, Field f) {
        return hooked(mh, f);
    }

    /** The field {@code name} as the JVM resolves it from {@code refc} (its class, then superclasses), or null. */
    private static Field declared(Class<?> refc, String name) {
        for (Class<?> k = refc; k != null; k = k.getSuperclass()) {
            for (Field f : k.getDeclaredFields()) {
                if (f.getName().equals(name)) {
                    return f;
                }
            }
        }
        return null;
    }

    /**
     * {@code (o, v) -> { fieldPre(f, o, v); mh(o, v); fieldPost(f, o); }}
     * (static: {@code (v) -> ...} with a null object), as method handle
     * combinators, so it is a handle of {@code mh}'s type.
     */
    private static MethodHandle hooked(MethodHandle mh, Field f) {
        MethodType t = mh.type();
        boolean isStatic = t.parameterCount() == 1;
        MethodHandle pre = MethodHandles.insertArguments(PRE, 0, f);
        MethodHandle post = MethodHandles.insertArguments(POST, 0, f);
        if (isStatic) {
            pre = MethodHandles.insertArguments(pre, 0, (Object) null);
            post = MethodHandles.dropArguments(MethodHandles.insertArguments(post, 0, (Object) null), 0,
                    t.parameterType(0));
        } else {
            post = MethodHandles.dropArguments(post, 1, t.parameterType(1));
        }
        pre = pre.asType(t);
        post = post.asType(t);
        return MethodHandles.foldArguments(MethodHandles.foldArguments(post, mh), pre);
    }

    /** Before {@code Array.setX(a, i, v)} on a recoverable array: as {@link #fieldPre}. */
    public static void arrayPre(Object a, int i, Object v) {
        Graph g = Graph.current;
        if (g == null || a == null || !a.getClass().isArray() || i < 0 || i >= Array.getLength(a)
                || g.tracked(a) == null) {
            return;
        }
        if (v != null && !a.getClass().getComponentType().isPrimitive()) {
            g.checkPersistable(v, () -> Graph.describe(a) + "[" + i + "]");
        }
        g.saveArrayRange(a, i, 1);
    }

    /** After {@code Array.setX(a, i, v)}: the element's image is rewritten from the array. */
    public static void arrayPost(Object a, int i) {
        Graph g = Graph.current;
        if (g == null || a == null) {
            return;
        }
        Img img = g.trackedAfterStore(a);
        if (img != null) {
            g.resyncElements(a, img, i, 1);
        }
    }
}
