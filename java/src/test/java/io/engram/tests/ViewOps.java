package io.engram.tests;

import java.util.Iterator;
import java.util.Map;
import java.util.Set;

/** Mutates views another class obtained (the registry of views is global, not per class). */
final class ViewOps {
    private ViewOps() {
    }

    static void removeFirst(Iterator<String> it) {
        it.next();
        it.remove();
    }

    static void setAll(Set<Map.Entry<String, Integer>> entries, int value, String key) {
        for (Map.Entry<String, Integer> e : entries) {
            if (e.getKey().equals(key)) {
                e.setValue(value);
            }
        }
    }
}
