package io.engram.runtime;

import java.lang.invoke.CallSite;
import java.lang.invoke.ConstantCallSite;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.invoke.MutableCallSite;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;

/**
 * The store hooks' per-class guard: "no object of this class is
 * recoverable". The agent links each putfield hook and each array-store
 * hook through {@code invokedynamic} to {@link #bootstrap}, which returns
 * {@code guardWithTest(guard, fast, slow)}: while the guard of the store's
 * key class holds, the hook is {@code fast} (nothing for a putfield hook,
 * the bare store for an array hook), which the JIT inlines and folds to
 * nothing (a call-site target is a compile-time constant with a
 * dependency); once it fails, the hook is the full one in {@link Barriers}.
 *
 * <p>Key classes: a putfield hook is keyed by the field's owner class (the
 * class named in the instruction), so an object of class C invalidates the
 * guards of C and of every superclass of C; an array hook by its array
 * kind (all reference arrays share {@code Object[]}, {@code boolean[]}
 * shares {@code byte[]}).
 *
 * <p>Invariant (closes the race of a store with the first conversion of its
 * class): {@link #unguard} returns only after the guards are failed and
 * every Java thread has passed a global safepoint after that. A conversion
 * calls it before it publishes the first object of a class and before it
 * reads that object's fields, so a racing store either completed (and was
 * made visible by the safepoint) before the conversion reads the field, or
 * its post-store hook runs after the safepoint and takes the full path,
 * which re-synchronises the slot. docs/java.md ("Unrelated classes pay
 * nothing") gives the argument for the interpreter, C1 and C2.
 *
 * <p>The putstatic hooks are linked by {@link #root}: nothing at all unless
 * the field is a durable root.
 *
 * <p>Guards are re-armed when the pool closes (no object is recoverable
 * then), so the next pool's first conversion of a class fails them again.
 * Crash behaviour: none (nothing here is persistent).
 */
public final class StoreGuards {
    private StoreGuards() {
    }

    /** One class's guard: a call site answering "still guarded?", folded by the JIT. */
    private static final class Guard {
        final MutableCallSite holds = new MutableCallSite(TRUE);
        /** Set (under {@link #LOCK}) once the guard failed and the safepoint after it passed. */
        volatile boolean failed;
    }

    private static final MethodHandle TRUE = MethodHandles.constant(boolean.class, true);
    private static final MethodHandle FALSE = MethodHandles.constant(boolean.class, false);
    private static final Object LOCK = new Object();
    /** Guards that failed since the last re-arm. */
    private static final List<Guard> FAILED = new ArrayList<>();

    private static final ClassValue<Guard> GUARDS = new ClassValue<>() {
        @Override
        protected Guard computeValue(Class<?> type) {
            return new Guard();
        }
    };

    /** For tests: never fail a guard (a seeded fault: stores to newly recoverable objects are then lost). */
    private static final boolean BROKEN = Boolean.getBoolean("engram.test.brokenGuards");

    // ---- linking ---------------------------------------------------------

    /**
     * The bootstrap of every guarded hook: {@code hook} names the
     * {@link Barriers} method with the call's type, {@code key} the key
     * class (a binary name, resolved in the caller's loader). A key that
     * does not resolve links the full hook, unguarded.
     */
    public static CallSite bootstrap(MethodHandles.Lookup caller, String hook, MethodType type, String key)
            throws ReflectiveOperationException {
        MethodHandle slow = MethodHandles.lookup().findStatic(Barriers.class, hook, type);
        Class<?> k;
        try {
            k = Class.forName(key, false, caller.lookupClass().getClassLoader());
        } catch (ClassNotFoundException | LinkageError e) {
            return new ConstantCallSite(slow);
        }
        Guard g = GUARDS.get(keyOf(k));
        MethodHandle fast = fast(hook, type);
        return new ConstantCallSite(MethodHandles.guardWithTest(g.holds.dynamicInvoker(), fast, slow));
    }

    /**
     * The bootstrap of the putstatic hooks ({@code staticPre}, {@code
     * staticPost}): the full hook if field {@code id} is a durable root,
     * else nothing, for good (an annotation never changes).
     */
    public static CallSite root(MethodHandles.Lookup caller, String hook, MethodType type, int id)
            throws ReflectiveOperationException {
        MethodHandle full = MethodHandles.lookup().findStatic(Barriers.class, hook, type);
        return new ConstantCallSite(Barriers.isRoot(id) ? full : MethodHandles.empty(type));
    }

