package io.engram.agent;

import org.objectweb.asm.ClassVisitor;
import org.objectweb.asm.MethodVisitor;
import org.objectweb.asm.Opcodes;
import org.objectweb.asm.Type;

/**
 * Which calls of an instrumented class get a bridge, and the bridges other
 * than the collection mutators' (those are {@code Transformer}'s own).
 * Every bridge is a private static synthetic method of the calling class
 * with straight-line code (no branches, so no stack map frames), which
 * keeps caller-sensitive calls ({@code Field.set}) seeing the same caller.
 *
 * <pre>
 *   coll     c.m(..) on a collection, view, iterator or entry   (Transformer.emitBridge)
 *   view     r = c.m(..); CallBarriers.view(c, r, kind); return r    iterator(), keySet(), subList(..), ...
 *   elem     r = it.m(); CallBarriers.element(it, r); return r  Iterator.next(), ListIterator.previous()
 *   foreach  v.m(CallBarriers.consumer(v, c))               Iterable.forEach, Iterator.forEachRemaining
 *   sview    r = Collections.m(c, ..); view(c, r, SAME); return r    synchronizedX, checkedX, Arrays.asList
 *   chelper  Barriers.before(l); [insert]; Collections.m(l, ..); Barriers.after(l)
 *   array    [insertArray(a, v)]; s = beforeArray(a); Arrays.m(a, ..); afterArray(a, s)
 *   field    fieldPre(f, o, v|null); f.setX(o, v); fieldPost(f, o)
 *   rarray   arrayPre(a, i, v|null); Array.setX(a, i, v); arrayPost(a, i)
 *   mhsetter r = lookup.findSetter(..)/findStaticSetter(..)/unreflectSetter(f);
 *            return CallBarriers.same-name(r, args)   the handle runs fieldPre/fieldPost around the store
 * </pre>
 *
 * Never throws for a call it does not know: {@link #kind} returns null and
 * the call is left alone.
 */
final class CallBridges {
    private CallBridges() {
    }

    private static final String OBJ = "Ljava/lang/Object;";
    /** Lookups that return a field-setting method handle: the handle is wrapped with the field hooks. */
    static final java.util.Set<String> SETTER_LOOKUPS = java.util.Set.of("findSetter", "findStaticSetter",
            "unreflectSetter");

    /** The bridge kind for a call, or null if the call is left alone. */
    static String kind(int opcode, String owner, String name, String desc) {
        Type[] args = Type.getArgumentTypes(desc);
        Type ret = Type.getReturnType(desc);
        boolean refRet = ret.getSort() == Type.OBJECT || ret.getSort() == Type.ARRAY;
        if (opcode == Opcodes.INVOKEVIRTUAL || opcode == Opcodes.INVOKEINTERFACE) {
            if (Transformer.COLLECTION_OWNERS.contains(owner)) {
                if (Transformer.MUTATORS.contains(name)) {
                    return "coll";
                }
                if (Transformer.VIEWS.contains(name) && refRet) {
                    return "view";
                }
                if ((name.equals("forEach") || name.equals("forEachRemaining"))
                        && desc.equals("(Ljava/util/function/Consumer;)V")) {
                    return "foreach";
                }
                if (Transformer.ELEMENTS.contains(name) && refRet && args.length == 0
                        && (owner.equals("java/util/Iterator") || owner.equals("java/util/ListIterator"))) {
                    return "elem";
                }
                return null;
            }
            if (owner.equals("java/lang/invoke/MethodHandles$Lookup") && SETTER_LOOKUPS.contains(name)
                    && ret.getDescriptor().equals("Ljava/lang/invoke/MethodHandle;")) {
                return "mhsetter";
            }
            if (owner.equals("java/lang/reflect/Field") && name.startsWith("set") && !name.equals("setAccessible")
                    && args.length == 2 && args[0].getDescriptor().equals(OBJ) && ret.getSort() == Type.VOID) {
                return "field";
            }
            return null;
        }
        if (opcode != Opcodes.INVOKESTATIC || args.length == 0) {
            return null;
        }
        boolean firstRef = args[0].getSort() == Type.OBJECT;
        if (owner.equals("java/util/Collections") && firstRef) {
            if (Transformer.COLLECTIONS_HELPERS.contains(name)) {
                return "chelper";
            }
            if ((name.startsWith("synchronized") || name.startsWith("checked")) && refRet) {
                return "sview";
            }
            return null;
        }
        if (owner.equals("java/util/Arrays") && Transformer.ARRAYS_HELPERS.contains(name)
                && args[0].getSort() == Type.ARRAY) {
            return "array";
        }
        if (owner.equals("java/util/Arrays") && name.equals("asList") && args.length == 1) {
            return "sview"; // a list writing through to the array
        }
        if (owner.equals("java/lang/reflect/Array") && name.startsWith("set") && args.length == 3
                && args[0].getDescriptor().equals(OBJ) && args[1].getSort() == Type.INT) {
            return "rarray";
        }
        return null;
    }

