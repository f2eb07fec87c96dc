package io.engram.runtime;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;

/**
 * One thread's failure-atomic region, as the Java side sees it (the pool
 * side is the heap's undo log). Nesting is flattened: only depth 0 -> 1
 * begins and 1 -> 0 commits.
 *
 * <p>Besides the heap's log of image ranges, a region keeps a Java-side
 * undo list (old field values, array elements, collection contents), so
 * that an abort leaves the Java objects equal to their restored images,
 * and the objects it made recoverable (they are forgotten on abort; their
 * images, allocated in the region, are freed by the heap's abort).
 *
 * <p>The runtime also opens implicit regions of its own: a collection
 * change outside any region is one region, so one commit
 * ({@code Graph.oneCommit}).
 */
final class RegionState {
    int depth;
    /**
     * An implicit region: one collection hook's own (Graph.oneCommit), not
     * the program's. Its conversions stay not ready until it commits.
     */
    boolean implicit;
    /** The graph whose heap region is open on this thread, or null (no pool). */
    Graph graph;
    final List<Runnable> javaUndo = new ArrayList<>();
    final Set<Long> logged = new HashSet<>();
    final List<Object> created = new ArrayList<>();
    /** Collections whose contents were already saved for undo in this region. */
    final IdentityHashMap<Object, Boolean> snapshotted = new IdentityHashMap<>();

    void clear() {
        javaUndo.clear();
        logged.clear();
        created.clear();
        snapshotted.clear();
    }
}
