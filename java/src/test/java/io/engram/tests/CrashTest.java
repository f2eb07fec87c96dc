package io.engram.tests;

import io.engram.Engram;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.*;

/**
 * Child JVMs write, crash (Runtime.halt at a chosen step, or kill -9 at a
 * random moment), and the test JVM recovers and checks the invariants.
 * Counts outcomes, never timings. {@code -Dengram.crash.runs=N} changes the
 * number of crash runs of each kind (default 25 + 25).
 */
class CrashTest {
    static final int RUNS = Integer.getInteger("engram.crash.runs", 25);
    private Engram pool;

    @AfterEach
    void close() {
        if (pool != null && Engram.isOpen()) {
            pool.close();
        }
        Bank.reset();
        Concurrent.reset();
    }

    private long recoverAndCheckBank(Path p) {
        Bank.reset();
        pool = Pools.open(p);
        try {
            return Bank.check();
        } finally {
            pool.close();
        }
    }

    @Test
    void identitySharingAndCyclesAcrossProcesses() throws Exception {
        Path p = Pools.fresh("child-graph");
        assertEquals(0, Pools.child(120, "graph", p.toString()));
        pool = Pools.open(p);
        assertSame(Roots.head.next, Roots.second.next);
        assertSame(Roots.head, Roots.head.next.next);
        assertSame(Roots.head.next, Roots.head.next.other);
        assertSame(Roots.head.next, Roots.map.get("shared"));
        assertSame(Roots.map, Roots.map.get("self"));
    }

    /** Runs {@code runs} crash runs in two lanes (two pools, children in parallel, checks one at a time). */
    private void lanes(String name, int runs, LaneRun body) throws Exception {
        ExecutorService ex = Executors.newFixedThreadPool(LANES);
        try {
            List<Future<Integer>> fs = new ArrayList<>();
            for (int lane = 0; lane < LANES; lane++) {
                Path p = Pools.fresh(name + "-" + lane);
                Random rnd = new Random(name.hashCode() * 31L + lane);
                int n = runs / LANES + (lane < runs % LANES ? 1 : 0);
                fs.add(ex.submit(() -> {
                    int ok = 0;
                    for (int i = 0; i < n; i++) {
                        ok += body.run(p, rnd) ? 1 : 0;
                    }
                    return ok;
                }));
            }
            int ok = 0;
            for (Future<Integer> f : fs) {
                ok += f.get();
            }
            assertTrue(ok > runs / 2, name + ": only " + ok + " of " + runs + " runs crashed inside the workload");
        } finally {
            ex.shutdownNow();
        }
    }

    interface LaneRun {
        boolean run(Path pool, Random rnd) throws Exception;
    }

    static final int LANES = 3;
    private static final Object CHECK = new Object();

    /** Recovery and the invariant check (one pool open per JVM: one lane at a time). */
    private long recoverAndCheck(Path p) {
        synchronized (CHECK) {
            return recoverAndCheckBank(p);
        }
    }

    @Test
    void haltAtRandomStepsThenRecover() throws Exception {
        lanes("crash-halt", RUNS, (p, rnd) -> {
            long haltAt = 1 + rnd.nextInt(400);
            int rc = Pools.child(180, "bank", p.toString(), Long.toString(rnd.nextLong()), "60", Long.toString(haltAt));
            assertTrue(rc == 3 || rc == 0, "child exit code " + rc + " (see " + Pools.DIR.resolve("children.log") + ")");
            recoverAndCheck(p);
            return rc == 3;
        });
    }

    @Test
    void killMinus9AtRandomMomentsThenRecover() throws Exception {
        lanes("crash-kill", RUNS, (p, rnd) -> {
            Path ready = Path.of(p + ".ready");
            Files.deleteIfExists(ready);
            long before = Files.exists(p) ? recoverAndCheck(p) : 0;
            Process child = Pools.start("bank-forever", p.toString(), Long.toString(rnd.nextLong()));
            for (int i = 0; i < 12000 && !Files.exists(ready) && child.isAlive(); i++) {
                Thread.sleep(10);
            }
            assertTrue(Files.exists(ready), "child never opened the pool");
            Thread.sleep(20 + rnd.nextInt(200));
            child.destroyForcibly(); // SIGKILL
            assertTrue(child.waitFor(60, TimeUnit.SECONDS));
            return recoverAndCheck(p) >= before;
        });
    }

    @Test
    void concurrentStoresInProcessThenReopen() throws Exception {
        Path p = Pools.fresh("concurrent");
        Concurrent.reset();
        pool = Pools.open(p);
        Node[] shared = Concurrent.run(4, 400, -1);
        long[] expected = new long[shared.length];
        for (int i = 0; i < shared.length; i++) {
            assertTrue(Engram.isRecoverable(shared[i]));
            expected[i] = shared[i].value;
        }
        pool.close();
        Concurrent.reset();
        pool = Pools.open(p);
        assertEquals(4 * 401, Concurrent.check(4, 400));
        long sum = 0;
        for (Object c : Concurrent.chains) {
            for (Node n = (Node) c; n != null; n = n.next) {
                int idx = Integer.parseInt(n.other.label.substring(6));
                assertEquals(expected[idx], n.other.value, "shared counter " + idx + " image differs from the object");
            }
        }
        for (long e : expected) {
            sum += e;
        }
        assertEquals(4 * 400, sum);
    }

    @Test
    void concurrentStoresHaltedThenRecover() throws Exception {
        Random rnd = new Random(5);
        for (int run = 0; run < 5; run++) {
            Path p = Pools.fresh("concurrent-halt-" + run);
            Concurrent.reset();
            int rc = Pools.child(120, "concurrent", p.toString(), "4", "300", Long.toString(50 + rnd.nextInt(1000)));
            assertEquals(3, rc, "the child halts mid-run");
            pool = Pools.open(p);
            assertTrue(Concurrent.check(4, -1) > 0);
            pool.close();
        }
    }
}