    /** Emits bridge {@code bname} of {@code kind} (not "coll") into the class being written. */
    static void emit(ClassVisitor cv, String kind, String bname, int opcode, String owner, String name, String desc,
            boolean itf) {
        boolean isStatic = opcode == Opcodes.INVOKESTATIC;
        String bdesc = isStatic ? desc : "(L" + owner + ";" + desc.substring(1);
        MethodVisitor mv = cv.visitMethod(Opcodes.ACC_PRIVATE | Opcodes.ACC_STATIC | Opcodes.ACC_SYNTHETIC, bname,
                bdesc, null, null);
        mv.visitCode();
        Type[] params = Type.getArgumentTypes(bdesc);
        int locals = 0;
        for (Type t : params) {
            locals += t.getSize();
        }
        switch (kind) {
            case "view", "sview" -> registering(mv, "view", kind.equals("sview") ? SAME : viewKind(name), params,
                    opcode, owner, name, desc, itf);
            case "elem" -> registering(mv, "element", -1, params, opcode, owner, name, desc, itf);
            case "chelper" -> collectionsHelper(mv, params, owner, name, desc);
            case "foreach" -> {
                mv.visitVarInsn(Opcodes.ALOAD, 0);
                mv.visitVarInsn(Opcodes.ALOAD, 0);
                mv.visitVarInsn(Opcodes.ALOAD, 1);
                calls(mv, "consumer", "(" + OBJ + "Ljava/util/function/Consumer;)Ljava/util/function/Consumer;");
                mv.visitMethodInsn(opcode, owner, name, desc, itf);
            }
            case "array" -> arraysHelper(mv, params, locals, owner, name, desc);
            case "field" -> reflective(mv, params, "fieldPre", "(Ljava/lang/reflect/Field;Ljava/lang/Object;Ljava/lang/Object;)V",
                    "fieldPost", "(Ljava/lang/reflect/Field;Ljava/lang/Object;)V", opcode, owner, name, desc);
            case "mhsetter" -> setterHandle(mv, params, owner, name, desc);
            case "rarray" -> reflective(mv, params, "arrayPre", "(Ljava/lang/Object;ILjava/lang/Object;)V",
                    "arrayPost", "(Ljava/lang/Object;I)V", opcode, owner, name, desc);
            default -> throw new IllegalArgumentException("bridge kind " + kind);
        }
        mv.visitInsn(Type.getReturnType(desc).getOpcode(Opcodes.IRETURN));
        mv.visitMaxs(0, 0);
        mv.visitEnd();
    }

    private static void loadAll(MethodVisitor mv, Type[] params) {
        int slot = 0;
        for (Type t : params) {
            mv.visitVarInsn(t.getOpcode(Opcodes.ILOAD), slot);
            slot += t.getSize();
        }
    }

    /** The local slot of parameter {@code k}. */
    private static int slotOf(Type[] params, int k) {
        int slot = 0;
        for (int i = 0; i < k; i++) {
            slot += params[i].getSize();
        }
        return slot;
    }

    private static void calls(MethodVisitor mv, String name, String desc) {
        mv.visitMethodInsn(Opcodes.INVOKESTATIC, Transformer.CALLS, name, desc, false);
    }

    private static void barriers(MethodVisitor mv, String name, String desc) {
        mv.visitMethodInsn(Opcodes.INVOKESTATIC, Transformer.BARRIERS, name, desc, false);
    }

    // The view kinds of io.engram.runtime.Views (what the call's result is to its parent).
    static final int NONE = 0, KEYS = 1, ENTRIES = 2, SAME = 3, MAP_VIEW = 4;

    /** What a view-returning call gives: a key set, an entry set, a sub-map, its parent's kind, or nothing known. */
    static int viewKind(String name) {
        return switch (name) {
            case "keySet", "navigableKeySet", "descendingKeySet", "sequencedKeySet" -> KEYS;
            case "entrySet", "sequencedEntrySet" -> ENTRIES;
            case "headMap", "tailMap", "subMap", "descendingMap" -> MAP_VIEW;
            case "values", "sequencedValues", "subList" -> NONE;
            default -> SAME; // iterators, sub-sets, reversed()
        };
    }

    /** r = call(args); hook(arg0, r[, viewKind]); return r (viewKind < 0: none passed). */
    private static void registering(MethodVisitor mv, String hook, int viewKind, Type[] params, int opcode,
            String owner, String name, String desc, boolean itf) {
        loadAll(mv, params);
        mv.visitMethodInsn(opcode, owner, name, desc, itf);
        mv.visitInsn(Opcodes.DUP);
        mv.visitVarInsn(Opcodes.ALOAD, 0);
        mv.visitInsn(Opcodes.SWAP);
        if (viewKind >= 0) {
            mv.visitLdcInsn(viewKind);
            calls(mv, hook, "(" + OBJ + OBJ + "I)V");
        } else {
            calls(mv, hook, "(" + OBJ + OBJ + ")V");
        }
    }

