package io.engram.tests;

import io.engram.Engram;
import io.engram.heap.Explorer;
import io.engram.runtime.Graph;
import io.engram.runtime.Session;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.*;

import static org.junit.jupiter.api.Assertions.*;

/**
 * The crash explorer over mutations through views and the JDK's in-place
 * helpers outside regions: an iterator remove, a sub-list clear, an entry's
 * setValue, {@code Arrays.sort} of a 64-element array (several cache
 * lines: one implicit region), {@code Collections.reverse} and a reflective
 * field store. Every crash image must hold the state after a whole number
 * of them; with the implicit region's stores not logged (the seeded fault)
 * a torn sort is reported.
 */
class ViewsExplorerTest {
    private static final int OPS = 6;

    private static void op(int k) throws ReflectiveOperationException {
        @SuppressWarnings("unchecked")
        List<String> list = (List<String>) Roots.list.get(0);
        @SuppressWarnings("unchecked")
        Map<String, Integer> map = (Map<String, Integer>) Roots.list.get(1);
        int[] ints = (int[]) Roots.list.get(2);
        switch (k) {
            case 0 -> {
                Iterator<String> it = list.iterator();
                it.next();
                it.remove();
            }
            case 1 -> list.subList(1, 3).clear();
            case 2 -> {
                for (Map.Entry<String, Integer> e : map.entrySet()) {
                    if (e.getKey().equals("m2")) {
                        e.setValue(-2);
                    }
                }
            }
            case 3 -> Arrays.sort(ints);
            case 4 -> Collections.reverse(list);
            default -> Node.class.getDeclaredField("value").setLong(Roots.list.get(3), 99);
        }
    }

    private static String describe(List<?> roots) {
        return roots.get(0) + " " + new TreeMap<>((Map<?, ?>) roots.get(1)) + " " + Arrays.toString((int[]) roots.get(2))
                + " " + ((Node) roots.get(3)).value;
    }

    @Test
    void everyCrashImageHoldsAWholeNumberOfMutations() throws Exception {
        Explorer.Report r = explore("explore-views", false);
        System.out.println("explorer (views and helpers): " + r);
        assertTrue(r.points() > 0 && r.imagesChecked() > 0, r.toString());
        assertEquals(0, r.violations(), r.firstViolation());
    }

    @Test
    void theSeededFaultIsReported() throws Exception {
        Explorer.Report r = explore("explore-views-fault", true);
        System.out.println("explorer (views and helpers, seeded fault): " + r);
        assertTrue(r.violations() > 0, "an unlogged implicit region must tear the sort: " + r);
    }

    private Explorer.Report explore(String name, boolean fault) throws Exception {
        Path p = Pools.fresh(name);
        long tracer = Explorer.newTracer();
        try {
            Engram pool = Engram.open(p, Engram.Options.defaults().withSize(32L << 20).withTracer(tracer));
            List<String> list = new ArrayList<>();
            Map<String, Integer> map = new HashMap<>();
            int[] ints = new int[64];
            for (int i = 0; i < 8; i++) {
                list.add("e" + i);
                map.put("m" + i, i);
            }
            for (int i = 0; i < ints.length; i++) {
                ints[i] = (i * 37) % 64;
            }
            Roots.list = new ArrayList<>(List.of(list, map, ints, new Node(1, "n")));
            List<String> states = new ArrayList<>();
            states.add(describe(Roots.list));
            Explorer.start(tracer);
            Graph.faultSkipRegionLog = fault;
            try {
                for (int k = 0; k < OPS; k++) {
                    op(k);
                    states.add(describe(Roots.list));
                }
            } finally {
                Graph.faultSkipRegionLog = false;
            }
            assertTrue(Explorer.stop(tracer) > 0);
            pool.abandon();
            return Explorer.explore(tracer, Pools.DIR, 4, 1, heap -> {
                Map<String, Object> roots = Session.inspect(heap, ViewsExplorerTest.class.getClassLoader());
                List<?> got = (List<?>) roots.get("io.engram.tests.Roots.list");
                if (got == null) {
                    return "roots lost";
                }
                String s = describe(got);
                return states.contains(s) ? null : "not a whole number of mutations: " + s;
            });
        } finally {
            Explorer.free(tracer);
            java.nio.file.Files.deleteIfExists(p);
        }
    }
}
