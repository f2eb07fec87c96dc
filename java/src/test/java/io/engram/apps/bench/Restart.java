package io.engram.apps.bench;

import io.engram.Engram;
import io.engram.apps.kv.EngramStore;
import io.engram.apps.kv.Item;
import io.engram.apps.kv.KvMap;
import io.engram.heap.Durability;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import java.util.Random;

/**
 * Restart time with the data loaded (not a test: {@code make bench-java-restart}).
 * {@code load} fills a store with N YCSB-style records (key "user" + i, a
 * 1,000-byte value: YCSB's 10 fields of 100 bytes) through the server's
 * own store code, then closes it cleanly; {@code open} starts from that file,
 * opens the store (Engram: the engine's open plus the Java graph rebuild of
 * every item; H2: {@code MVStore.open}), reads one record to check the data
 * is there, prints the open time and the item count, and exits. The whole
 * {@code open} process is what a restart costs; time it from outside.
 *
 * <p>The durability is an option of opening, not of the pool's format: a
 * pool loaded in {@code process} mode and closed cleanly is the same file
 * an {@code msync} load would have written, only written much faster.
 *
 * <p>Usage: {@code Restart load|open engram|h2 FILE [durability] [N [UPDATES]]}: {@code load}
 * then overwrites UPDATES random records, as YCSB's update workloads do.
 */
public final class Restart {
    private Restart() {
    }

    private static Engram pool;

    static KvMap open(String store, Path file, Durability d) {
        if (store.equals("h2")) {
            return new H2Store(file, true);
        }
        pool = Engram.open(file, Engram.Options.defaults().withDurability(d).withSize(8L << 30));
        return EngramStore.attach(1024);
    }

    public static void main(String[] args) throws Exception {
        String what = args[0];
        String store = args[1];
        Path file = Path.of(args[2]);
        Durability d = Durability.valueOf(args.length > 3 ? args[3].toUpperCase(Locale.ROOT) : "MSYNC");
        if (what.equals("load")) {
            long n = Long.parseLong(args[4]);
            Files.deleteIfExists(file);
            long t0 = System.nanoTime();
            Random r = new Random(1);
            try (KvMap m = open(store, file, d)) {
                for (long i = 0; i < n; i++) {
                    byte[] v = new byte[1000];
                    r.nextBytes(v);
                    m.put("user" + i, new Item(v, 0, 0, m.nextCas("user" + i), System.currentTimeMillis()));
                }
                long updates = args.length > 5 ? Long.parseLong(args[5]) : 0;
                for (long u = 0; u < updates; u++) { // YCSB-style overwrites: each leaves an old Item behind
                    String k = "user" + r.nextLong(n);
                    byte[] v = new byte[1000];
                    r.nextBytes(v);
                    m.put(k, new Item(v, 0, 0, m.nextCas(k), System.currentTimeMillis()));
                }
            }
            if (pool != null) {
                pool.close();
            }
            System.out.printf(Locale.ROOT, "loaded %d items in %.1f s%n", n, (System.nanoTime() - t0) / 1e9);
            return;
        }
        java.lang.management.ThreadMXBean cpu = java.lang.management.ManagementFactory.getThreadMXBean();
        long c0 = cpu.getCurrentThreadCpuTime();
        long t0 = System.nanoTime();
        KvMap m = open(store, file, d);
        double openMs = (System.nanoTime() - t0) / 1e6;
        double openCpuMs = (cpu.getCurrentThreadCpuTime() - c0) / 1e6;
        if (m.get("user0") == null || m.get("user0").value.length != 1000) {
            throw new IllegalStateException("user0 is missing after the restart");
        }
        System.out.printf(Locale.ROOT, "open %.1f ms (%.1f ms CPU of the opening thread), %d items%n", openMs, openCpuMs,
                m.size());
        m.close();
        System.exit(0); // the measured process ends here: a clean close is not part of a restart
    }
}