    /** r = lookup.findSetter(..) / unreflectSetter(f); return CallBarriers.m(r, the call's arguments). */
    private static void setterHandle(MethodVisitor mv, Type[] params, String owner, String name, String desc) {
        loadAll(mv, params);
        mv.visitMethodInsn(Opcodes.INVOKEVIRTUAL, owner, name, desc, false);
        StringBuilder hd = new StringBuilder("(Ljava/lang/invoke/MethodHandle;");
        int slot = params[0].getSize();
        for (int i = 1; i < params.length; i++) {
            mv.visitVarInsn(params[i].getOpcode(Opcodes.ILOAD), slot);
            slot += params[i].getSize();
            hd.append(params[i].getDescriptor());
        }
        calls(mv, name, hd.append(")Ljava/lang/invoke/MethodHandle;").toString());
    }

    /** Collections.m(l, ..): the list is a collection being mutated, as by its own mutators. */
    private static void collectionsHelper(MethodVisitor mv, Type[] params, String owner, String name, String desc) {
        mv.visitVarInsn(Opcodes.ALOAD, 0);
        barriers(mv, "before", "(" + OBJ + ")V");
        int inserted = switch (name) {
            case "fill", "copy", "addAll" -> 1;
            case "replaceAll" -> 2; // replaceAll(list, old, new)
            default -> -1;
        };
        if (inserted > 0 && inserted < params.length && params[inserted].getSort() != Type.INT) {
            boolean all = params[inserted].getSort() == Type.ARRAY || !params[inserted].getDescriptor().equals(OBJ);
            mv.visitVarInsn(Opcodes.ALOAD, 0);
            mv.visitVarInsn(Opcodes.ALOAD, slotOf(params, inserted));
            barriers(mv, all ? "insertAll" : "insert", "(" + OBJ + OBJ + ")V");
        }
        loadAll(mv, params);
        mv.visitMethodInsn(Opcodes.INVOKESTATIC, owner, name, desc, false);
        mv.visitVarInsn(Opcodes.ALOAD, 0);
        barriers(mv, "after", "(" + OBJ + ")V");
    }

    /** Arrays.m(a, ..): the whole array is re-imaged after the call. */
    private static void arraysHelper(MethodVisitor mv, Type[] params, int saved, String owner, String name,
            String desc) {
        Type last = params[params.length - 1];
        if (name.equals("fill") && last.getDescriptor().equals(OBJ)) {
            mv.visitVarInsn(Opcodes.ALOAD, 0);
            mv.visitVarInsn(Opcodes.ALOAD, slotOf(params, params.length - 1));
            calls(mv, "insertArray", "(" + OBJ + OBJ + ")V");
        }
        mv.visitVarInsn(Opcodes.ALOAD, 0);
        calls(mv, "beforeArray", "(" + OBJ + ")" + OBJ);
        mv.visitVarInsn(Opcodes.ASTORE, saved);
        loadAll(mv, params);
        mv.visitMethodInsn(Opcodes.INVOKESTATIC, owner, name, desc, false);
        mv.visitVarInsn(Opcodes.ALOAD, 0);
        mv.visitVarInsn(Opcodes.ALOAD, saved);
        calls(mv, "afterArray", "(" + OBJ + OBJ + ")V");
    }

    /**
     * pre(target, key, value or null); call; post(target, key) — for
     * {@code Field.setX(o, v)} (target the field, key the object) and
     * {@code Array.setX(a, i, v)} (target the array, key the index).
     */
    private static void reflective(MethodVisitor mv, Type[] params, String pre, String preDesc, String post,
            String postDesc, int opcode, String owner, String name, String desc) {
        Type value = params[params.length - 1];
        mv.visitVarInsn(params[0].getOpcode(Opcodes.ILOAD), 0);
        mv.visitVarInsn(params[1].getOpcode(Opcodes.ILOAD), slotOf(params, 1));
        if (value.getDescriptor().equals(OBJ)) {
            mv.visitVarInsn(Opcodes.ALOAD, slotOf(params, 2));
        } else {
            mv.visitInsn(Opcodes.ACONST_NULL);
        }
        calls(mv, pre, preDesc);
        loadAll(mv, params);
        mv.visitMethodInsn(opcode, owner, name, desc, false);
        mv.visitVarInsn(params[0].getOpcode(Opcodes.ILOAD), 0);
        mv.visitVarInsn(params[1].getOpcode(Opcodes.ILOAD), slotOf(params, 1));
        calls(mv, post, postDesc);
    }
}
