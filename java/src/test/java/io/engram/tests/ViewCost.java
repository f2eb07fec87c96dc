package io.engram.tests;

import io.engram.Engram;
import io.engram.heap.Durability;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.*;

/**
 * What the view, iterator and in-place-helper hooks cost, in CPU
 * nanoseconds of this thread per element or call (not a test: run by
 * {@code make bench-java-views}, once with this class excluded from the
 * agent for the uninstrumented baseline). Prints one line per case, the
 * second of two runs where a case can be repeated.
 */
public final class ViewCost {
    private ViewCost() {
    }

    private static final ThreadMXBean CPU = ManagementFactory.getThreadMXBean();
    static long sink;

    public static void main(String[] args) throws Exception {
        Path dir = Path.of(args.length > 0 ? args[0] : "target/pools");
        Files.createDirectories(dir);
        List<Object> list = new ArrayList<>();
        Map<Object, Object> map = new HashMap<>();
        for (int i = 0; i < 1000; i++) {
            list.add(i);
            map.put(i, i);
        }
        report("for-each over a 1000-element ArrayList, no pool open", warm(() -> iterate(list, 20_000)));
        report("entrySet for-each over a 1000-key HashMap, no pool open", warm(() -> entries(map, 5_000)));
        report("Arrays.sort(int[1000]), no pool open (per call)", warm(() -> sorts(new int[1000], 5_000)));
        if (args.length > 1 && args[1].equals("baseline")) {
            return;
        }
        Path p = dir.resolve("viewcost.pool");
        Files.deleteIfExists(p);
        Roots.reset();
        try (Engram e = Engram.open(p, Engram.Options.defaults().withDurability(Durability.PROCESS)
                .withSize(1L << 30))) {
            report("for-each, pool open, list not recoverable", warm(() -> iterate(list, 20_000)));
            report("entrySet for-each, pool open, map not recoverable", warm(() -> entries(map, 5_000)));
            report("Arrays.sort(int[1000]), pool open, array not recoverable", warm(() -> sorts(new int[1000], 5_000)));
            Roots.list = list;
            Roots.map = map;
            int[] arr = new int[1000];
            Roots.any = arr;
            report("for-each, recoverable list (iterator registered)", warm(() -> iterate(list, 5_000)));
            report("entrySet for-each, recoverable map (entries registered)", warm(() -> entries(map, 500)));
            report("for-each, recoverable list, after a key/entry-set view", warm(() -> iterate(list, 5_000)));
            report("Arrays.sort(int[1000]), recoverable array (one commit)", warm(() -> sorts(arr, 200)));
            Map<Object, Object> m2 = new HashMap<>(map);
            Roots.map = m2;
            m2.put("warm", 0); // builds the keyed index
            report("iterator remove of every 2nd of 1000 keys, recoverable HashMap (keyed)", keyRemoves(m2));
            List<Object> l2 = new ArrayList<>(list);
            Roots.list = l2;
            report("iterator remove of every 2nd of 1000, recoverable (per remove)", iteratorRemoves(l2));
            List<Object> l3 = new ArrayList<>(list);
            Roots.list = l3;
            report("removeIf of every 2nd of 1000, recoverable (per removed)", removeIf(l3));
        }
        Files.deleteIfExists(p);
    }

    /** The second of two runs (the first warms the JIT up). */
    private static double warm(java.util.function.DoubleSupplier run) {
        run.getAsDouble();
        return run.getAsDouble();
    }

    private static double iterate(List<Object> list, int rounds) {
        long t0 = CPU.getCurrentThreadCpuTime();
        for (int r = 0; r < rounds; r++) {
            for (Object o : list) {
                sink += (Integer) o;
            }
        }
        return (CPU.getCurrentThreadCpuTime() - t0) / (double) rounds / list.size();
    }

    private static double entries(Map<Object, Object> map, int rounds) {
        long t0 = CPU.getCurrentThreadCpuTime();
        for (int r = 0; r < rounds; r++) {
            for (Map.Entry<Object, Object> en : map.entrySet()) {
                sink += (Integer) en.getValue();
            }
        }
        return (CPU.getCurrentThreadCpuTime() - t0) / (double) rounds / map.size();
    }

    private static double sorts(int[] a, int rounds) {
        Random rnd = new Random(1);
        long t0 = CPU.getCurrentThreadCpuTime();
        for (int r = 0; r < rounds; r++) {
            a[r % a.length] = rnd.nextInt();
            Arrays.sort(a);
        }
        return (CPU.getCurrentThreadCpuTime() - t0) / (double) rounds;
    }

    private static double iteratorRemoves(List<Object> list) {
        long t0 = CPU.getCurrentThreadCpuTime();
        int removed = 0;
        for (Iterator<Object> it = list.iterator(); it.hasNext();) {
            if ((Integer) it.next() % 2 == 0) {
                it.remove();
                removed++;
            }
        }
        return (CPU.getCurrentThreadCpuTime() - t0) / (double) removed;
    }

    private static double keyRemoves(Map<Object, Object> map) {
        long t0 = CPU.getCurrentThreadCpuTime();
        int removed = 0;
        for (Iterator<Object> it = map.keySet().iterator(); it.hasNext();) {
            if (it.next() instanceof Integer i && i % 2 == 0) {
                it.remove();
                removed++;
            }
        }
        return (CPU.getCurrentThreadCpuTime() - t0) / (double) removed;
    }

    private static double removeIf(List<Object> list) {
        int before = list.size();
        long t0 = CPU.getCurrentThreadCpuTime();
        list.removeIf(o -> (Integer) o % 2 == 0);
        return (CPU.getCurrentThreadCpuTime() - t0) / (double) (before - list.size());
    }

    private static void report(String what, double ns) {
        System.out.printf("%-66s %12.1f ns (CPU)%n", what, ns);
    }
}
