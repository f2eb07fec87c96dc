package io.engram.tests;

import io.engram.Engram;
import io.engram.heap.Durability;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/** Test helpers: fresh pool paths, opening with test options, child JVMs. */
public final class Pools {
    private Pools() {
    }

    static final Path DIR = Path.of(System.getProperty("engram.test.dir", "target/pools"));
    /** Test pools: 64 MiB, {@code process} durability unless {@code -Dengram.test.durability} names another. */
    static final Engram.Options OPTIONS = Engram.Options.defaults().withSize(64L << 20).withDurability(
            Durability.valueOf(System.getProperty("engram.test.durability", "PROCESS")));

    /** A path for a new pool (deleted if it exists); the roots are reset. */
    public static Path fresh(String name) throws IOException {
        Files.createDirectories(DIR);
        Path p = DIR.resolve(name + ".pool");
        Files.deleteIfExists(p);
        deleteOnExit(p);
        Roots.reset();
        return p;
    }

    /**
     * Deletes the pool file and its write-ahead log ({@code .wal}) when this JVM exits, after every test (and every
     * child JVM it waited for) is done: 64 MiB pools are not kept between runs. Set {@code -Dengram.test.keep=true}
     * to keep them for inspection.
     */
    public static void deleteOnExit(Path p) {
        if (!Boolean.getBoolean("engram.test.keep")) {
            p.toFile().deleteOnExit();
            Path.of(p + ".wal").toFile().deleteOnExit();
        }
    }

    public static Engram open(Path p) {
        return Engram.open(p, OPTIONS);
    }

    /** Closes {@code pool}, forgets the roots this JVM bound (as a restart would) and opens {@code p} again. */
    public static Engram reopen(Engram pool, Path p) {
        pool.close();
        Roots.reset();
        return open(p);
    }

    /** Runs {@code ChildMain} with {@code args} in a new JVM with the agent; returns its exit code. */
    public static int child(long timeoutSeconds, String... args) throws IOException, InterruptedException {
        Process p = start(args);
        if (!p.waitFor(timeoutSeconds, TimeUnit.SECONDS)) {
            p.destroyForcibly().waitFor();
            throw new AssertionError("child " + String.join(" ", args) + " did not finish in " + timeoutSeconds + " s");
        }
        return p.exitValue();
    }

    public static Process start(String... args) throws IOException {
        return start(true, args);
    }

    /** Starts a child JVM, with or without the agent. */
    public static Process start(boolean agent, String... args) throws IOException {
        return start(agent, (Durability) null, args);
    }

    /** Starts a child JVM whose {@link #open} uses durability {@code d} (null: this JVM's). */
    public static Process start(boolean agent, Durability d, String... args) throws IOException {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        if (agent) {
            cmd.add("-javaagent:" + System.getProperty("engram.agent.jar"));
        }
        cmd.add("--enable-native-access=ALL-UNNAMED");
        cmd.add("-Xshare:auto");
        cmd.add("-XX:TieredStopAtLevel=1");
        for (String prop : List.of("engram.lib", "engram.test.dir")) {
            if (System.getProperty(prop) != null) {
                cmd.add("-D" + prop + "=" + System.getProperty(prop));
            }
        }
        if (d != null) {
            cmd.add("-Dengram.test.durability=" + d);
        }
        cmd.add("-cp");
        cmd.add(System.getProperty("java.class.path"));
        cmd.add(ChildMain.class.getName());
        cmd.addAll(List.of(args));
        Files.createDirectories(DIR);
        return new ProcessBuilder(cmd).redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.appendTo(DIR.resolve("children.log").toFile())).start();
    }
}
