package io.engram.apps;

import io.engram.Engram;
import io.engram.heap.Durability;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** Test helpers for the apps: fresh pool paths under the test pool directory, test options. */
final class AppPools {
    private AppPools() {
    }

    static final Path DIR = Path.of(System.getProperty("engram.test.dir", "target/pools"));
    static final Engram.Options OPTIONS = Engram.Options.defaults().withSize(256L << 20).withDurability(Durability.PROCESS);

    /** A path for a new pool (deleted if it exists). */
    static Path fresh(String name) throws IOException {
        Files.createDirectories(DIR);
        Path p = DIR.resolve("apps-" + name + ".pool");
        Files.deleteIfExists(p);
        io.engram.tests.Pools.deleteOnExit(p);
        return p;
    }

    static Engram open(Path p) {
        return Engram.open(p, OPTIONS);
    }
}
