package io.engram.apps;

import io.engram.Engram;
import io.engram.apps.kernels.FARArray;
import io.engram.apps.kernels.FArray;
import io.engram.apps.kernels.FList;
import io.engram.apps.kernels.MArray;
import io.engram.apps.kernels.MList;
import io.engram.apps.kernels.Seq;
import io.engram.apps.kernels.Workload;
import org.junit.jupiter.api.Test;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.*;

/**
 * Each AutoPersist kernel in a child JVM halted ({@code Runtime.halt}) at a
 * random moment of its workload; the recovered contents must be exactly the
 * reference's contents after some number of whole operations (no torn
 * update, insert or remove; MList's size equals its node count).
 */
class KernelCrashTest {
    static final int N = 48;
    static final int OPS = 1000;
    static final long SEED = 7;

    static Seq create(String kernel, int n) {
        return switch (kernel) {
            case "MArray" -> MArray.create(n);
            case "MList" -> MList.create(n);
            case "FARArray" -> FARArray.create(n);
            case "FArray" -> FArray.create(n);
            case "FList" -> FList.create(n);
            default -> throw new IllegalArgumentException(kernel);
        };
    }

    static Seq attach(String kernel) {
        return switch (kernel) {
            case "MArray" -> MArray.attach();
            case "MList" -> MList.attach();
            case "FARArray" -> FARArray.attach();
            case "FArray" -> FArray.attach();
            default -> FList.attach();
        };
    }

    static void forget() {
        MArray.forget();
        MList.forget();
        FARArray.forget();
        FArray.forget();
        FList.forget();
    }

    /** Every state the reference passes through: after 0, 1, ..., OPS operations. */
    static Set<List<Long>> states(boolean structural) {
        return Workload.states(N, structural, SEED, OPS);
    }

    @Test
    void haltedKernelsRecoverToAWholeOperation() throws Exception {
        int halted = 0;
        for (String kernel : new String[] {"MArray", "MList", "FARArray", "FArray", "FList"}) {
            Set<List<Long>> states = states(kernel.equals("MList") || kernel.equals("FList"));
            Path pool = AppPools.fresh("crash-" + kernel);
            List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                    "-javaagent:" + System.getProperty("engram.agent.jar"), "--enable-native-access=ALL-UNNAMED",
                    "-XX:TieredStopAtLevel=1", "-Dengram.lib=" + System.getProperty("engram.lib"),
                    "-Dengram.test.dir=" + AppPools.DIR, "-cp", System.getProperty("java.class.path"),
                    KernelChild.class.getName(), kernel, pool.toString()));
            Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
            StringBuilder log = new StringBuilder();
            try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream()))) {
                r.lines().forEach(l -> log.append(l).append('\n'));
            }
            assertTrue(p.waitFor(120, TimeUnit.SECONDS), kernel + " child did not end");
            assertTrue(log.toString().contains("filled"), kernel + " child: " + log);
            assertTrue(p.exitValue() == 3 || p.exitValue() == 4, kernel + " child exit " + p.exitValue() + ": " + log);
            halted += p.exitValue() == 3 ? 1 : 0;
            forget();
            try (Engram e = AppPools.open(pool)) {
                Seq s = attach(kernel);
                assertNotNull(s, kernel + " root after the halt");
                List<Long> got = Workload.contents(s);
                assertTrue(states.contains(got), kernel + " recovered a state no whole number of operations gives: " + got);
            }
            forget();
        }
        assertTrue(halted >= 1, "no child was halted mid-workload");
    }
}
