package io.engram.apps.bench;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The YCSB benchmark of the memcached-protocol server (not a test: run by
 * {@code make bench-java-apps}). For each store (off, h2, engram) and thread
 * count: a fresh server JVM ({@link BenchServer}), YCSB's own client
 * ({@code site.ycsb.Client}, CoreWorkload, in its own JVM, through
 * {@link KvBinding}) loads the records and runs workloads A, B, C, F, D;
 * then the server is stopped and started again on the loaded data, and the
 * restart (time to open the store, and to the first served request) is
 * measured. Writes {@code results.csv} and a Markdown table, and draws the
 * plots ({@link Charts}).
 *
 * <p>Usage: {@code YcsbBench OUTDIR RECORDS OPS THREADS(1,2) STORES(off,h2,engram) [engram-durability]};
 * {@code -Dengram.bench.dir=DIR} puts the store files in DIR (default OUTDIR),
 * e.g. /dev/shm for the pmem setup; {@code -Dengram.bench.client=direct|spy} the
 * binding's client ({@link KvBinding}, default direct).
 */
public final class YcsbBench {
    private YcsbBench() {
    }

    static final String CLIENT = System.getProperty("engram.bench.client", "direct");

    static final Map<String, String> WORKLOADS = new LinkedHashMap<>();

    static {
        WORKLOADS.put("A", "readproportion=0.5 updateproportion=0.5 requestdistribution=zipfian");
        WORKLOADS.put("B", "readproportion=0.95 updateproportion=0.05 requestdistribution=zipfian");
        WORKLOADS.put("C", "readproportion=1 updateproportion=0 requestdistribution=zipfian");
        WORKLOADS.put("F", "readproportion=0.5 updateproportion=0 readmodifywriteproportion=0.5 requestdistribution=zipfian");
        WORKLOADS.put("D", "readproportion=0.95 updateproportion=0 insertproportion=0.05 requestdistribution=latest");
    }

    record Server(Process p, int port, double openMs, long items) {
    }

    static String java() {
        return Path.of(System.getProperty("java.home"), "bin", "java").toString();
    }

