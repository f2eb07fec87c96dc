package io.engram.apps.bench;

import io.engram.Engram;
import io.engram.apps.kv.EngramStore;
import io.engram.apps.kv.KvMap;
import io.engram.apps.kv.KvServer;
import io.engram.heap.Durability;

import java.nio.file.Path;

/**
 * The benchmark's server JVM: the memcached-protocol server over one store,
 * {@code off} (EngramStore, no pool: volatile HashMaps), {@code engram}
 * (EngramStore under a pool, {@code --durability}), {@code h2} (H2Store,
 * synced per change). Prints "ready PORT OPEN_MS ITEMS" once serving
 * (OPEN_MS: opening the store, i.e. recovery when the data is there) and
 * closes the store on SIGTERM.
 *
 * <p>Usage: {@code BenchServer off|engram|h2 FILE [durability]}
 */
public final class BenchServer {
    private BenchServer() {
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        Path file = Path.of(args[1]);
        long t0 = System.nanoTime();
        Engram pool = null;
        KvMap store;
        switch (mode) {
            case "off" -> store = EngramStore.attach(1024);
            case "engram" -> {
                Durability d = Durability.valueOf(args.length > 2 ? args[2].toUpperCase(java.util.Locale.ROOT) : "MSYNC");
                pool = Engram.open(file, Engram.Options.defaults().withDurability(d).withSize(8L << 30));
                store = EngramStore.attach(1024);
            }
            case "h2" -> store = new H2Store(file, true);
            default -> throw new IllegalArgumentException(mode);
        }
        double openMs = (System.nanoTime() - t0) / 1e6;
        KvServer server = new KvServer(store, 0, KvServer.DEFAULT_MAX_VALUE);
        System.out.printf("ready %d %.1f %d%n", server.port(), openMs, store.size());
        System.out.flush();
        Engram p = pool;
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                server.close();
                store.close();
                if (p != null) {
                    p.close();
                }
            } catch (Exception e) {
                e.printStackTrace();
            }
        }));
        Thread.currentThread().join();
    }
}
