package io.engram.tests;

import io.engram.Engram;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.*;

class SmokeTest {
    @Test
    void rootSurvivesReopen() throws Exception {
        Path p = Pools.fresh("smoke");
        try (Engram e = Pools.open(p)) {
            Node a = new Node(1, "a");
            a.next = new Node(2, "b");
            a.next.next = a;
            Roots.head = a;
            assertTrue(Engram.isRecoverable(a));
            assertTrue(Engram.isRecoverable(a.next));
            a.next.value = 42;
        }
        Roots.reset();
        try (Engram e = Pools.open(p)) {
            Node a = Roots.head;
            assertNotNull(a);
            assertEquals(1, a.value);
            assertEquals("a", a.label);
            assertEquals(42, a.next.value);
            assertSame(a, a.next.next);
        }
    }
}
