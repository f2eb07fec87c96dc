package io.engram.tests;

import io.engram.Engram;
import io.engram.EngramException;
import io.engram.EngramException.Code;
import io.engram.PoolFullException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.objectweb.asm.ClassWriter;
import org.objectweb.asm.MethodVisitor;
import org.objectweb.asm.Opcodes;

import java.io.RandomAccessFile;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.*;

/** Bad files, a changed class, a full pool: typed exceptions, and nothing already persistent is lost. */
class BadPoolTest {
    private Engram pool;

    @AfterEach
    void close() {
        if (pool != null && Engram.isOpen()) {
            pool.close();
        }
        Thread.currentThread().setContextClassLoader(BadPoolTest.class.getClassLoader());
    }

    @Test
    void foreignFileIsATypedError() throws Exception {
        Path p = Pools.fresh("bad-foreign");
        byte[] junk = new byte[1 << 16];
        new Random(1).nextBytes(junk);
        Files.write(p, junk);
        EngramException e = assertThrows(EngramException.class, () -> Pools.open(p));
        assertTrue(EnumSet.of(Code.NOT_A_POOL, Code.TRUNCATED, Code.BAD_CHECKSUM, Code.CORRUPT).contains(e.code()),
                e.toString());
        assertFalse(Engram.isOpen());
        assertArrayEquals(junk, Files.readAllBytes(p), "a foreign file is never written");
    }

    @Test
    void truncatedPoolIsATypedError() throws Exception {
        Path p = Pools.fresh("bad-truncated");
        pool = Pools.open(p);
        Roots.head = new Node(1, "x");
        pool.close();
        try (RandomAccessFile f = new RandomAccessFile(p.toFile(), "rw")) {
            f.setLength(4096);
        }
        EngramException e = assertThrows(EngramException.class, () -> Pools.open(p));
        assertTrue(EnumSet.of(Code.TRUNCATED, Code.CORRUPT, Code.NOT_A_POOL, Code.BAD_CHECKSUM).contains(e.code()),
                e.toString());
    }

    @Test
    void changedClassLayoutIsRefusedAndTheDataKept() throws Exception {
        Path p = Pools.fresh("bad-layout");
        ClassLoader v1 = new GenLoader(false);
        ClassLoader v2 = new GenLoader(true);
        Object shape = v1.loadClass("gen.Shape").getConstructor().newInstance();
        shape.getClass().getField("a").setInt(shape, 41);
        pool = Pools.open(p);
        Roots.any = shape;
        assertTrue(Engram.isRecoverable(shape));
        pool.close();
        Roots.reset();
        Thread.currentThread().setContextClassLoader(v2);
        EngramException e = assertThrows(EngramException.class, () -> Pools.open(p));
        assertEquals(Code.LAYOUT_MISMATCH, e.code());
        assertTrue(e.getMessage().contains("gen.Shape"), e.getMessage());
        assertFalse(Engram.isOpen());
        // the program that wrote it still finds everything
        Thread.currentThread().setContextClassLoader(v1);
        pool = Pools.open(p);
        assertEquals(41, Roots.any.getClass().getField("a").getInt(Roots.any));
    }

    @Test
    void fullPoolThrowsAndLosesNothing() throws Exception {
        Path p = Pools.fresh("bad-full");
        pool = Engram.open(p, Pools.OPTIONS.withSize(24L << 20));
        List<Object> list = new ArrayList<>();
        Roots.list = list;
        int added = 0;
        PoolFullException full = null;
        for (int i = 0; i < 200 && full == null; i++) {
            byte[] chunk = new byte[256 << 10];
            chunk[0] = (byte) i;
            chunk[chunk.length - 1] = (byte) ~i;
            try {
                list.add(chunk);
                added++;
            } catch (PoolFullException e) {
                full = e;
            }
        }
        assertNotNull(full, "a 24 MiB pool must fill up");
        assertEquals(Code.POOL_FULL, full.code());
        assertEquals(added, list.size(), "the failing add did not happen");
        Node big = new Node(1, "big");
        Roots.head = new Node(0, "small");
        big.other = new Node(2, "x");
        big.scratch = null;
        Object[] huge = new Object[1];
        huge[0] = new long[8 << 20];
        assertThrows(PoolFullException.class, () -> Roots.any = huge);
        assertNull(Roots.any, "the root was not assigned");
        pool.close();
        Roots.reset();
        pool = Engram.open(p, Pools.OPTIONS.withSize(24L << 20));
        assertEquals(added, Roots.list.size());
        for (int i = 0; i < added; i++) {
            byte[] c = (byte[]) Roots.list.get(i);
            assertEquals((byte) i, c[0]);
            assertEquals((byte) ~i, c[c.length - 1]);
        }
        assertEquals("small", Roots.head.label);
    }

    @Test
    void openingWithoutTheAgentIsAClearError() throws Exception {
        Process p = Pools.start(false, "noagent", Pools.fresh("bad-noagent").toString());
        assertTrue(p.waitFor(120, java.util.concurrent.TimeUnit.SECONDS));
        assertEquals(4, p.exitValue(), "NO_POOL naming -javaagent");
    }

    /** Defines gen.Shape with field a (and b in the changed version). */
    static final class GenLoader extends ClassLoader {
        private final boolean changed;

        GenLoader(boolean changed) {
            super(BadPoolTest.class.getClassLoader());
            this.changed = changed;
        }

        @Override
        protected Class<?> findClass(String name) throws ClassNotFoundException {
            if (!name.equals("gen.Shape")) {
                throw new ClassNotFoundException(name);
            }
            ClassWriter cw = new ClassWriter(ClassWriter.COMPUTE_FRAMES | ClassWriter.COMPUTE_MAXS);
            cw.visit(Opcodes.V17, Opcodes.ACC_PUBLIC, "gen/Shape", null, "java/lang/Object", null);
            cw.visitField(Opcodes.ACC_PUBLIC, "a", "I", null, null).visitEnd();
            if (changed) {
                cw.visitField(Opcodes.ACC_PUBLIC, "b", "I", null, null).visitEnd();
            }
            MethodVisitor mv = cw.visitMethod(Opcodes.ACC_PUBLIC, "<init>", "()V", null, null);
            mv.visitCode();
            mv.visitVarInsn(Opcodes.ALOAD, 0);
            mv.visitMethodInsn(Opcodes.INVOKESPECIAL, "java/lang/Object", "<init>", "()V", false);
            mv.visitInsn(Opcodes.RETURN);
            mv.visitMaxs(0, 0);
            mv.visitEnd();
            cw.visitEnd();
            byte[] b = cw.toByteArray();
            return defineClass(name, b, 0, b.length);
        }
    }
}
