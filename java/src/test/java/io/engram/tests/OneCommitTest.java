package io.engram.tests;

import io.engram.Engram;
import io.engram.NotPersistableException;
import io.engram.heap.EngineHeap;
import io.engram.heap.Explorer;
import io.engram.runtime.Graph;
import io.engram.runtime.Session;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;

import static org.junit.jupiter.api.Assertions.*;

/**
 * One commit per collection change: outside a region, a keyed change of a
 * recoverable hash or sorted map/set (a put of a new key whose value is a
 * new object graph, an update, a remove) is one failure-atomic region of
 * the runtime's own, so exactly one engine commit and no other durability
 * point; an append to a list is the new elements' one conversion commit
 * (plus the two persists that publish it). The crash explorer then
 * crashes a run of such changes at every point the x86 persistency model
 * distinguishes: every crash image holds the map and list after a whole
 * number of changes, every value whole.
 */
class OneCommitTest {
    @AfterEach
    void close() {
        Graph.faultSkipRegionLog = false;
        if (Engram.isOpen()) {
            Session.current().close();
        }
        Roots.reset();
    }

    /** A value: a new object graph of 3 objects (a node, its label, a linked node). */
    private static Node value(String key, long v) {
        Node n = new Node(v, key);
        n.next = new Node(2 * v, null);
        return n;
    }

    private static long commitsOf(Runnable change) {
        long before = EngineHeap.commits();
        change.run();
        return EngineHeap.commits() - before;
    }

    @Test
    void everyCollectionChangeIsOneCommit() throws Exception {
        Path p = Pools.fresh("one-commit");
        try (Engram pool = Pools.open(p)) {
            Map<Object, Object> m = new HashMap<>();
            Roots.map = m;
            List<Object> l = new ArrayList<>();
            Roots.list = l;
            TreeMap<String, Object> t = new TreeMap<>();
            HashSet<Object> s = new HashSet<>();
            ConcurrentHashMap<Object, Object> c = new ConcurrentHashMap<>();
            Roots.any = new Object[] {t, s, c};
            long listCommits = 0;
            for (int i = 0; i < 50; i++) {
                String k = "k" + i;
                int v = i;
                assertEquals(1, commitsOf(() -> m.put(k, value(k, v))), "HashMap.put of a new key " + i);
                assertEquals(1, commitsOf(() -> t.put(k, value(k, v))), "TreeMap.put " + i);
                assertEquals(1, commitsOf(() -> s.add(value(k, v))), "HashSet.add " + i);
                assertEquals(1, commitsOf(() -> c.put(k, value(k, v))), "ConcurrentHashMap.put " + i);
                listCommits += commitsOf(() -> l.add(value(k, v)));
            }
            // an append is the new elements' conversion (one commit) and two persists; a full data array
            // is replaced in a region of its own (amortised: a few times in 50 appends)
            assertTrue(listCommits >= 50 && listCommits <= 60, "50 ArrayList.add: " + listCommits + " commits");
            assertEquals(1, commitsOf(() -> m.put("k3", value("k3", 103))), "an update");
            assertEquals(1, commitsOf(() -> m.remove("k4")), "a remove");
            assertEquals(1, commitsOf(() -> l.remove(0)), "a list remove (a re-imaging: one region)");
            assertEquals(1, commitsOf(() -> m.put("k5", m.get("k6"))), "a put of a recoverable value");
        }
        Roots.reset();
        try (Engram pool = Pools.open(p)) {
            assertEquals(49, Roots.map.size());
            assertEquals(103, ((Node) Roots.map.get("k3")).value);
            assertSame(Roots.map.get("k5"), Roots.map.get("k6"));
            assertNull(Roots.map.get("k4"));
            Node n = (Node) Roots.map.get("k7");
            assertEquals("k7", n.label);
            assertEquals(14, n.next.value);
            assertEquals(49, Roots.list.size());
            Object[] any = (Object[]) Roots.any;
            assertEquals(50, ((TreeMap<?, ?>) any[0]).size());
            assertEquals(50, ((HashSet<?>) any[1]).size());
            assertEquals(50, ((ConcurrentHashMap<?, ?>) any[2]).size());
        }
    }

    @Test
    void notPersistableIsRefusedBeforeTheCall() throws Exception {
        Path p = Pools.fresh("one-commit-refused");
        try (Engram pool = Pools.open(p)) {
            Map<Object, Object> m = new HashMap<>();
            Roots.map = m;
            Node bad = new Node(1, "bad");
            bad.next = new Node(2, "inner");
            bad.next.other = null;
            Object[] holder = {new Thread(() -> { })};
            bad.next.next = new Node(3, "deep");
            NotPersistableException e = assertThrows(NotPersistableException.class,
                    () -> m.put("bad", holder));
            assertTrue(e.getMessage().contains("java.lang.Thread"), e.getMessage());
            assertTrue(e.getMessage().contains("[0]"), e.getMessage());
            assertFalse(m.containsKey("bad"), "the call must not happen");
            assertFalse(Engram.isRecoverable(holder));
            m.put("good", bad);
            assertTrue(Engram.isRecoverable(bad.next.next));
        }
    }

