package io.engram.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/**
 * Recovery's address map: every key comes back, absent keys are absent, and
 * keys a power of two apart (images of one size class) do not cluster: the
 * mean probe count is a count, not a time, so it holds on a busy machine.
 */
class LongMapTest {
    private static final long BASE = 0x7f3a_4000_0000L;

    @Test
    void stridedAddressesRoundTripWithoutClustering() {
        for (long stride : new long[] {16, 48, 1024, 1040, 4096, 8192, 65536}) {
            LongMap<Long> m = new LongMap<>();
            int n = 200_000;
            for (int j = 0; j < n; j++) {
                m.put(BASE + stride * j, (long) j);
            }
            assertEquals(n, m.size());
            for (int j = 0; j < n; j++) {
                assertEquals(j, m.get(BASE + stride * j), "stride " + stride);
            }
            assertFalse(m.containsKey(BASE - stride));
            assertNull(m.get(BASE + stride * n));
            // 24.6 with the old (k * phi) >>> 40 for a 4 KiB stride; about 1.3 with any stride now
            assertTrue(m.meanProbes() < 2.0, "stride " + stride + ": " + m.meanProbes() + " probes per key");
        }
    }

    @Test
    void replaceKeepsSizeAndZeroIsRefused() {
        LongMap<String> m = new LongMap<>();
        m.put(8, "a");
        m.put(8, "b");
        assertEquals(1, m.size());
        assertEquals("b", m.get(8));
        assertThrows(IllegalArgumentException.class, () -> m.put(0, "x"));
    }
}
