package io.engram.apps.kernels;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Counts, over the kernels' sources, what persistence costs the programmer:
 * in an AutoPersist kernel the markings ({@code @DurableRoot},
 * {@code @Unrecoverable}, {@code Engram.atomic(}, {@code
 * Engram.makeRecoverable(}); in its explicit twin every call on the Heap
 * seam ({@code heap.x(}), split into persistence calls (allocation, freeing,
 * logging, regions, flush/fence/persist, roots, types) and plain pool
 * reads/writes. Comments are stripped first. Run as a program it prints the
 * table for docs/java-apps.md; {@code KernelsTest} checks the counts.
 */
public final class Markings {
    private Markings() {
    }

    public static final String[] KERNELS = {"MArray", "MList", "FARArray", "FArray", "FList"};
    private static final Pattern MARK = Pattern.compile(
            "@DurableRoot\\b|@Unrecoverable\\b|\\bEngram\\.atomic\\(|\\bEngram\\.makeRecoverable\\(");
    private static final Pattern CALL = Pattern.compile("\\bheap\\.(\\w+)\\(");
    private static final java.util.Set<String> ACCESS = java.util.Set.of("getLong", "putLong", "read", "write", "close");

    /** Counts for one kernel: markings; explicit persistence calls; explicit pool reads/writes. */
    public record Count(String kernel, int markings, int persistCalls, int accessCalls) {
        public int explicitCalls() {
            return persistCalls + accessCalls;
        }
    }

    /** Source text without comments (block, line; string literals here hold no comment markers). */
    static String strip(String src) {
        return src.replaceAll("(?s)/\\*.*?\\*/", " ").replaceAll("//[^\\n]*", " ");
    }

    public static Count count(Path srcRoot, String kernel) throws IOException {
        Path dir = srcRoot.resolve("io/engram/apps/kernels");
        String auto = strip(Files.readString(dir.resolve(kernel + ".java")));
        String expl = strip(Files.readString(dir.resolve("explicit/X" + kernel + ".java")));
        int marks = 0;
        for (Matcher m = MARK.matcher(auto); m.find();) {
            marks++;
        }
        int persist = 0;
        int access = 0;
        for (Matcher m = CALL.matcher(expl); m.find();) {
            if (ACCESS.contains(m.group(1))) {
                access++;
            } else {
                persist++;
            }
        }
        return new Count(kernel, marks, persist, access);
    }

    public static Map<String, Count> countAll(Path srcRoot) throws IOException {
        Map<String, Count> out = new LinkedHashMap<>();
        for (String k : KERNELS) {
            out.put(k, count(srcRoot, k));
        }
        return out;
    }

    /** Prints the table (Markdown). Argument: the source root (default src/main/java). */
    public static void main(String[] args) throws IOException {
        Path root = Path.of(args.length > 0 ? args[0] : "src/main/java");
        System.out.println("| kernel | AutoPersist markings | explicit: persistence calls | explicit: pool reads/writes | explicit: all Heap calls |");
        System.out.println("|---|---|---|---|---|");
        int m = 0;
        int p = 0;
        int a = 0;
        for (Count c : countAll(root).values()) {
            System.out.printf("| %s | %d | %d | %d | %d |%n", c.kernel(), c.markings(), c.persistCalls(), c.accessCalls(), c.explicitCalls());
            m += c.markings();
            p += c.persistCalls();
            a += c.accessCalls();
        }
        System.out.printf("| **total** | **%d** | **%d** | **%d** | **%d** |%n", m, p, a, p + a);
    }
}
