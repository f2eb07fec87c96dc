package io.engram.heap;

import io.engram.EngramException;
import io.engram.EngramException.Code;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.nio.file.Path;
import java.util.function.Function;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The engine's crash explorer, for Java workloads ({@code engram_tracer_*},
 * {@code engram_explore}):
 * <ol>
 * <li>{@link #newTracer}; open a pool with {@link Durability#TRACE} and the
 *     tracer; set up the state to start from;</li>
 * <li>{@link #start}; run the workload; {@link #stop}; abandon the pool;</li>
 * <li>{@link #explore}: the engine crashes the recorded stretch at every
 *     ordering point under the x86 persistency model, opens each possible
 *     image with the real recovery code, and calls the check (here, Java
 *     code through an FFM upcall) with a heap over it; a non-null answer is
 *     a violation.</li>
 * </ol>
 * One exploration at a time per JVM (the upcall finds its check in a static).
 */
public final class Explorer {
    private Explorer() {
    }

    /** What an exploration found. */
    public record Report(long stores, long flushes, long fences, long points, long imagesChecked,
                         long imagesSkipped, long violations, String firstViolation) {
    }

    private static volatile Function<Heap, String> check;

    public static long newTracer() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(JAVA_LONG);
            EngineHeap.checked(EngineHeap.invoke(EngineHeap.library().tracerNew, out));
            return out.get(JAVA_LONG, 0);
        }
    }

    public static void start(long tracer) {
        EngineHeap.checked(EngineHeap.invoke(EngineHeap.library().tracerStart, tracer));
    }

    /** Stops recording; returns the number of events recorded. */
    public static long stop(long tracer) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(JAVA_LONG);
            EngineHeap.checked(EngineHeap.invoke(EngineHeap.library().tracerStop, tracer, out));
            return out.get(JAVA_LONG, 0);
        }
    }

    public static void free(long tracer) {
        EngineHeap.checked(EngineHeap.invoke(EngineHeap.library().tracerFree, tracer));
    }

    /**
     * Explores the tracer's stopped trace; {@code invariant} gets a heap over
     * each crash image (valid during the call only) and returns null or what
     * is wrong. Exceptions it throws count as violations.
     */
    public static synchronized Report explore(long tracer, Path scratch, int maxImagesPerPoint, long seed,
                                              Function<Heap, String> invariant) {
        check = invariant;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment opts = a.allocate(32, 8);
            opts.set(ADDRESS, 0, a.allocateFrom("engram-java"));
            opts.set(ADDRESS, 8, a.allocateFrom(scratch.toString()));
            opts.set(JAVA_INT, 16, maxImagesPerPoint);
            opts.set(JAVA_INT, 20, 5);
            opts.set(JAVA_LONG, 24, seed);
            MemorySegment stub = Linker.nativeLinker().upcallStub(MethodHandles.lookup().findStatic(Explorer.class,
                    "upcall", MethodType.methodType(int.class, MemorySegment.class, long.class, MemorySegment.class,
                            long.class)), FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, ADDRESS, JAVA_LONG), a);
            MemorySegment rep = a.allocate(56 + 512, 8);
            EngineHeap.checked(EngineHeap.invoke(EngineHeap.library().explore, tracer, opts, stub, MemorySegment.NULL, rep));
            return new Report(rep.get(JAVA_LONG, 0), rep.get(JAVA_LONG, 8), rep.get(JAVA_LONG, 16),
                    rep.get(JAVA_LONG, 24), rep.get(JAVA_LONG, 32), rep.get(JAVA_LONG, 40), rep.get(JAVA_LONG, 48),
                    rep.asSlice(56, 512).getString(0));
        } catch (ReflectiveOperationException e) {
            throw new EngramException(Code.INTERNAL, "explorer upcall: " + e, e);
        } finally {
            check = null;
        }
    }

    /** The C callback: never lets an exception cross into the engine. */
    private static int upcall(MemorySegment user, long pool, MemorySegment msg, long cap) {
        String bad;
        try (EngineHeap heap = EngineHeap.borrow(pool)) {
            bad = check.apply(heap);
        } catch (Throwable t) {
            bad = t.toString();
        }
        if (bad == null) {
            return 0;
        }
        MemorySegment m = msg.reinterpret(cap);
        byte[] b = bad.getBytes(java.nio.charset.StandardCharsets.UTF_8);
        int n = (int) Math.min(b.length, cap - 1);
        MemorySegment.copy(MemorySegment.ofArray(b), 0, m, 0, n);
        m.set(java.lang.foreign.ValueLayout.JAVA_BYTE, n, (byte) 0);
        return 1;
    }
}
