package io.engram.apps;

import io.engram.apps.kernels.Seq;
import io.engram.apps.kernels.Workload;
import io.engram.apps.kernels.explicit.XFARArray;
import io.engram.apps.kernels.explicit.XFArray;
import io.engram.apps.kernels.explicit.XFList;
import io.engram.apps.kernels.explicit.XMArray;
import io.engram.apps.kernels.explicit.XMList;
import io.engram.heap.Durability;
import io.engram.heap.EngineHeap;
import io.engram.heap.Explorer;
import io.engram.heap.Heap;
import org.junit.jupiter.api.Test;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.nio.file.Path;
import java.util.List;
import java.util.Set;
import java.util.function.BiFunction;

import static org.junit.jupiter.api.Assertions.*;

/**
 * The engine's crash explorer over the kernels written against the explicit
 * low-level API ({@code kernels/explicit}): each kernel's pool is opened in
 * TRACE durability, filled, then a short seeded workload (16 operations;
 * 24 for the fault) is recorded; the
 * explorer crashes it at every ordering point the x86 persistency model
 * distinguishes, opens each image with the engine's recovery, attaches the
 * kernel to it and checks that its contents are the reference's after some
 * whole number of operations. 0 violations for every kernel; then XMList
 * through a heap that drops the persist of each new node (its stores made
 * non-durable), which must be reported.
 */
class KernelExplorerTest {
    static final int N = 8;
    static final int OPS = 16;
    static final int FAULT_OPS = 24;
    static final long SEED = 11;

    /**
     * The seeded fault: a heap that forwards everything except persists and
     * flushes of 16 bytes, i.e. XMList's persist of a new node before it is
     * linked (the node's stores made non-durable).
     */
    private static Heap droppingNodePersists(Heap h) {
        return (Heap) Proxy.newProxyInstance(Heap.class.getClassLoader(), new Class<?>[] {Heap.class}, (p, m, args) -> {
            if ((m.getName().equals("persist") || m.getName().equals("flush")) && (long) args[1] == 16) {
                return null;
            }
            try {
                return m.invoke(h, args);
            } catch (InvocationTargetException e) {
                throw e.getCause();
            }
        });
    }

    private static Explorer.Report explore(String name, boolean structural, BiFunction<Heap, Integer, Seq> attach,
                                           boolean fault) throws Exception {
        int ops = fault ? FAULT_OPS : OPS;
        Path p = AppPools.fresh("explore-" + name + (fault ? "-fault" : ""));
        Set<List<Long>> states = Workload.states(N, structural, SEED, ops);
        long tracer = Explorer.newTracer();
        try {
            EngineHeap heap = EngineHeap.open(p, 8L << 20, Durability.TRACE, true, tracer);
            Seq s = attach.apply(fault ? droppingNodePersists(heap) : heap, N);
            Workload.fill(s);
            Explorer.start(tracer);
            Workload.run(s, SEED, ops);
            assertTrue(Explorer.stop(tracer) > 0);
            heap.abandon();
            return Explorer.explore(tracer, AppPools.DIR, 4, 1, image -> {
                List<Long> got = Workload.contents(attach.apply(image, N));
                return states.contains(got) ? null : name + " recovered " + got
                        + ", which no whole number of operations gives";
            });
        } finally {
            Explorer.free(tracer);
        }
    }

    @Test
    void explicitKernelsHaveNoViolation() throws Exception {
        record K(String name, boolean structural, BiFunction<Heap, Integer, Seq> attach) {
        }
        for (K k : List.of(new K("XMArray", false, XMArray::attach), new K("XMList", true, XMList::attach),
                new K("XFARArray", false, XFARArray::attach), new K("XFArray", false, XFArray::attach),
                new K("XFList", true, XFList::attach))) {
            Explorer.Report r = explore(k.name, k.structural, k.attach, false);
            assertTrue(r.points() > 0 && r.imagesChecked() > 0, k.name + ": " + r);
            assertEquals(0, r.violations(), k.name + ": " + r.firstViolation());
            System.out.println("explorer " + k.name + ": " + r);
        }
    }

    @Test
    void seededNonDurableStoreIsReported() throws Exception {
        Explorer.Report r = explore("XMList", true, XMList::attach, true);
        assertTrue(r.violations() > 0, "a new node that is linked but never persisted must be reported: " + r);
        System.out.println("explorer XMList (seeded fault): " + r);
    }
}
