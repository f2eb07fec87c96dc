package io.engram.apps;

import io.engram.Engram;
import io.engram.apps.kernels.FARArray;
import io.engram.apps.kernels.FArray;
import io.engram.apps.kernels.FList;
import io.engram.apps.kernels.MArray;
import io.engram.apps.kernels.MList;
import io.engram.apps.kernels.Markings;
import io.engram.apps.kernels.Seq;
import io.engram.apps.kernels.Workload;
import io.engram.apps.kernels.explicit.XFARArray;
import io.engram.apps.kernels.explicit.XFArray;
import io.engram.apps.kernels.explicit.XFList;
import io.engram.apps.kernels.explicit.XMArray;
import io.engram.apps.kernels.explicit.XMList;
import io.engram.heap.Durability;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.function.IntFunction;
import java.util.function.Supplier;

import static org.junit.jupiter.api.Assertions.*;

/**
 * The paper's kernels: each AutoPersist kernel and its explicit twin compute
 * exactly what the plain ArrayList reference computes (read checksum and
 * final contents), run as plain volatile Java with no pool open, and come
 * back equal after the pool is closed and reopened, and go on from there.
 * The marking counts are checked against the numbers in docs/java-apps.md.
 */
class KernelsTest {
    static final int N = 96;
    static final int OPS = 1200;
    static final long SEED = 20261123;

    interface Explicit {
        AutoCloseable open(Path p, int n, Durability d);
    }

    private static void check(String name, boolean structural, IntFunction<Seq> create, Supplier<Seq> attach,
                              Runnable forget, Explicit explicit) throws Exception {
        Seq ref = new Workload.Reference(N, structural);
        Workload.fill(ref);
        long expect = Workload.run(ref, SEED, OPS);
        List<Long> contents = Workload.contents(ref);

        forget.run();
        Seq plain = create.apply(N);                     // no pool open: ordinary Java
        Workload.fill(plain);
        assertEquals(expect, Workload.run(plain, SEED, OPS), name + " volatile");
        forget.run();

        Path p = AppPools.fresh(name);
        try (Engram e = AppPools.open(p)) {
            Seq s = create.apply(N);
            Workload.fill(s);
            assertEquals(expect, Workload.run(s, SEED, OPS), name + " checksum");
            assertEquals(contents, Workload.contents(s), name + " contents");
        }
        forget.run();
        assertNull(attach.get());
        long more = Workload.run(ref, SEED + 1, OPS / 4);
        try (Engram e = AppPools.open(p)) {
            Seq s = attach.get();
            assertNotNull(s, name + " root after reopen");
            assertEquals(contents, Workload.contents(s), name + " contents after reopen");
            assertEquals(more, Workload.run(s, SEED + 1, OPS / 4), name + " goes on after reopen");
            assertEquals(Workload.contents(ref), Workload.contents(s));
        }
        forget.run();

        Path q = AppPools.fresh("x" + name);
        try (AutoCloseable c = explicit.open(q, N, Durability.PROCESS)) {
            Seq x = (Seq) c;
            Workload.fill(x);
            assertEquals(expect, Workload.run(x, SEED, OPS), name + " explicit checksum");
            assertEquals(contents, Workload.contents(x));
        }
        try (AutoCloseable c = explicit.open(q, N, Durability.PROCESS)) {
            Seq x = (Seq) c;
            assertEquals(contents, Workload.contents(x), name + " explicit after reopen");
            assertEquals(more, Workload.run(x, SEED + 1, OPS / 4));
            assertEquals(Workload.contents(ref), Workload.contents(x));
        }
    }

    @Test
    void mArray() throws Exception {
        check("MArray", false, MArray::create, MArray::attach, MArray::forget, XMArray::open);
    }

    @Test
    void mList() throws Exception {
        check("MList", true, MList::create, MList::attach, MList::forget, XMList::open);
    }

    @Test
    void farArray() throws Exception {
        check("FARArray", false, FARArray::create, FARArray::attach, FARArray::forget, XFARArray::open);
    }

    @Test
    void fArray() throws Exception {
        check("FArray", false, FArray::create, FArray::attach, FArray::forget, XFArray::open);
    }

    @Test
    void fList() throws Exception {
        check("FList", true, FList::create, FList::attach, FList::forget, XFList::open);
    }

    /** The counts reported in docs/java-apps.md, recomputed from the sources. */
    @Test
    void markingCounts() throws Exception {
        Map<String, Markings.Count> c = Markings.countAll(Path.of("src/main/java"));
        int[][] expected = {{1, 7, 5}, {3, 21, 21}, {1, 12, 6}, {1, 13, 15}, {1, 14, 19}};
        int i = 0;
        for (String k : Markings.KERNELS) {
            Markings.Count n = c.get(k);
            assertEquals(expected[i][0], n.markings(), k + " markings");
            assertEquals(expected[i][1], n.persistCalls(), k + " persistence calls");
            assertEquals(expected[i][2], n.accessCalls(), k + " pool reads/writes");
            assertTrue(n.markings() < n.persistCalls(), k);
            i++;
        }
    }
}
