package io.engram.apps.bench;

import io.engram.apps.kv.EngramStore;
import io.engram.apps.kv.KvServer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import site.ycsb.ByteArrayByteIterator;
import site.ycsb.ByteIterator;
import site.ycsb.Status;

import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.*;

/**
 * The YCSB binding against the memcached-protocol server (Engram off, no
 * pool: the benchmark's volatile store), with both of its clients: the
 * default blocking {@link TextClient} and spymemcached. Insert, read (all
 * fields and a subset), update, delete and a miss, with values holding
 * CR, LF and every byte value, so a record survives the text protocol
 * exactly. Counts outcomes only, no timing.
 */
class KvBindingTest {
    private KvServer server;

    @BeforeEach
    void start() throws Exception {
        EngramStore.forget();
        server = new KvServer(EngramStore.attach(16), 0, KvServer.DEFAULT_MAX_VALUE);
    }

    @AfterEach
    void stop() throws Exception {
        server.close();
        EngramStore.forget();
    }

    private KvBinding binding(String client) throws Exception {
        KvBinding b = new KvBinding();
        Properties p = new Properties();
        p.setProperty("kv.server", "127.0.0.1:" + server.port());
        p.setProperty("kv.client", client);
        b.setProperties(p);
        b.init();
        return b;
    }

    private static Map<String, ByteIterator> record(int seed) {
        Map<String, ByteIterator> r = new HashMap<>();
        for (int f = 0; f < 10; f++) {
            byte[] v = new byte[100 + f];
            for (int i = 0; i < v.length; i++) {
                v[i] = (byte) (seed * 31 + f * 7 + i);       // every byte value, CR and LF included
            }
            r.put("field" + f, new ByteArrayByteIterator(v));
        }
        return r;
    }

    private static Map<String, byte[]> bytes(Map<String, ByteIterator> r) {
        Map<String, byte[]> out = new HashMap<>();
        r.forEach((k, v) -> out.put(k, v.toArray()));
        return out;
    }

    private static void assertSame(Map<String, byte[]> want, Map<String, ByteIterator> got) {
        assertEquals(want.keySet(), got.keySet());
        want.forEach((k, v) -> assertArrayEquals(v, got.get(k).toArray(), k));
    }

    @ParameterizedTest
    @ValueSource(strings = {"direct", "spy"})
    void recordsRoundTrip(String client) throws Exception {
        KvBinding b = binding(client);
        try {
            Map<String, Map<String, byte[]>> want = new HashMap<>();
            for (int i = 0; i < 50; i++) {
                want.put("user" + i, bytes(record(i)));           // a ByteIterator is read once
                assertEquals(Status.OK, b.insert("usertable", "user" + i, record(i)));
            }
            for (int i = 0; i < 50; i++) {
                Map<String, ByteIterator> got = new HashMap<>();
                assertEquals(Status.OK, b.read("usertable", "user" + i, null, got));
                assertSame(want.get("user" + i), got);
            }
            Map<String, ByteIterator> some = new HashMap<>();
            assertEquals(Status.OK, b.read("usertable", "user3", Set.of("field2", "field9"), some));
            assertEquals(Set.of("field2", "field9"), some.keySet());
            assertEquals(Status.OK, b.update("usertable", "user7", record(1000)));
            Map<String, ByteIterator> got = new HashMap<>();
            assertEquals(Status.OK, b.read("usertable", "user7", null, got));
            assertSame(bytes(record(1000)), got);
            assertEquals(Status.OK, b.delete("usertable", "user7"));
            assertEquals(Status.NOT_FOUND, b.read("usertable", "user7", null, new HashMap<>()));
            assertEquals(Status.NOT_FOUND, b.delete("usertable", "user7"));
            assertEquals(Status.NOT_FOUND, b.read("usertable", "nosuchkey", null, new HashMap<>()));
        } finally {
            b.cleanup();
        }
    }

    @org.junit.jupiter.api.Test
    void unknownClientIsRefused() {
        assertThrows(site.ycsb.DBException.class, () -> binding("telnet"));
    }
}
