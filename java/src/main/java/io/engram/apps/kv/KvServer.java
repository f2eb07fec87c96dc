package io.engram.apps.kv;

import io.engram.Engram;
import io.engram.heap.Durability;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Path;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A memcached-protocol key-value server (QuickCached in the AutoPersist
 * paper): one thread per connection running {@link Protocol} over a
 * {@link KvMap}. {@code main} serves {@link EngramStore}, with Engram on
 * ({@code --pool FILE}: the HashMaps live under a durable root and survive a
 * restart) or off (no pool: volatile HashMaps, the same code).
 *
 * <p>Usage: {@code KvServer [--port 11211] [--pool FILE] [--durability msync|process|...] [--max-value BYTES]}
 */
public final class KvServer implements AutoCloseable {
    public static final long DEFAULT_MAX_VALUE = 1L << 20;
    private final KvMap store;
    private final long maxValue;
    private final ServerSocket server;
    private final Protocol.Stats stats = new Protocol.Stats();
    private final Set<Socket> clients = ConcurrentHashMap.newKeySet();
    private final Thread acceptor;

    /** Binds to 127.0.0.1:{@code port} (0: any free port) and starts accepting. */
    public KvServer(KvMap store, int port, long maxValue) throws IOException {
        this.store = store;
        this.maxValue = maxValue;
        this.server = new ServerSocket();
        server.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 128);
        acceptor = new Thread(this::acceptLoop, "kv-accept");
        acceptor.setDaemon(true);
        acceptor.start();
    }

    public int port() {
        return server.getLocalPort();
    }

    private void acceptLoop() {
        while (!server.isClosed()) {
            try {
                Socket s = server.accept();
                s.setTcpNoDelay(true);
                clients.add(s);
                Thread t = new Thread(() -> serve(s), "kv-conn");
                t.setDaemon(true);
                t.start();
            } catch (IOException e) {
                return;                                   // closed
            }
        }
    }

    private void serve(Socket s) {
        try (s) {
            new Protocol(store, maxValue, stats, new BufferedInputStream(s.getInputStream(), 1 << 16),
                    new BufferedOutputStream(s.getOutputStream(), 1 << 16)).serve();
        } catch (IOException e) {
            // the client went away
        } finally {
            clients.remove(s);
        }
    }

    /** Stops accepting, closes every connection and waits for the acceptor. */
    @Override
    public void close() throws IOException {
        server.close();
        for (Socket s : clients) {
            s.close();
        }
        try {
            acceptor.join(10_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    public static void main(String[] args) throws Exception {
        int port = 11211;
        Path pool = null;
        Durability d = Durability.AUTO;
        long max = DEFAULT_MAX_VALUE;
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--port" -> port = Integer.parseInt(args[i + 1]);
                case "--pool" -> pool = Path.of(args[i + 1]);
                case "--durability" -> d = Durability.valueOf(args[i + 1].toUpperCase(java.util.Locale.ROOT));
                case "--max-value" -> max = Long.parseLong(args[i + 1]);
                default -> throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        Engram pm = pool == null ? null : Engram.open(pool, Engram.Options.defaults().withDurability(d).withSize(4L << 30));
        KvServer s = new KvServer(EngramStore.attach(1024), port, max);
        System.out.println("engram-kv listening on 127.0.0.1:" + s.port() + (pm == null ? " (Engram off)" : " (pool " + pool + ")"));
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                s.close();
            } catch (IOException e) {
                // exiting anyway
            }
            if (pm != null) {
                pm.close();
            }
        }));
        Thread.currentThread().join();
    }
}
