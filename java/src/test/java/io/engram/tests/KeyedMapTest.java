package io.engram.tests;

import io.engram.Engram;
import io.engram.runtime.Graph;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.*;

/**
 * The in-place image path of keyed collections (HashMap, HashSet,
 * ConcurrentHashMap, TreeMap, TreeSet): every keyed mutation, checked
 * against a volatile reference after reopening; the path actually taken
 * (counted new data arrays: growth only, not one per change); regions
 * committed and rolled back; concurrent threads in process; and child JVMs
 * halted at random mutations (4) and killed with kill -9 (3), each followed by
 * recovery and {@link KeyedWork}'s invariants. Counts outcomes, never timings.
 */
class KeyedMapTest {
    private Engram pool;

    @AfterEach
    void close() {
        if (pool != null && Engram.isOpen()) {
            pool.close();
        }
        KeyedWork.reset();
        Roots.reset();
    }

    /** One random keyed mutation, applied to the recoverable map and the reference alike. */
    private static void mutate(Random rnd, Map<Object, Object> m, Map<Object, Object> ref) {
        String k = "k" + rnd.nextInt(300);
        Long v = (long) rnd.nextInt(1000);
        int op = rnd.nextInt(9);
        for (Map<Object, Object> x : java.util.List.of(m, ref)) {
            switch (op) {
                case 0, 1, 2 -> x.put(k, v);
                case 3, 4 -> x.remove(k);
                case 5 -> x.putIfAbsent(k, v);
                case 6 -> x.merge(k, v, (a, b) -> (Long) a + (Long) b);
                case 7 -> x.computeIfPresent(k, (a, b) -> (Long) b + 1);
                default -> x.replace(k, v);
            }
        }
    }

    @Test
    @SuppressWarnings("unchecked")
    void everyKeyedMutationSurvivesReopenWithoutReimaging() throws Exception {
        Path p = Pools.fresh("keyed-maps");
        pool = Pools.open(p);
        Map<Object, Object> refH = new HashMap<>(), refC = new HashMap<>(), refT = new TreeMap<>();
        Set<Object> refS = new HashSet<>(), refTs = new TreeSet<>();
        HashMap<Object, Object> h = new HashMap<>();
        ConcurrentHashMap<Object, Object> c = new ConcurrentHashMap<>();
        TreeMap<Object, Object> t = new TreeMap<>();
        HashSet<Object> s = new HashSet<>();
        TreeSet<Object> ts = new TreeSet<>();
        Roots.any = new Object[] {h, c, t, s, ts};
        long before = Graph.collectionReimages();
        Random rnd = new Random(42);
        for (int i = 0; i < 3000; i++) {
            long seed = rnd.nextLong();
            mutate(new Random(seed), h, refH);
            mutate(new Random(seed), c, refC);
            mutate(new Random(seed), t, refT);
            String e = "e" + rnd.nextInt(200);
            if (rnd.nextBoolean()) {
                s.add(e);
                refS.add(e);
                ts.add(e);
                refTs.add(e);
            } else {
                s.remove(e);
                refS.remove(e);
                ts.remove(e);
                refTs.remove(e);
            }
        }
        long reimages = Graph.collectionReimages() - before;
        assertTrue(reimages < 5 * 20, reimages + " new data arrays for 15000 keyed changes: not in place");
        assertEquals(refH, h);
        pool.close();
        Roots.reset();
        pool = Pools.open(p);
        Object[] got = (Object[]) Roots.any;
        assertEquals(refH, got[0]);
        assertEquals(refC, new HashMap<>((Map<Object, Object>) got[1]));
        assertEquals(refT, got[2]);
        assertEquals(refS, got[3]);
        assertEquals(refTs, got[4]);
        assertSame(ConcurrentHashMap.class, got[1].getClass());
        // after a reopen: one re-imaging, then in place again
        HashMap<Object, Object> h2 = (HashMap<Object, Object>) got[0];
        before = Graph.collectionReimages();
        for (int i = 0; i < 500; i++) {
            long seed = rnd.nextLong();
            mutate(new Random(seed), h2, refH);
        }
        assertTrue(Graph.collectionReimages() - before < 10);
        pool.close();
        Roots.reset();
        pool = Pools.open(p);
        assertEquals(refH, ((Object[]) Roots.any)[0]);
    }