    @Test
    void aPutThatFillsThePoolDoesNotHappen() throws Exception {
        Path p = Pools.fresh("one-commit-full");
        try (Engram pool = Engram.open(p, Pools.OPTIONS.withSize(24L << 20))) {
            Map<Object, Object> m = new HashMap<>();
            Roots.map = m;
            m.put("first", new byte[] {1});
            int added = 0;
            io.engram.PoolFullException full = null;
            for (int i = 0; i < 200 && full == null; i++) {
                try {
                    m.put("k" + i, new byte[256 << 10]);
                    added++;
                } catch (io.engram.PoolFullException e) {
                    full = e;
                }
            }
            assertNotNull(full, "a 24 MiB pool must fill up");
            assertEquals(added + 1, m.size(), "the failing put of a new key did not happen");
            byte[] before = (byte[]) m.get("first");
            assertThrows(io.engram.PoolFullException.class, () -> m.put("first", new byte[1 << 20]));
            assertSame(before, m.get("first"), "the failing update did not happen");
        }
        Roots.reset();
        try (Engram pool = Engram.open(p, Pools.OPTIONS.withSize(24L << 20))) {
            assertEquals(1, ((byte[]) Roots.map.get("first"))[0]);
            assertTrue(Roots.map.size() > 1);
        }
    }

    // ---- the crash explorer over collection changes ---------------------

    /** The changes, in order; state(k) is what the map and list hold after the first k. */
    private static final int OPS = 6;

    private static void op(int k) {
        switch (k) {
            case 0 -> Roots.map.put("new1", value("new1", 11));
            case 1 -> Roots.map.put("a", value("a", 21)); // an update: a new value graph
            case 2 -> Roots.map.remove("b");
            case 3 -> Roots.list.add(value("l1", 31));
            case 4 -> Roots.map.put("new2", value("new2", 41));
            default -> Roots.map.put("new3", value("new3", 51));
        }
    }

    /** The map's contents (key -> value, next.value) and the list's values after the first k changes. */
    private static String state(int k) {
        TreeMap<String, String> m = new TreeMap<>();
        m.put("a", "1/2");
        m.put("b", "2/4");
        m.put("c", "3/6");
        List<Long> l = new ArrayList<>(List.of(7L));
        long[][] puts = {{11}, {21}, {}, {}, {41}, {51}};
        String[] keys = {"new1", "a", null, null, "new2", "new3"};
        for (int i = 0; i < k; i++) {
            if (i == 2) {
                m.remove("b");
            } else if (i == 3) {
                l.add(31L);
            } else {
                m.put(keys[i], puts[i][0] + "/" + 2 * puts[i][0]);
            }
        }
        return m + " " + l;
    }

    private static String describe(Map<?, ?> map, List<?> list) {
        TreeMap<String, String> m = new TreeMap<>();
        for (Map.Entry<?, ?> e : map.entrySet()) {
            Node n = (Node) e.getValue();
            if (!Objects.equals(n.label, e.getKey()) || n.next == null) {
                return "a torn value under " + e.getKey();
            }
            m.put((String) e.getKey(), n.value + "/" + n.next.value);
        }
        List<Long> l = new ArrayList<>();
        for (Object o : list) {
            l.add(((Node) o).value);
        }
        return m + " " + l;
    }

    @Test
    void crashExplorerFindsEveryMapWhole() throws Exception {
        Explorer.Report r = explore("explore-one-commit", false);
        System.out.println("explorer (one commit per change): " + r);
        assertTrue(r.points() > 0 && r.imagesChecked() > 0, r.toString());
        assertEquals(0, r.violations(), r.firstViolation());
    }

    /** The seeded fault (the implicit region's stores not undo-logged) must be reported. */
    @Test
    void crashExplorerReportsTheSeededFault() throws Exception {
        Explorer.Report r = explore("explore-one-commit-fault", true);
        System.out.println("explorer (one commit per change, seeded fault): " + r);
        assertTrue(r.violations() > 0, "unlogged region stores must tear a change: " + r);
    }

    private Explorer.Report explore(String name, boolean fault) throws Exception {
        Path p = Pools.fresh(name);
        long tracer = Explorer.newTracer();
        try {
            Engram pool = Engram.open(p, Engram.Options.defaults().withSize(32L << 20).withTracer(tracer));
            Map<Object, Object> m = new HashMap<>();
            m.put("a", value("a", 1));
            m.put("b", value("b", 2));
            m.put("c", value("c", 3));
            Roots.map = m;
            Roots.list = new ArrayList<>(List.of(value("l0", 7)));
            Roots.map.put("warm", value("warm", 0)); // the keyed index is built on the first change
            Roots.map.remove("warm");
            Explorer.start(tracer);
            Graph.faultSkipRegionLog = fault;
            try {
                for (int k = 0; k < OPS; k++) {
                    op(k);
                }
            } finally {
                Graph.faultSkipRegionLog = false;
            }
            assertTrue(Explorer.stop(tracer) > 0);
            pool.abandon();
            List<String> states = new ArrayList<>();
            for (int k = 0; k <= OPS; k++) {
                states.add(state(k));
            }
            return Explorer.explore(tracer, Pools.DIR, 4, 1, heap -> {
                Map<String, Object> roots = Session.inspect(heap, OneCommitTest.class.getClassLoader());
                Map<?, ?> map = (Map<?, ?>) roots.get("io.engram.tests.Roots.map");
                List<?> list = (List<?>) roots.get("io.engram.tests.Roots.list");
                if (map == null || list == null) {
                    return "roots lost";
                }
                String got = describe(map, list);
                return states.contains(got) ? null : "not a whole number of changes: " + got;
            });
        } finally {
            Explorer.free(tracer);
        }
    }
}