    /** What a hook does while its class is guarded: nothing (the value back, for preJ/preD), or the bare store. */
    private static MethodHandle fast(String hook, MethodType type) throws ReflectiveOperationException {
        if (hook.endsWith("store")) {
            return MethodHandles.lookup().findStatic(StoreGuards.class, "plain" + hook, type);
        }
        if (type.returnType() == void.class) {
            return MethodHandles.empty(type);
        }
        MethodHandle id = MethodHandles.identity(type.returnType());
        return MethodHandles.dropArguments(id, 1, type.parameterList().subList(1, type.parameterCount()));
    }

    /** The guard key of a class: itself, or its array kind. */
    private static Class<?> keyOf(Class<?> c) {
        if (!c.isArray()) {
            return c;
        }
        Class<?> e = c.getComponentType();
        if (!e.isPrimitive()) {
            return Object[].class;
        }
        return e == boolean.class ? byte[].class : c;
    }

    // ---- failing and re-arming -------------------------------------------

    /** True if {@link #unguard} has nothing to do for objects of {@code c} (the conversion's fast check). */
    static boolean unguarded(Class<?> c) {
        return BROKEN || (!c.isArray() && jdk(c)) || GUARDS.get(keyOf(c)).failed;
    }

    /**
     * A class of the JDK (boot or platform loader): never instrumented, and
     * the ones the runtime persists (strings, boxes, collections) have no
     * field an instrumented putfield can name, so their objects need no
     * guard failed (and cost no safepoint). Arrays are not: their hooks are
     * keyed by kind.
     */
    private static boolean jdk(Class<?> c) {
        ClassLoader l = c.getClassLoader();
        return l == null || l == ClassLoader.getPlatformClassLoader();
    }

    /**
     * Fails the guards of these classes (and of their superclasses) and
     * returns after a global safepoint that follows the failing: from then
     * on no thread runs a store hook of theirs on the guarded path without
     * that store being visible to the caller. Called before publishing the
     * first object of a class.
     */
    static void unguard(Collection<Class<?>> classes) {
        if (BROKEN) {
            return;
        }
        synchronized (LOCK) {
            List<Guard> now = new ArrayList<>();
            for (Class<?> c : classes) {
                collect(c, now);
            }
            if (now.isEmpty()) {
                return;
            }
            for (Guard g : now) {
                g.holds.setTarget(FALSE); // deoptimises code that folded the guard (a handshake) if any
            }
            MutableCallSite.syncAll(now.stream().map(g -> g.holds).toArray(MutableCallSite[]::new));
            globalSafepoint();
            for (Guard g : now) {
                g.failed = true;
                FAILED.add(g);
            }
        }
    }

    private static void collect(Class<?> c, List<Guard> out) {
        if (c.isArray()) {
            add(GUARDS.get(keyOf(c)), out);
            return;
        }
        for (Class<?> k = c; k != null && !jdk(k); k = k.getSuperclass()) { // a JDK class's superclasses are too
            add(GUARDS.get(k), out);
        }
    }

    private static void add(Guard g, List<Guard> out) {
        if (!g.failed && !out.contains(g)) {
            out.add(g);
        }
    }

    /**
     * A stop of every Java thread at a safepoint. HotSpot implements
     * {@code Thread.getAllStackTraces} as the VM operation "ThreadDump",
     * evaluated at a safepoint (seen with {@code -Xlog:safepoint}); each
     * thread reaching it, or leaving native/blocked code, executes a full
     * fence, which is the asymmetric half of the store hooks' check.
     */
    private static void globalSafepoint() {
        Thread.getAllStackTraces();
    }

    /** Re-arms every failed guard: called when the pool closes, when no object is recoverable. */
    static void rearm() {
        synchronized (LOCK) {
            for (Guard g : FAILED) {
                g.holds.setTarget(TRUE);
                g.failed = false;
            }
            FAILED.clear();
        }
    }

    // ---- the bare stores (guarded array hooks) ----------------------------

    private static void plainaastore(Object[] a, int i, Object v) {
        a[i] = v;
    }

    private static void plainiastore(int[] a, int i, int v) {
        a[i] = v;
    }

    private static void plainlastore(long[] a, int i, long v) {
        a[i] = v;
    }

    private static void plainfastore(float[] a, int i, float v) {
        a[i] = v;
    }

    private static void plaindastore(double[] a, int i, double v) {
        a[i] = v;
    }

    private static void plaincastore(char[] a, int i, int v) {
        a[i] = (char) v;
    }

    private static void plainsastore(short[] a, int i, int v) {
        a[i] = (short) v;
    }

    private static void plainbastore(Object a, int i, int v) {
        if (a instanceof boolean[] z) {
            z[i] = (v & 1) != 0;
        } else {
            ((byte[]) a)[i] = (byte) v;
        }
    }
}
