package io.engram.tests;

import io.engram.Engram;
import io.engram.heap.Durability;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Random;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.*;

/**
 * The Java front end in the engine's {@code wal} durability (the default on
 * an ordinary file system): the pool is mapped privately and every persist
 * outside a region, and every region's commit, waits for a write-ahead-log
 * group commit. Child JVMs run the bank workload in {@code wal} mode and are
 * halted at random steps or killed with kill -9; the test JVM opens the pool
 * (replaying the log) and checks the bank's invariants. Pools live in the
 * test directory (target/pools, on disk), not on tmpfs. Counts outcomes,
 * never timings.
 */
class WalTest {
    static final Engram.Options WAL = Pools.OPTIONS.withDurability(Durability.WAL);
    static final int RUNS = Integer.getInteger("engram.wal.runs", 2);
    private Engram pool;

    @AfterEach
    void close() {
        if (pool != null && Engram.isOpen()) {
            pool.close();
        }
        Bank.reset();
    }

    private long recoverAndCheck(Path p) {
        Bank.reset();
        pool = Engram.open(p, WAL);
        try {
            return Bank.check();
        } finally {
            pool.close();
        }
    }

    @Test
    void regionsAndSequentialStoresInWalModeAcrossAReopen() throws Exception {
        Path p = Pools.fresh("wal-api");
        pool = Engram.open(p, WAL);
        Node a = new Node(1, "a");
        Roots.head = a;
        a.next = new Node(2, "b");
        a.value = 10;
        Engram.atomic(() -> {
            a.value = 11;
            a.next.value = 12;
        });
        assertThrows(IllegalStateException.class, () -> Engram.atomic(() -> {
            a.value = 99;
            a.next = null;
            throw new IllegalStateException("roll back");
        }));
        assertEquals(11, a.value, "the Java object rolled back");
        Roots.map = new java.util.HashMap<>();
        Roots.map.put("k", a.next);
        pool.close();
        Roots.reset();
        pool = Engram.open(p, WAL);
        assertEquals(11, Roots.head.value);
        assertEquals(12, Roots.head.next.value);
        assertSame(Roots.head.next, Roots.map.get("k"));
    }

    @Test
    void haltedAtRandomStepsInWalModeThenRecover() throws Exception {
        Path p = Pools.fresh("wal-halt");
        Random rnd = new Random(9);
        int halted = 0;
        for (int i = 0; i < RUNS; i++) {
            long haltAt = 1 + rnd.nextInt(120);
            Process c = Pools.start(true, Durability.WAL, "bank", p.toString(), Long.toString(rnd.nextLong()), "30",
                    Long.toString(haltAt));
            assertTrue(c.waitFor(180, TimeUnit.SECONDS), "child did not finish");
            int rc = c.exitValue();
            assertTrue(rc == 3 || rc == 0, "child exit code " + rc + " (see " + Pools.DIR.resolve("children.log") + ")");
            halted += rc == 3 ? 1 : 0;
            recoverAndCheck(p);
        }
        assertTrue(halted > 0, "no child halted inside the workload");
    }

    @Test
    void killedInWalModeThenRecover() throws Exception {
        Path p = Pools.fresh("wal-kill");
        Random rnd = new Random(11);
        long before = 0;
        for (int i = 0; i < RUNS; i++) {
            Path ready = Path.of(p + ".ready");
            Files.deleteIfExists(ready);
            Process child = Pools.start(true, Durability.WAL, "bank-forever", p.toString(), Long.toString(rnd.nextLong()));
            for (int j = 0; j < 12000 && !Files.exists(ready) && child.isAlive(); j++) {
                Thread.sleep(10);
            }
            assertTrue(Files.exists(ready), "child never opened the pool");
            Thread.sleep(50 + rnd.nextInt(300));
            child.destroyForcibly(); // SIGKILL
            assertTrue(child.waitFor(60, TimeUnit.SECONDS));
            assertTrue(Files.exists(Path.of(p + ".wal")), "the child ran in wal mode and left its log");
            long now = recoverAndCheck(p);
            assertTrue(now >= before, "recovered progress " + now + " went back from " + before);
            before = now;
        }
    }
}
