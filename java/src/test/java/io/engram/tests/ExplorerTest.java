package io.engram.tests;

import io.engram.Engram;
import io.engram.heap.Explorer;
import io.engram.runtime.Graph;
import io.engram.runtime.Session;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.lang.reflect.Field;
import java.nio.file.Path;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.*;

/**
 * The engine's crash explorer over Java: the bank workload (regions and
 * sequentially persisted stores) runs in TRACE mode, every crash the x86
 * persistency model allows is opened with the real recovery code, the Java
 * graph is rebuilt from it and the bank's invariants are checked. Then the
 * same with a seeded fault (region stores not undo-logged), which must be
 * reported.
 */
class ExplorerTest {
    @AfterEach
    void reset() {
        Graph.faultSkipRegionLog = false;
        if (Engram.isOpen()) {
            Session.current().close();
        }
        Bank.reset();
    }

    private Explorer.Report explore(String name, boolean fault) throws Exception {
        Path p = Pools.fresh(name);
        Bank.reset();
        long tracer = Explorer.newTracer();
        try {
            Engram pool = Engram.open(p, Engram.Options.defaults().withSize(32L << 20).withTracer(tracer));
            Bank.init();
            Graph.faultSkipRegionLog = fault;
            Explorer.start(tracer);
            Bank.run(7, 2, -1);
            assertTrue(Explorer.stop(tracer) > 0);
            Graph.faultSkipRegionLog = false;
            pool.abandon();
            return Explorer.explore(tracer, Pools.DIR, 4, 1, heap -> {
                Map<String, Object> roots = Session.inspect(heap, ExplorerTest.class.getClassLoader());
                if (roots.get("io.engram.tests.Bank.accounts") == null) {
                    return null; // before the bank existed
                }
                try {
                    assign(roots);
                    Bank.check();
                    return null;
                } catch (AssertionError | ReflectiveOperationException e) {
                    return e.getMessage();
                } finally {
                    Bank.reset();
                }
            });
        } finally {
            Explorer.free(tracer);
        }
    }

    private static void assign(Map<String, Object> roots) throws ReflectiveOperationException {
        for (var e : roots.entrySet()) {
            String n = e.getKey();
            if (n.startsWith("io.engram.tests.Bank.")) {
                Field f = Bank.class.getField(n.substring("io.engram.tests.Bank.".length()));
                f.set(null, e.getValue());
            }
        }
    }

    @Test
    void bankRegionsAndSequentialStoresHaveNoViolation() throws Exception {
        Explorer.Report r = explore("explore-bank", false);
        assertTrue(r.points() > 0 && r.imagesChecked() > 0, r.toString());
        assertEquals(0, r.violations(), r.firstViolation());
        System.out.println("explorer: " + r);
    }

    @Test
    void seededFaultIsReported() throws Exception {
        Explorer.Report r = explore("explore-fault", true);
        assertTrue(r.violations() > 0, "a region whose stores are not logged must break the invariant: " + r);
        System.out.println("explorer (seeded fault): " + r);
    }
}
