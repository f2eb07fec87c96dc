package io.engram.runtime;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.engram.Engram;
import io.engram.tests.Kinds;
import io.engram.tests.Node;
import io.engram.tests.Pools;
import io.engram.tests.Roots;

import java.nio.file.Files;
import java.nio.file.Path;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * When the store hooks' class guards fail and when they are re-armed: at
 * the first conversion of a class (a user class, an array kind), at
 * recovery, never for JDK classes, and re-armed when the pool closes.
 * (This class is in the runtime's package, which the agent does not
 * instrument: its own stores have no hooks; conversions go through the API.)
 */
class StoreGuardsTest {
    @AfterEach
    void close() {
        Roots.reset();
    }

    @Test
    void guardsFailAtTheFirstConversionAndAtRecoveryAndAreReArmedAtClose() throws Exception {
        Path p = Pools.fresh("store-guards");
        try (Engram e = Pools.open(p)) {
            assertFalse(StoreGuards.unguarded(Node.class), "guarded before any conversion");
            assertFalse(StoreGuards.unguarded(long[].class));
            assertTrue(StoreGuards.unguarded(String.class), "a JDK class has no guard");
            Engram.makeRecoverable(new Node(1, "x"));
            assertTrue(StoreGuards.unguarded(Node.class), "failed by the first conversion");
            assertFalse(StoreGuards.unguarded(long[].class), "another kind keeps its guard");
            Engram.makeRecoverable(new long[] {1});
            assertTrue(StoreGuards.unguarded(long[].class));
            assertFalse(StoreGuards.unguarded(Kinds.Base.class));
            Engram.makeRecoverable(new Kinds.Derived());
            assertTrue(StoreGuards.unguarded(Kinds.Base.class), "a subclass's object fails its superclasses' guards");
        }
        assertFalse(StoreGuards.unguarded(Kinds.Base.class), "re-armed at close");
        assertFalse(StoreGuards.unguarded(Node.class), "re-armed at close");
        assertFalse(StoreGuards.unguarded(long[].class), "re-armed at close");

        Roots.head = new Node(2, "y"); // a plain store: the open persists assigned roots
        try (Engram e = Pools.open(p)) {
            assertTrue(StoreGuards.unguarded(Node.class), "failed by the open's conversion of an assigned root");
        }
        Roots.reset();
        try (Engram e = Pools.open(p)) {
            assertTrue(Roots.head != null && Roots.head.value == 2, "the root came back");
            assertTrue(StoreGuards.unguarded(Node.class), "failed by recovery");
        }
        assertFalse(StoreGuards.unguarded(Node.class), "re-armed at close");
        Files.deleteIfExists(p);
    }
}
