package io.engram.apps;

import io.engram.Engram;
import io.engram.apps.kernels.Seq;
import io.engram.apps.kernels.Workload;

import java.nio.file.Path;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Child JVM of {@link KernelCrashTest}: opens the pool, creates and fills
 * the kernel, prints "filled", then runs the workload; at a random operation
 * it starts a thread that halts the JVM ({@code Runtime.halt}) after a
 * random 0-2 ms, in the middle of whatever operation is running then.
 * Args: kernel, pool. Exit 3: halted; 4: the workload ended first.
 */
public final class KernelChild {
    private KernelChild() {
    }

    public static void main(String[] args) throws Exception {
        String kernel = args[0];
        Path pool = Path.of(args[1]);
        Engram e = AppPools.open(pool);
        Seq s = KernelCrashTest.create(kernel, KernelCrashTest.N);
        Workload.fill(s);
        System.out.println("filled");
        System.out.flush();
        int at = ThreadLocalRandom.current().nextInt(KernelCrashTest.OPS);
        Workload.run(s, KernelCrashTest.SEED, KernelCrashTest.OPS, k -> {
            if (k == at) {
                Thread t = new Thread(() -> {
                    java.util.concurrent.locks.LockSupport.parkNanos(ThreadLocalRandom.current().nextLong(2_000_000));
                    Runtime.getRuntime().halt(3);
                });
                t.setDaemon(true);
                t.start();
            }
        });
        Runtime.getRuntime().halt(4);                   // ran out of work before the halt: also checked
        e.close();
    }
}
