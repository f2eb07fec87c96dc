package io.engram.agent;

import io.engram.runtime.Registry;

import org.objectweb.asm.ClassReader;
import org.objectweb.asm.ClassVisitor;
import org.objectweb.asm.ClassWriter;
import org.objectweb.asm.FieldVisitor;
import org.objectweb.asm.Handle;
import org.objectweb.asm.MethodVisitor;
import org.objectweb.asm.Opcodes;
import org.objectweb.asm.Type;

import java.lang.instrument.ClassFileTransformer;
import java.security.ProtectionDomain;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Instruments an application class (ASM, no frames recomputed: no
 * branches are added, only straight-line stack shuffles, static calls and
 * invokedynamics).
 *
 * <ul>
 * <li>putfield -> {@code Barriers.preX(o, v, id)}; putfield; {@code post(o, id)}
 *     (skipped in a constructor before its super()/this() call, where the
 *     object is uninitialised and cannot be passed to a method)</li>
 * <li>putstatic of a reference -> {@code staticPre(v, id)}; putstatic; {@code staticPost(id)}</li>
 * <li>xastore -> {@code Barriers.xastore(a, i, v)}</li>
 * <li>the putstatic hooks are invokedynamics linked by {@code StoreGuards.root}:
 *     nothing unless the field is a durable root</li>
 * <li>the putfield and xastore hooks are invokedynamics of the same name and
 *     type, linked by {@code StoreGuards.bootstrap}: while no object of the
 *     field's owner class (of the array kind) is recoverable they do nothing
 *     (the bare store), which the JIT folds away; otherwise they are the
 *     Barriers methods above (class files before version 51 call those directly)</li>
 * <li>System.arraycopy -> {@code Barriers.arraycopy}</li>
 * <li>a mutating call on a JDK collection or map -> a private static bridge
 *     in the class: before(c); insert(c, arg)...; c.m(args); after(c), or
 *     afterKey(c, key) for a call whose first argument is the key it changes;
 *     the same for the mutators of iterators and map entries</li>
 * <li>calls that obtain a view or iterator, the JDK's in-place helpers
 *     (Arrays, Collections) and reflective stores -> bridges calling
 *     {@code CallBarriers} ({@link CallBridges})</li>
 * <li>nothing is rewritten for VarHandles, field updaters and Unsafe, but
 *     the class whose fields they write is noted in
 *     {@link Registry#HANDLE_WRITTEN} (the runtime refuses to persist it)</li>
 * </ul>
 *
 * Never throws into class loading: a class that fails to instrument is
 * loaded unchanged (and is then refused by the runtime if it is ever
 * reached from a root, since it is not in {@link Registry#INSTRUMENTED}).
 */
final class Transformer implements ClassFileTransformer {
    static final String BARRIERS = "io/engram/runtime/Barriers";
    static final String ROOT_DESC = "Lio/engram/DurableRoot;";
    /** The bootstrap of the guarded store hooks (class files of version 51 and later). */
    static final Handle GUARD_BOOTSTRAP = new Handle(Opcodes.H_INVOKESTATIC, "io/engram/runtime/StoreGuards",
            "bootstrap", "(Ljava/lang/invoke/MethodHandles$Lookup;Ljava/lang/String;Ljava/lang/invoke/MethodType;"
                    + "Ljava/lang/String;)Ljava/lang/invoke/CallSite;", false);
    /** The bootstrap of the putstatic hooks: the hook for a durable root, nothing for any other field. */
    static final Handle ROOT_BOOTSTRAP = new Handle(Opcodes.H_INVOKESTATIC, "io/engram/runtime/StoreGuards",
            "root", "(Ljava/lang/invoke/MethodHandles$Lookup;Ljava/lang/String;Ljava/lang/invoke/MethodType;I)"
                    + "Ljava/lang/invoke/CallSite;", false);

    /** Agent options: {@code exclude=a.b.,c.d.} adds package prefixes never instrumented. */
    record Options(List<String> excludes, boolean verbose) {
        static Options parse(String args) {
            List<String> ex = new ArrayList<>(List.of("java/", "javax/", "jdk/", "sun/", "com/sun/",
                    "org/objectweb/asm/", "org/junit/", "junit/", "org/apache/maven/", "org/opentest4j/",
                    "org/apiguardian/", "io/engram/agent/", "io/engram/runtime/", "io/engram/heap/"));
            boolean verbose = false;
            if (args != null) {
                for (String a : args.split(";")) {
                    if (a.startsWith("exclude=")) {
                        for (String p : a.substring(8).split(",")) {
                            ex.add(p.replace('.', '/'));
                        }
                    } else if (a.equals("verbose")) {
                        verbose = true;
                    }
                }
            }
            return new Options(ex, verbose);
        }
    }

    private final Options options;

    Transformer(Options options) {
        this.options = options;
    }

    boolean excluded(String name) {
        if (name.startsWith("io/engram/") && name.indexOf('/', "io/engram/".length()) < 0) {
            return true; // the public API classes
        }
        for (String p : options.excludes) {
            if (name.startsWith(p)) {
                return true;
            }
        }
        return false;
    }

    @Override
    public byte[] transform(ClassLoader loader, String name, Class<?> redefined, ProtectionDomain pd, byte[] bytes) {
        if (name == null || loader == null || redefined != null || excluded(name)
                || loader == ClassLoader.getPlatformClassLoader()) {
            return null;
        }
        try {
            byte[] out = instrument(loader, name, bytes);
            Registry.INSTRUMENTED.add(name.replace('/', '.'));
            return out;
        } catch (Throwable t) {
            System.err.println("engram agent: " + name + " left uninstrumented: " + t);
            return null;
        }
    }

    static byte[] instrument(ClassLoader loader, String name, byte[] bytes) {
        ClassReader reader = new ClassReader(bytes);
        ClassWriter writer = new ClassWriter(reader, ClassWriter.COMPUTE_MAXS);
        reader.accept(new ClassInstrumenter(writer, loader), 0);
        return writer.toByteArray();
    }

    /** Collection types whose mutating calls get a bridge. */
    static final Set<String> COLLECTION_OWNERS = Set.of("java/util/Collection", "java/util/List", "java/util/Set",
            "java/util/Queue", "java/util/Deque", "java/util/Map", "java/util/SortedMap", "java/util/NavigableMap",
            "java/util/SortedSet", "java/util/NavigableSet", "java/util/SequencedCollection", "java/util/SequencedMap",
            "java/util/SequencedSet", "java/util/ArrayList", "java/util/LinkedList", "java/util/ArrayDeque",
            "java/util/HashMap", "java/util/LinkedHashMap", "java/util/TreeMap", "java/util/HashSet",
            "java/util/LinkedHashSet", "java/util/TreeSet", "java/util/AbstractMap", "java/util/AbstractList",
            "java/util/AbstractCollection", "java/util/AbstractSet", "java/util/concurrent/ConcurrentHashMap",
            "java/util/concurrent/ConcurrentMap", "java/util/concurrent/ConcurrentHashMap$KeySetView",
            "java/util/Iterator", "java/util/ListIterator", "java/util/Map$Entry", "java/lang/Iterable");
    static final Set<String> MUTATORS = Set.of("add", "addAll", "addFirst", "addLast", "offer", "offerFirst",
            "offerLast", "push", "pop", "poll", "pollFirst", "pollLast", "remove", "removeAll", "removeIf",
            "removeFirst", "removeLast", "removeFirstOccurrence", "removeLastOccurrence", "retainAll", "clear", "set",
            "sort", "replaceAll", "put", "putAll", "putIfAbsent", "putFirst", "putLast", "replace", "compute",
            "computeIfAbsent", "computeIfPresent", "merge", "pollFirstEntry", "pollLastEntry", "setValue");
    static final Set<String> INSERTS = Set.of("add", "addFirst", "addLast", "offer", "offerFirst", "offerLast",
            "push", "set", "put", "putIfAbsent", "putFirst", "putLast", "replace", "merge", "compute",
            "computeIfAbsent", "setValue");

    /**
     * Calls on a collection (or view, iterator) that return a view writing
     * through to it: their bridge registers the result ({@code CallBarriers.view}).
     */
    static final Set<String> VIEWS = Set.of("iterator", "listIterator", "descendingIterator", "entrySet", "keySet",
            "values", "navigableKeySet", "descendingKeySet", "descendingMap", "headMap", "tailMap", "subMap",
            "headSet", "tailSet", "subSet", "descendingSet", "subList", "reversed", "sequencedKeySet",
            "sequencedValues", "sequencedEntrySet");
    /** Iterator calls returning an element: a map entry is registered ({@code CallBarriers.element}). */
    static final Set<String> ELEMENTS = Set.of("next", "previous");
    /** {@code java.util.Collections} helpers that change their first argument in place. */
    static final Set<String> COLLECTIONS_HELPERS = Set.of("sort", "reverse", "shuffle", "swap", "fill", "rotate",
            "replaceAll", "copy", "addAll");
    /** {@code java.util.Arrays} helpers that change their first argument (an array) in place. */
    static final Set<String> ARRAYS_HELPERS = Set.of("fill", "sort", "setAll", "parallelSort", "parallelPrefix",
            "parallelSetAll");
    static final String CALLS = "io/engram/runtime/CallBarriers";

    /** Calls whose first argument is the one key they change: their bridge ends with afterKey(c, key). */
    static final Set<String> KEYED = Set.of("add", "remove", "put", "putIfAbsent", "replace", "compute",
            "computeIfAbsent", "computeIfPresent", "merge");

    static final Set<String> UNSAFES = Set.of("sun/misc/Unsafe", "jdk/internal/misc/Unsafe");
    static final java.util.regex.Pattern UNSAFE_STORE = java.util.regex.Pattern.compile(
            "put|compareAndSwap|compareAndSet|compareAndExchange|getAndSet|getAndAdd|getAndBitwise|weakCompareAndSet");

    private static final class ClassInstrumenter extends ClassVisitor {
        private final ClassLoader loader;
        private String owner;
        private boolean isInterface;
        private int version;
        private final Map<String, String> bridges = new HashMap<>();
        private final List<String[]> bridgeSpecs = new ArrayList<>();

        ClassInstrumenter(ClassVisitor next, ClassLoader loader) {
            super(Opcodes.ASM9, next);
            this.loader = loader;
        }

        @Override
        public void visit(int version, int access, String name, String sig, String sup, String[] itfs) {
            this.owner = name;
            this.version = version & 0xffff;
            this.isInterface = (access & Opcodes.ACC_INTERFACE) != 0;
            super.visit(version, access, name, sig, sup, itfs);
        }

        @Override
        public FieldVisitor visitField(int access, String name, String desc, String sig, Object value) {
            FieldVisitor fv = super.visitField(access, name, desc, sig, value);
            return new FieldVisitor(Opcodes.ASM9, fv) {
                @Override
                public org.objectweb.asm.AnnotationVisitor visitAnnotation(String d, boolean visible) {
                    if (d.equals(ROOT_DESC)) {
                        Registry.ROOT_CLASSES.add(owner.replace('/', '.'));
                    }
                    return super.visitAnnotation(d, visible);
                }
            };
        }

        @Override
        public MethodVisitor visitMethod(int access, String name, String desc, String sig, String[] exc) {
            MethodVisitor mv = super.visitMethod(access, name, desc, sig, exc);
            if (mv == null || (access & (Opcodes.ACC_ABSTRACT | Opcodes.ACC_NATIVE)) != 0) {
                return mv;
            }
            return new StoreInstrumenter(mv, this, name.equals("<init>"));
        }

        /** The name of the bridge for a call (created on first use); {@code kind} as {@link CallBridges#kind}. */
        String bridge(String kind, int opcode, String callOwner, String name, String desc, boolean itf) {
            String key = opcode + " " + callOwner + "." + name + desc;
            return bridges.computeIfAbsent(key, k -> {
                String b = "$engram$" + bridges.size();
                bridgeSpecs.add(new String[] {b, Integer.toString(opcode), callOwner, name, desc, itf ? "1" : "0",
                    kind});
                return b;
            });
        }

        boolean canBridge() {
            return !isInterface || version >= Opcodes.V1_8;
        }

        @Override
        public void visitEnd() {
            for (String[] b : bridgeSpecs) {
                int opcode = Integer.parseInt(b[1]);
                boolean itf = b[5].equals("1");
                switch (b[6]) {
                    case "coll" -> emitBridge(b[0], opcode, b[2], b[3], b[4], itf);
                    default -> CallBridges.emit(cv, b[6], b[0], opcode, b[2], b[3], b[4], itf);
                }
            }
            super.visitEnd();
        }

        /**
         * private static R bridge(Owner c, args...) { before(c); insert(c, a)...; r = c.m(args); after(c); return r; }
         * (keyed calls: beforeKey(c, key) ... afterKey(c, key))
         */
        private void emitBridge(String bname, int opcode, String callOwner, String name, String desc, boolean itf) {
            Type[] args = Type.getArgumentTypes(desc);
            Type ret = Type.getReturnType(desc);
            String bdesc = "(L" + callOwner + ";" + desc.substring(1);
            MethodVisitor mv = cv.visitMethod(Opcodes.ACC_PRIVATE | Opcodes.ACC_STATIC | Opcodes.ACC_SYNTHETIC, bname,
                    bdesc, null, null);
            mv.visitCode();
            boolean keyed = KEYED.contains(name) && args.length > 0 && args[0].getDescriptor().equals("Ljava/lang/Object;");
            mv.visitVarInsn(Opcodes.ALOAD, 0);
            if (keyed) {
                mv.visitVarInsn(Opcodes.ALOAD, 1);
                mv.visitMethodInsn(Opcodes.INVOKESTATIC, BARRIERS, "beforeKey",
                        "(Ljava/lang/Object;Ljava/lang/Object;)V", false);
            } else {
                mv.visitMethodInsn(Opcodes.INVOKESTATIC, BARRIERS, "before", "(Ljava/lang/Object;)V", false);
            }
            int slot = 1;
            for (Type a : args) {
                String ad = a.getDescriptor();
                boolean all = (name.equals("addAll") || name.equals("putAll"))
                        && (ad.equals("Ljava/util/Collection;") || ad.equals("Ljava/util/Map;"));
                if (all || (INSERTS.contains(name) && ad.equals("Ljava/lang/Object;"))) {
                    mv.visitVarInsn(Opcodes.ALOAD, 0);
                    mv.visitVarInsn(Opcodes.ALOAD, slot);
                    mv.visitMethodInsn(Opcodes.INVOKESTATIC, BARRIERS, all ? "insertAll" : "insert",
                            "(Ljava/lang/Object;Ljava/lang/Object;)V", false);
                }
                slot += a.getSize();
            }
            mv.visitVarInsn(Opcodes.ALOAD, 0);
            slot = 1;
            for (Type a : args) {
                mv.visitVarInsn(a.getOpcode(Opcodes.ILOAD), slot);
                slot += a.getSize();
            }
            mv.visitMethodInsn(opcode, callOwner, name, desc, itf);
            mv.visitVarInsn(Opcodes.ALOAD, 0);
            if (keyed) {
                mv.visitVarInsn(Opcodes.ALOAD, 1);
                mv.visitMethodInsn(Opcodes.INVOKESTATIC, BARRIERS, "afterKey",
                        "(Ljava/lang/Object;Ljava/lang/Object;)V", false);
            } else {
                mv.visitMethodInsn(Opcodes.INVOKESTATIC, BARRIERS, "after", "(Ljava/lang/Object;)V", false);
            }
            mv.visitInsn(ret.getOpcode(Opcodes.IRETURN));
            mv.visitMaxs(0, 0);
            mv.visitEnd();
        }
    }

    private static final class StoreInstrumenter extends MethodVisitor {
        private final ClassInstrumenter cls;
        private boolean initialized;
        private int pendingNews;
        /** The last class constant (ldc) in this method, for {@link #noteHandleWrite}. */
        private String lastClassConstant;

        StoreInstrumenter(MethodVisitor mv, ClassInstrumenter cls, boolean ctor) {
            super(Opcodes.ASM9, mv);
            this.cls = cls;
            this.initialized = !ctor;
        }

        private void push(int v) {
            super.visitLdcInsn(v);
        }

        private void call(String name, String desc) {
            super.visitMethodInsn(Opcodes.INVOKESTATIC, BARRIERS, name, desc, false);
        }

        /**
         * A store hook guarded by its key class ({@code StoreGuards}): an
         * invokedynamic of the same name and type, or the plain static call
         * in class files older than invokedynamic.
         */
        private void guarded(String name, String desc, String keyInternalName) {
            if (cls.version >= Opcodes.V1_7) {
                super.visitInvokeDynamicInsn(name, desc, GUARD_BOOTSTRAP, keyInternalName.replace('/', '.'));
            } else {
                call(name, desc);
            }
        }

        /** A putstatic hook: linked to nothing unless the field is a durable root (older class files: the call). */
        private void rootHook(String name, String desc, int id) {
            if (cls.version >= Opcodes.V1_7) {
                super.visitInvokeDynamicInsn(name, desc, ROOT_BOOTSTRAP, id);
            } else {
                call(name, desc);
            }
        }

        @Override
        public void visitTypeInsn(int opcode, String type) {
            if (opcode == Opcodes.NEW && !initialized) {
                pendingNews++;
            }
            super.visitTypeInsn(opcode, type);
        }

        @Override
        public void visitFieldInsn(int opcode, String owner, String name, String desc) {
            if (opcode == Opcodes.PUTFIELD && initialized) {
                putfield(owner, name, desc);
            } else if (opcode == Opcodes.PUTSTATIC && (desc.startsWith("L") || desc.startsWith("["))) {
                int id = Registry.fieldId(owner, name, desc, true, cls.loader);
                super.visitInsn(Opcodes.DUP);
                push(id);
                rootHook("staticPre", "(Ljava/lang/Object;I)V", id);
                super.visitFieldInsn(opcode, owner, name, desc);
                push(id);
                rootHook("staticPost", "(I)V", id);
            } else {
                super.visitFieldInsn(opcode, owner, name, desc);
            }
        }

        private void putfield(String owner, String name, String desc) {
            int id = Registry.fieldId(owner, name, desc, false, cls.loader);
            char k = desc.charAt(0);
            if (k == 'J' || k == 'D') {
                // [o, w] -> [o, o, w, o] -> preJ(w, o, id) -> [o, o, w]
                super.visitInsn(Opcodes.DUP2_X1);
                super.visitInsn(Opcodes.POP2);
                super.visitInsn(Opcodes.DUP);
                super.visitInsn(Opcodes.DUP2_X2);
                super.visitInsn(Opcodes.POP);
                push(id);
                guarded(k == 'J' ? "preJ" : "preD", k == 'J' ? "(JLjava/lang/Object;I)J" : "(DLjava/lang/Object;I)D",
                        owner);
            } else {
                // [o, v] -> [o, v, o, v] -> pre -> [o, v] -> [o, o, v]
                super.visitInsn(Opcodes.DUP2);
                push(id);
                String pre = switch (k) {
                    case 'L', '[' -> "preA";
                    case 'F' -> "preF";
                    default -> "preI";
                };
                String vd = switch (k) {
                    case 'L', '[' -> "Ljava/lang/Object;";
                    case 'F' -> "F";
                    default -> "I";
                };
                guarded(pre, "(Ljava/lang/Object;" + vd + "I)V", owner);
                super.visitInsn(Opcodes.SWAP);
                super.visitInsn(Opcodes.DUP_X1);
                super.visitInsn(Opcodes.SWAP);
            }
            super.visitFieldInsn(Opcodes.PUTFIELD, owner, name, desc);
            push(id);
            guarded("post", "(Ljava/lang/Object;I)V", owner);
        }

        @Override
        public void visitInsn(int opcode) {
            String hook = switch (opcode) {
                case Opcodes.AASTORE -> "aastore([Ljava/lang/Object;ILjava/lang/Object;)V";
                case Opcodes.IASTORE -> "iastore([III)V";
                case Opcodes.LASTORE -> "lastore([JIJ)V";
                case Opcodes.FASTORE -> "fastore([FIF)V";
                case Opcodes.DASTORE -> "dastore([DID)V";
                case Opcodes.CASTORE -> "castore([CII)V";
                case Opcodes.SASTORE -> "sastore([SII)V";
                case Opcodes.BASTORE -> "bastore(Ljava/lang/Object;II)V";
                default -> null;
            };
            if (hook == null) {
                super.visitInsn(opcode);
                return;
            }
            int p = hook.indexOf('(');
            String desc = hook.substring(p);
            // keyed by the array kind: byte[] for bastore (byte[] and boolean[]), Object[] for every reference array
            String kind = opcode == Opcodes.BASTORE ? "[B" : Type.getArgumentTypes(desc)[0].getDescriptor();
            guarded(hook.substring(0, p), desc, kind);
        }

        @Override
        public void visitLdcInsn(Object cst) {
            if (cst instanceof Type t && t.getSort() == Type.OBJECT) {
                lastClassConstant = t.getInternalName();
            }
            super.visitLdcInsn(cst);
        }

        /**
         * Notes a class whose fields this call lets code write unseen: the
         * target of a VarHandle, field updater or Unsafe field offset (the
         * last class constant loaded in the method, else this class), or
         * this class for an Unsafe store.
         */
        private void noteHandleWrite(String owner, String name) {
            String target = lastClassConstant != null ? lastClassConstant : cls.owner;
            String how = null;
            if (owner.equals("java/lang/invoke/MethodHandles$Lookup") && name.equals("findVarHandle")) {
                how = "a VarHandle";
            } else if (owner.startsWith("java/util/concurrent/atomic/Atomic") && owner.endsWith("FieldUpdater")
                    && name.equals("newUpdater")) {
                how = "an " + owner.substring(owner.lastIndexOf('/') + 1);
            } else if (UNSAFES.contains(owner) && name.equals("objectFieldOffset")) {
                how = "Unsafe";
            } else if (UNSAFES.contains(owner) && UNSAFE_STORE.matcher(name).lookingAt()) {
                how = "Unsafe";
                target = cls.owner;
            }
            if (how != null) {
                Registry.HANDLE_WRITTEN.putIfAbsent(target.replace('/', '.'), how + " (in " + cls.owner.replace('/', '.')
                        + ")");
            }
        }

        @Override
        public void visitMethodInsn(int opcode, String owner, String name, String desc, boolean itf) {
            noteHandleWrite(owner, name);
            if (opcode == Opcodes.INVOKESPECIAL && name.equals("<init>") && !initialized) {
                if (pendingNews > 0) {
                    pendingNews--;
                } else {
                    initialized = true; // super(...) or this(...): the object is initialised
                }
            }
            if (opcode == Opcodes.INVOKESTATIC && owner.equals("java/lang/System") && name.equals("arraycopy")) {
                call("arraycopy", desc);
                return;
            }
            String kind = cls.canBridge() ? CallBridges.kind(opcode, owner, name, desc) : null;
            if (kind != null) {
                String b = cls.bridge(kind, opcode, owner, name, desc, itf);
                String bdesc = opcode == Opcodes.INVOKESTATIC ? desc : "(L" + owner + ";" + desc.substring(1);
                super.visitMethodInsn(Opcodes.INVOKESTATIC, cls.owner, b, bdesc, cls.isInterface);
                return;
            }
            super.visitMethodInsn(opcode, owner, name, desc, itf);
        }
    }
}
