package io.engram.tests;

import io.engram.Engram;
import io.engram.heap.Durability;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * What the write barrier costs: nanoseconds per field store and per
 * collection add in each situation (not a test: run by {@code make
 * bench-java}, twice: once with this class excluded from the agent for the
 * uninstrumented baseline). Prints one line per case. With
 * {@code ENGRAM_BENCH_CLOCK=cpu} the figures are the thread's CPU time.
 */
public final class StoreCost {
    private StoreCost() {
    }

    static final int OBJECTS = 1024;

    public static void main(String[] args) throws Exception {
        Path dir = Path.of(args.length > 0 ? args[0] : "target/pools");
        Files.createDirectories(dir);
        Node[] nodes = new Node[OBJECTS];
        for (int i = 0; i < OBJECTS; i++) {
            nodes[i] = new Node(i, null);
        }
        int[] ints = new int[OBJECTS];
        report("field store, no pool open", stores(nodes, 20_000_000));
        report("int[] store, no pool open", arrayStores(ints, 20_000_000));
        if (args.length > 1 && args[1].equals("baseline")) {
            return;
        }
        if (args.length > 1 && args[1].equals("counts")) {
            counts(dir, Durability.valueOf(args.length > 2 ? args[2].toUpperCase(java.util.Locale.ROOT) : "PROCESS"));
            return;
        }
        boolean processOnly = args.length > 1 && args[1].equals("process"); // the quick run: no msync cases
        for (Durability d : processOnly ? new Durability[] {Durability.PROCESS}
                : new Durability[] {Durability.PROCESS, Durability.MSYNC}) {
            Path p = dir.resolve("storecost-" + d + ".pool");
            Files.deleteIfExists(p);
            Roots.reset();
            try (Engram e = Engram.open(p, Engram.Options.defaults().withDurability(d).withSize(1L << 30))) {
                if (d == Durability.PROCESS) {
                    report("field store, pool open, object not recoverable", stores(nodes, 20_000_000));
                    report("int[] store, pool open, no int[] recoverable", arrayStores(ints, 20_000_000));
                }
                Roots.any = nodes;
                if (d == Durability.PROCESS) {
                    Node[] others = new Node[OBJECTS];
                    for (int i = 0; i < OBJECTS; i++) {
                        others[i] = new Node(i, null);
                    }
                    report("field store, object not recoverable, its class has recoverable ones", stores(others, 20_000_000));
                }
                int n = d == Durability.PROCESS ? 2_000_000 : 20_000;
                report("field store, recoverable object, " + d, stores(nodes, n));
                report("field store in a region of 100 stores, " + d, regionStores(nodes, n));
                report("ArrayList.add (1000 elements), recoverable, " + d, adds(d == Durability.PROCESS ? 20 : 2));
                report("HashMap.put (1000 keys), recoverable, " + d, puts(d == Durability.PROCESS ? 5 : 1));
            }
        }
    }

    private static double stores(Node[] nodes, int n) {
        return timed(k -> loop(nodes, k), n);
    }

    /** ns per iteration of {@code loop(n)}, after two warm-up runs of n/4. */
    private static double timed(java.util.function.IntConsumer loop, int n) {
        for (int warm = 0; warm < 2; warm++) {
            loop.accept(n / 4);
        }
        long t0 = now();
        loop.accept(n);
        return (now() - t0) / (double) n;
    }

    private static void loop(Node[] nodes, int n) {
        for (int i = 0; i < n; i++) {
            nodes[i & (OBJECTS - 1)].value = i;
        }
    }

    private static double arrayStores(int[] a, int n) {
        return timed(k -> arrayLoop(a, k), n);
    }

    private static void arrayLoop(int[] a, int n) {
        for (int i = 0; i < n; i++) {
            a[(i * 7) & (OBJECTS - 1)] = i;
        }
    }

    private static double regionStores(Node[] nodes, int n) {
        long t0 = now();
        for (int r = 0; r < n / 100; r++) {
            int base = r * 100;
            Engram.atomic(() -> loop100(nodes, base));
        }
        return (now() - t0) / (double) (n / 100 * 100);
    }

    private static void loop100(Node[] nodes, int base) {
        for (int i = 0; i < 100; i++) {
            nodes[(base + i) & (OBJECTS - 1)].value = base + i;
        }
    }

    private static double adds(int lists) {
        long t0 = now();
        for (int l = 0; l < lists; l++) {
            List<Object> list = new ArrayList<>();
            Roots.list = list;
            for (int i = 0; i < 1000; i++) {
                list.add(i);
            }
        }
        return (now() - t0) / (double) (lists * 1000);
    }

    private static double puts(int maps) {
        long t0 = now();
        for (int m = 0; m < maps; m++) {
            java.util.Map<Object, Object> map = new java.util.HashMap<>();
            Roots.map = map;
            for (int i = 0; i < 1000; i++) {
                map.put(i, i);
            }
        }
        return (now() - t0) / (double) (maps * 1000);
    }

    /**
     * Durability points per change (not a timing): engine commits and
     * persist/fence calls (in msync mode each fence is an msync) per put of a
     * new key, per update of a key and per ArrayList.add, in process mode
     * (the counts are the same in every mode).
     */
    private static void counts(Path dir, Durability d) throws Exception {
        Path p = dir.resolve("storecost-counts.pool");
        Files.deleteIfExists(p);
        Roots.reset();
        try (Engram e = Engram.open(p, Engram.Options.defaults().withDurability(d).withSize(1L << 28))) {
            java.util.Map<Object, Object> map = new java.util.HashMap<>();
            Roots.map = map;
            java.util.List<Object> list = new java.util.ArrayList<>();
            Roots.list = list;
            map.put("warm", new Node(0, "warm"));
            int n = Integer.getInteger("engram.counts.n", 1000);
            count("HashMap.put, new String key, new Node+String value", n,
                    i -> map.put("key" + i, new Node(i, "v" + i)));
            count("HashMap.put, existing key (equal new String), new value", n,
                    i -> map.put("key" + i, new Node(i, "w" + i)));
            count("HashMap.remove", n, i -> map.remove("key" + i));
            count("ArrayList.add of a new Node", n, i -> list.add(new Node(i, null)));
        }
        Files.deleteIfExists(p);
    }

    private static void count(String what, int n, java.util.function.IntConsumer change) {
        long c0 = io.engram.heap.EngineHeap.commits();
        long f0 = io.engram.heap.EngineHeap.fences();
        for (int i = 0; i < n; i++) {
            change.accept(i);
        }
        System.out.printf("%-60s %5.2f commits %5.2f persist/fence calls per change%n", what,
                (io.engram.heap.EngineHeap.commits() - c0) / (double) n, (io.engram.heap.EngineHeap.fences() - f0) / (double) n);
    }

    /** {@code ENGRAM_BENCH_CLOCK=cpu}: this thread's CPU time (for a machine shared with other work), else wall time. */
    static final boolean CPU_CLOCK = "cpu".equals(System.getenv("ENGRAM_BENCH_CLOCK"));

    private static long now() {
        return CPU_CLOCK ? java.lang.management.ManagementFactory.getThreadMXBean().getCurrentThreadCpuTime()
                : System.nanoTime();
    }

    private static void report(String what, double ns) {
        System.out.printf("%-55s %12.1f ns%n", what, ns);
    }
}
