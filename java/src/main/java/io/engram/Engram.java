package io.engram;

import io.engram.EngramException.Code;
import io.engram.agent.Agent;
import io.engram.heap.Durability;
import io.engram.heap.EngineHeap;
import io.engram.heap.Heap;
import io.engram.runtime.Session;

import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.function.Supplier;

/**
 * AutoPersist for stock Java: the programmer marks durable roots
 * ({@link DurableRoot}), and everything reachable from them is kept
 * recoverable and crash-consistent by the runtime.
 *
 * <pre>{@code
 * class Bank {
 *     @DurableRoot static Map<String, Account> accounts = new HashMap<>();
 * }
 * try (Engram pool = Engram.open(Path.of("bank.pool"))) {   // restores Bank.accounts
 *     Engram.atomic(() -> { a.balance -= 10; b.balance += 10; });  // both or neither
 * }
 * }</pre>
 *
 * <p>Needs the agent: {@code java -javaagent:engram-java-<v>-agent.jar
 * --enable-native-access=ALL-UNNAMED ...}. One pool is open per JVM.
 *
 * <p>Semantics: outside {@link #atomic} every store to a recoverable object
 * is durable before the storing thread goes on, in program order; inside,
 * the region's stores are all-or-nothing. A store that makes an object
 * reachable from a recoverable one first makes it, and everything it
 * reaches, recoverable. Regions give failure atomicity, not isolation:
 * threads sharing data still synchronise as in ordinary Java.
 */
public final class Engram implements AutoCloseable {
    /**
     * Pool options: the largest size the pool may reach (POOL_FULL past it)
     * and the durability mode (AUTO: the engine's choice, pmem on a DAX
     * mapping, msync elsewhere).
     */
    public record Options(long size, Durability durability, long tracer) {
        /** 1 GiB maximum, durability chosen by the engine. */
        public static Options defaults() {
            return new Options(1L << 30, Durability.AUTO, 0);
        }

        public Options withSize(long size) {
            return new Options(size, durability, tracer);
        }

        public Options withDurability(Durability d) {
            return new Options(size, d, tracer);
        }

        /** TRACE durability recording into {@code tracer} (see {@link io.engram.heap.Explorer}). */
        public Options withTracer(long tracer) {
            return new Options(size, Durability.TRACE, tracer);
        }
    }

    private final Session session;
    private final Path path;

    private Engram(Session session, Path path) {
        this.session = session;
        this.path = path;
    }

    /** Opens (or creates) the pool at {@code path} with the default options. */
    public static Engram open(Path path) {
        return open(path, Options.defaults());
    }

    /**
     * Opens (or creates) the pool at {@code path}: rolls back an interrupted
     * region, rebuilds the durable graph and assigns it to the
     * {@code @DurableRoot} fields. Errors: the agent is not running
     * (NO_POOL), another pool is open (BUSY), a bad file (NOT_A_POOL,
     * TRUNCATED, BAD_CHECKSUM, UNSUPPORTED_VERSION), a class changed since
     * the pool was written (LAYOUT_MISMATCH), the file is open elsewhere
     * (ALREADY_OPEN).
     */
    public static Engram open(Path path, Options options) {
        requireAgent();
        long t0 = Session.cpuNanos();
        Heap h = heap(path, options, true);
        if (Boolean.getBoolean("engram.timing")) {
            System.err.printf("engram open (thread CPU): engine open and library %.1f ms%n", (Session.cpuNanos() - t0) / 1e6);
        }
        return new Engram(Session.open(h, loader()), path);
    }

    /**
     * The paper's {@code recover(imageName)}: opens the existing pool named
     * {@code imageName} (a path) and restores its durable roots. Unlike
     * {@link #open}, a missing image is an error (IO).
     */
    public static Engram recover(String imageName) {
        return recover(imageName, Options.defaults());
    }

    public static Engram recover(String imageName, Options options) {
        requireAgent();
        Path p = Path.of(imageName);
        if (!Files.exists(p)) {
            throw new EngramException(Code.IO, "no image named " + imageName);
        }
        return new Engram(Session.open(heap(p, options, false), loader()), p);
    }

    private static Heap heap(Path p, Options o, boolean create) {
        return EngineHeap.open(p, o.size(), o.durability(), create, o.tracer());
    }

    private static void requireAgent() {
        if (Agent.instrumentation() == null) {
            throw new EngramException(Code.NO_POOL, "the Engram agent is not running: start the JVM with "
                    + "-javaagent:engram-java-<version>-agent.jar");
        }
    }

    private static ClassLoader loader() {
        ClassLoader l = Thread.currentThread().getContextClassLoader();
        return l != null ? l : ClassLoader.getSystemClassLoader();
    }

    /** Closes the pool cleanly. Objects stay usable but are no longer persisted. */
    @Override
    public void close() {
        session.close();
    }

    /** Drops the pool as a crash would, without a clean close (for crash tests and the explorer). */
    public void abandon() {
        session.abandon();
    }

    /** The pool's path. */
    public Path path() {
        return path;
    }

    /** What opening found (created / clean / recovered, entries rolled back, live images, roots). */
    public String report() {
        return session.report();
    }

    /** The open pool, or null. */
    public static boolean isOpen() {
        return Session.current() != null;
    }

    // ---- failure-atomic regions ---------------------------------------

    /** Runs {@code body} failure-atomically (see {@link Session#atomic}). */
    public static void atomic(Runnable body) {
        Session.atomic(() -> {
            body.run();
            return null;
        });
    }

    /** Runs {@code body} failure-atomically and returns its result. */
    public static <T> T atomic(Supplier<T> body) {
        return Session.atomic(body);
    }

    /** Is the calling thread inside a failure-atomic region? */
    public static boolean inFailureAtomicRegion() {
        return Session.inRegion();
    }

    /** Nesting depth of the calling thread's regions (0 outside). */
    public static int regionDepth() {
        return Session.regionDepth();
    }

    // ---- introspection ------------------------------------------------

    /** Is {@code o} recoverable (reachable from a durable root when it was last stored)? */
    public static boolean isRecoverable(Object o) {
        return Session.isRecoverable(o);
    }

    /**
     * Does {@code o} have an image in persistent memory? Objects stay in the
     * Java heap with an exactly synchronised image in the pool, so this is
     * true exactly for recoverable objects.
     */
    public static boolean inPersistentMemory(Object o) {
        return Session.imageAddress(o) != 0;
    }

    /** Is {@code f} a durable root (a static field marked {@link DurableRoot})? */
    public static boolean isDurableRoot(Field f) {
        return f != null && Modifier.isStatic(f.getModifiers()) && f.isAnnotationPresent(DurableRoot.class);
    }

    /** Makes {@code o} recoverable now, without storing it anywhere (it stays unlinked garbage if never stored). */
    public static void makeRecoverable(Object o) {
        Session.makeRecoverable(o);
    }
}