    static Server startServer(String store, Path file, String durability) throws IOException {
        List<String> cmd = new ArrayList<>(List.of(java(), "-javaagent:" + System.getProperty("engram.agent.jar"),
                "--enable-native-access=ALL-UNNAMED", "-Xmx2g", "-Dengram.lib=" + System.getProperty("engram.lib"),
                "-cp", System.getProperty("java.class.path"), BenchServer.class.getName(), store, file.toString(), durability));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream()));
        String line;
        while ((line = r.readLine()) != null) {
            if (line.startsWith("ready ")) {
                String[] t = line.split(" ");
                Thread drain = new Thread(() -> {
                    try {
                        r.lines().forEach(l -> System.err.println("server: " + l));
                    } catch (java.io.UncheckedIOException e) {
                        // the server is gone
                    }
                });
                drain.setDaemon(true);
                drain.start();
                return new Server(p, Integer.parseInt(t[1]), Double.parseDouble(t[2]), Long.parseLong(t[3]));
            }
            System.err.println("server: " + line);
        }
        throw new IOException("server " + store + " exited before it was ready");
    }

    static void stop(Server s) throws InterruptedException {
        s.p().destroy();                                   // SIGTERM: the store is closed cleanly
        if (!s.p().waitFor(600, TimeUnit.SECONDS)) {
            s.p().destroyForcibly().waitFor();
        }
    }

    /** Runs YCSB's client; returns its overall throughput (ops/s). */
    static double ycsb(int port, boolean load, String workload, long records, long ops, int threads)
            throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>(List.of(java(), "-cp", System.getProperty("java.class.path"),
                "site.ycsb.Client", load ? "-load" : "-t", "-db", KvBinding.class.getName(),
                "-threads", String.valueOf(threads), "-p", "workload=site.ycsb.workloads.CoreWorkload",
                "-p", "kv.server=127.0.0.1:" + port, "-p", "kv.client=" + CLIENT, "-p", "recordcount=" + records,
                "-p", "operationcount=" + (load ? records : ops), "-p", "fieldcount=10", "-p", "fieldlength=100"));
        for (String kv : WORKLOADS.get(workload).split(" ")) {
            cmd.add("-p");
            cmd.add(kv);
        }
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        double thr = Double.NaN;
        long errors = 0;
        try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream()))) {
            String line;
            while ((line = r.readLine()) != null) {
                if (line.startsWith("[OVERALL], Throughput(ops/sec)")) {
                    thr = Double.parseDouble(line.split(", ")[2]);
                } else if (line.matches("\\[[A-Z-]+-FAILED\\], Operations, .*")) {
                    errors += Long.parseLong(line.split(", ")[2]);
                }
            }
        }
        p.waitFor();
        if (errors > 0 || Double.isNaN(thr)) {
            System.err.println("ycsb " + (load ? "load" : workload) + ": " + errors + " failed operations");
        }
        return thr;
    }

    public static void main(String[] args) throws Exception {
        Path out = Path.of(args[0]);
        long records = Long.parseLong(args[1]);
        long ops = Long.parseLong(args[2]);
        String[] threads = args[3].split(",");
        String[] stores = args[4].split(",");
        String durability = args.length > 5 ? args[5] : "msync";
        Files.createDirectories(out);
        Path data = Path.of(System.getProperty("engram.bench.dir", out.toString())); // where the pools/H2 files go
        Files.createDirectories(data);
        Path csv = out.resolve("results.csv");
        List<String> rows = new ArrayList<>();
        rows.add("store,threads,phase,value,unit");
        for (String store : stores) {
            for (String th : threads) {
                int t = Integer.parseInt(th);
                Path file = data.resolve("kv-" + store + ".db");
                Files.deleteIfExists(file);
                Server s = startServer(store, file, durability);
                rows.add(String.join(",", store, th, "load", fmt(ycsb(s.port(), true, "A", records, ops, t)), "ops/s"));
                for (String w : WORKLOADS.keySet()) {
                    rows.add(String.join(",", store, th, w, fmt(ycsb(s.port(), false, w, records, ops, t)), "ops/s"));
                    System.err.println(rows.getLast());
                }
                stop(s);
                if (!store.equals("off") && t == 1) {
                    long t0 = System.nanoTime();
                    Server again = startServer(store, file, durability);
                    double wall = (System.nanoTime() - t0) / 1e6;
                    rows.add(String.join(",", store, th, "restart-open", fmt(again.openMs()), "ms"));
                    rows.add(String.join(",", store, th, "restart-jvm", fmt(wall), "ms"));
                    rows.add(String.join(",", store, th, "restart-items", String.valueOf(again.items()), "items"));
                    stop(again);
                }
                Files.write(csv, rows);
                Files.deleteIfExists(file);
            }
        }
        Files.write(csv, rows);
        Charts.write(out, rows);
        Charts.markdown(out, rows, "YCSB: " + records + " records, " + ops + " operations per workload, engram in "
                + durability + " mode, stores " + where(data));
        System.out.println(String.join("\n", rows));
    }

    /**
     * Where the store files were, for a title: the file system type and the
     * directory relative to the working directory (or only its name), never
     * an absolute path (results.md is committed).
     */
    static String where(Path data) throws IOException {
        Path cwd = Path.of("").toAbsolutePath();
        Path abs = data.toAbsolutePath().normalize();
        String dir = abs.startsWith(cwd) ? cwd.relativize(abs).toString() : String.valueOf(abs.getFileName());
        return "on " + Files.getFileStore(abs).type() + " (" + dir + ")";
    }

    static String fmt(double v) {
        return String.format(java.util.Locale.ROOT, "%.1f", v);
    }
}