    @Test
    @SuppressWarnings("unchecked")
    void regionsCommitAndRollBackKeyedChanges() throws Exception {
        Path p = Pools.fresh("keyed-regions");
        pool = Pools.open(p);
        HashMap<Object, Object> m = new HashMap<>();
        for (int i = 0; i < 50; i++) {
            m.put("k" + i, (long) i);
        }
        Roots.map = m;
        m.put("k50", 50L); // in place (index built after the first change)
        Engram.atomic(() -> {
            m.remove("k3");
            m.put("k4", 40L);
            m.put("k51", 51L);
        });
        HashMap<Object, Object> ref = new HashMap<>(m);
        assertThrows(IllegalStateException.class, () -> Engram.atomic(() -> {
            m.remove("k5");
            m.put("k6", 60L);
            m.put("k52", 52L);
            throw new IllegalStateException("roll back");
        }));
        assertEquals(ref, m, "the Java map rolled back");
        m.put("k7", 70L); // after an abort: re-imaged once, then in place
        m.remove("k8");
        ref.put("k7", 70L);
        ref.remove("k8");
        pool.close();
        Roots.reset();
        pool = Pools.open(p);
        assertEquals(ref, Roots.map);
    }

    @Test
    void concurrentKeyedChangesInProcess() throws Exception {
        Path p = Pools.fresh("keyed-concurrent");
        pool = Pools.open(p);
        KeyedWork.init();
        KeyedWork.run(3, 150, 7, -1);
        pool.close();
        KeyedWork.reset();
        pool = Pools.open(p);
        assertEquals(3 * 150, KeyedWork.check(3));
    }

    @Test
    void childJvmsHaltedAtRandomMutationsThenRecover() throws Exception {
        Random rnd = new Random(9);
        int halted = 0;
        for (int batch = 0; batch < 2; batch++) { // two children at a time, checked one by one
            Path[] pools = new Path[2];
            Process[] children = new Process[2];
            for (int i = 0; i < 2; i++) {
                pools[i] = Pools.fresh("keyed-halt-" + i);
                children[i] = Pools.start("keyed", pools[i].toString(), "2", "200", Long.toString(rnd.nextLong()),
                        Long.toString(1 + rnd.nextInt(2500)));
            }
            for (int i = 0; i < 2; i++) {
                assertTrue(children[i].waitFor(180, TimeUnit.SECONDS), "child did not finish");
                int rc = children[i].exitValue();
                assertTrue(rc == 3 || rc == 0, "child exit code " + rc + " (see " + Pools.DIR.resolve("children.log") + ")");
                halted += rc == 3 ? 1 : 0;
                recoverAndCheck(pools[i]);
            }
        }
        assertTrue(halted >= 2, "only " + halted + " children halted inside the workload");
    }

    private void recoverAndCheck(Path p) {
        KeyedWork.reset();
        pool = Pools.open(p);
        KeyedWork.check(2);
        pool.close();
    }

    @Test
    void childJvmsKilledThenRecover() throws Exception {
        Random rnd = new Random(11);
        Path[] pools = new Path[3];
        Process[] children = new Process[3];
        for (int i = 0; i < 3; i++) {
            pools[i] = Pools.fresh("keyed-kill-" + i);
            Files.deleteIfExists(Path.of(pools[i] + ".ready"));
            children[i] = Pools.start("keyed-forever", pools[i].toString(), "2", Long.toString(rnd.nextLong()));
        }
        for (int i = 0; i < 3; i++) {
            Path ready = Path.of(pools[i] + ".ready");
            for (int w = 0; w < 12000 && !Files.exists(ready) && children[i].isAlive(); w++) {
                Thread.sleep(10);
            }
            assertTrue(Files.exists(ready), "child never opened the pool");
            Thread.sleep(50 + rnd.nextInt(400));
            children[i].destroyForcibly(); // SIGKILL
            assertTrue(children[i].waitFor(60, TimeUnit.SECONDS));
        }
        for (int i = 0; i < 3; i++) {
            recoverAndCheck(pools[i]);
        }
    }
}
