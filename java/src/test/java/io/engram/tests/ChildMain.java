package io.engram.tests;

import io.engram.Engram;

import java.nio.file.Path;

/**
 * Entry point of the child JVMs the tests start. Scenarios:
 * <ul>
 * <li>{@code graph POOL}: writes the identity/sharing/cycle graph, then halts without closing</li>
 * <li>{@code bank POOL SEED OPS HALT_AT}: the Bank workload, halting at a step (-1: none, close)</li>
 * <li>{@code bank-forever POOL SEED}: the Bank workload until killed (prints "ready" once open)</li>
 * <li>{@code keyed POOL THREADS STEPS SEED HALT_AFTER}: the {@link KeyedWork} workload, halting
 *     after HALT_AFTER mutations (-1: close normally)</li>
 * <li>{@code keyed-forever POOL THREADS SEED}: the same until killed (writes POOL.ready once open)</li>
 * <li>{@code views POOL}: the {@link ViewWork} mutations, writes POOL.expected, halts (exit 3)</li>
 * <li>{@code noagent POOL}: exits 4 if opening without the agent is the clear NO_POOL error</li>
 * <li>{@code concurrent POOL THREADS OPS HALT_AFTER}: the concurrent workload, halting after
 *     HALT_AFTER appends in total (-1: close normally)</li>
 * </ul>
 */
public final class ChildMain {
    private ChildMain() {
    }

    public static void main(String[] args) throws Exception {
        Path pool = Path.of(args[1]);
        switch (args[0]) {
            case "graph" -> {
                Pools.open(pool);
                Node shared = new Node(1, "shared");
                Node a = new Node(2, "a"), b = new Node(3, "b");
                a.next = shared;
                b.next = shared;
                shared.next = a;
                shared.other = shared;
                Roots.head = a;
                Roots.second = b;
                Roots.map = new java.util.HashMap<>();
                Roots.map.put("shared", shared);
                Roots.map.put("self", Roots.map);
                Runtime.getRuntime().halt(0);
            }
            case "bank" -> {
                Engram e = Pools.open(pool);
                Bank.init();
                Bank.run(Long.parseLong(args[2]), Long.parseLong(args[3]), Long.parseLong(args[4]));
                e.close();
            }
            case "bank-forever" -> {
                Pools.open(pool);
                Bank.init();
                java.nio.file.Files.writeString(Path.of(pool + ".ready"), "ready");
                Bank.run(Long.parseLong(args[2]), Long.MAX_VALUE, -1);
            }
            case "concurrent" -> {
                Engram e = Pools.open(pool);
                Concurrent.run(Integer.parseInt(args[2]), Integer.parseInt(args[3]), Long.parseLong(args[4]));
                e.close();
            }
            case "keyed" -> {
                Engram e = Pools.open(pool);
                KeyedWork.init();
                KeyedWork.run(Integer.parseInt(args[2]), Integer.parseInt(args[3]), Long.parseLong(args[4]),
                        Long.parseLong(args[5]));
                e.close();
            }
            case "keyed-forever" -> {
                Pools.open(pool);
                KeyedWork.init();
                java.nio.file.Files.writeString(Path.of(pool + ".ready"), "ready");
                KeyedWork.run(Integer.parseInt(args[2]), Integer.MAX_VALUE, Long.parseLong(args[3]), -1);
            }
            case "views" -> {
                Pools.open(pool);
                ViewWork.init();
                ViewWork.all();
                java.nio.file.Files.writeString(Path.of(pool + ".expected"), ViewWork.describe());
                Runtime.getRuntime().halt(3);
            }
            case "noagent" -> {
                try {
                    Pools.open(pool);
                    System.exit(1);
                } catch (io.engram.EngramException e) {
                    System.exit(e.code() == io.engram.EngramException.Code.NO_POOL
                            && e.getMessage().contains("-javaagent") ? 4 : 2);
                }
            }
            default -> throw new IllegalArgumentException(args[0]);
        }
        System.exit(0);
    }
}
