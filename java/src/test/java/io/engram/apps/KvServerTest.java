package io.engram.apps;

import io.engram.Engram;
import io.engram.apps.kv.EngramStore;
import io.engram.apps.kv.KvServer;
import net.spy.memcached.AddrUtil;
import net.spy.memcached.CASResponse;
import net.spy.memcached.CASValue;
import net.spy.memcached.ConnectionFactoryBuilder;
import net.spy.memcached.MemcachedClient;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.io.BufferedInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.*;

/**
 * The memcached-protocol server over HashMaps reached from a durable root:
 * every command by hand over a socket (exact replies), bad input (protocol
 * errors, the connection and the server go on), a real client library
 * (spymemcached), and a restart with Engram on (data survives) and off
 * (data gone).
 */
class KvServerTest {
    private Engram pool;
    private KvServer server;
    private Path path;

    @BeforeEach
    void start() throws Exception {
        EngramStore.forget();
        path = AppPools.fresh("kv");
        pool = AppPools.open(path);
        server = new KvServer(EngramStore.attach(64), 0, 4096);
    }

    @AfterEach
    void stop() throws Exception {
        if (server != null) {
            server.close();
        }
        if (pool != null) {
            pool.close();
        }
        EngramStore.forget();
    }

    /** A raw text-protocol connection. */
    static final class Conn implements AutoCloseable {
        final Socket s;
        final InputStream in;
        final OutputStream out;

        Conn(int port) throws IOException {
            s = new Socket(InetAddress.getLoopbackAddress(), port);
            s.setSoTimeout(30_000);
            in = new BufferedInputStream(s.getInputStream());
            out = s.getOutputStream();
        }

        void send(String raw) throws IOException {
            out.write(raw.getBytes(StandardCharsets.ISO_8859_1));
            out.flush();
        }

        String line() throws IOException {
            StringBuilder b = new StringBuilder();
            int c;
            while ((c = in.read()) != '\n') {
                if (c < 0) {
                    return b.isEmpty() ? null : b.toString();
                }
                b.append((char) c);
            }
            assertEquals('\r', b.charAt(b.length() - 1), "lines end in CRLF");
            return b.substring(0, b.length() - 1);
        }

        /** Sends one command and returns the first reply line. */
        String cmd(String raw) throws IOException {
            send(raw + "\r\n");
            return line();
        }

        @Override
        public void close() throws IOException {
            s.close();
        }
    }

    @Test
    void everyCommandByHand() throws Exception {
        try (Conn c = new Conn(server.port())) {
            assertEquals("VERSION", c.cmd("version").split(" ")[0]);
            assertEquals("END", c.cmd("get a"));
            assertEquals("STORED", c.cmd("set a 5 0 3\r\nabc"));
            assertEquals("VALUE a 5 3", c.cmd("get a"));
            assertEquals("abc", c.line());
            assertEquals("END", c.line());
            assertEquals("NOT_STORED", c.cmd("add a 0 0 1\r\nx"));
            assertEquals("STORED", c.cmd("add b 0 0 1\r\nx"));
            assertEquals("NOT_STORED", c.cmd("replace zz 0 0 1\r\nx"));
            assertEquals("STORED", c.cmd("replace b 7 0 2\r\nyy"));
            assertEquals("STORED", c.cmd("append a 0 0 2\r\nde"));
            assertEquals("STORED", c.cmd("prepend a 0 0 2\r\n01"));
            assertEquals("NOT_STORED", c.cmd("append zz 0 0 1\r\nx"));
            String[] v = c.cmd("gets a b zz").split(" ");
            assertEquals(5, v.length);
            assertEquals("01abcde", c.line());
            long casA = Long.parseLong(v[4]);
            String[] vb = c.line().split(" ");
            assertEquals("VALUE b 7 2", String.join(" ", vb[0], vb[1], vb[2], vb[3]));
            assertEquals("yy", c.line());
            assertEquals("END", c.line());
            assertEquals("EXISTS", c.cmd("cas a 0 0 1 " + (casA + 1) + "\r\nq"));
            assertEquals("STORED", c.cmd("cas a 9 0 1 " + casA + "\r\nq"));
            assertEquals("EXISTS", c.cmd("cas a 9 0 1 " + casA + "\r\nr"));
            assertEquals("NOT_FOUND", c.cmd("cas zz 0 0 1 1\r\nq"));
            assertEquals("STORED", c.cmd("set n 0 0 2\r\n10"));
            assertEquals("15", c.cmd("incr n 5"));
            assertEquals("0", c.cmd("decr n 100"));
            assertEquals("STORED", c.cmd("set n 0 0 20\r\n18446744073709551615"));
            assertEquals("0", c.cmd("incr n 1"), "incr wraps at 2^64");
            assertEquals("NOT_FOUND", c.cmd("incr zz 1"));
            assertEquals("CLIENT_ERROR cannot increment or decrement non-numeric value", c.cmd("incr a 1"));
            assertEquals("CLIENT_ERROR invalid numeric delta argument", c.cmd("incr n x"));
            assertEquals("TOUCHED", c.cmd("touch a 100"));
            assertEquals("NOT_FOUND", c.cmd("touch zz 100"));
            assertEquals("DELETED", c.cmd("delete b"));
            assertEquals("NOT_FOUND", c.cmd("delete b"));
            c.send("set q 0 0 1 noreply\r\nz\r\n");
            assertEquals("VALUE q 0 1", c.cmd("get q"));
            assertEquals("z", c.line());
            assertEquals("END", c.line());
            assertEquals("STORED", c.cmd("set gone 0 -1 1\r\nx"));
            assertEquals("END", c.cmd("get gone"), "a negative exptime expires at once");
            assertEquals("STAT pid", c.cmd("stats").substring(0, 8));
            String l;
            Map<String, String> stats = new HashMap<>();
            while (!(l = c.line()).equals("END")) {
                String[] kv = l.split(" ");
                stats.put(kv[1], kv[2]);
            }
            assertEquals("3", stats.get("curr_items"));
            assertEquals("OK", c.cmd("flush_all"));
            assertEquals("END", c.cmd("get a n q"));
            assertEquals("OK", c.cmd("verbosity 1"));
            c.send("quit\r\n");
            assertNull(c.line(), "quit closes the connection");
        }
    }

    @Test
    void badInputGetsProtocolErrors() throws Exception {
        try (Conn c = new Conn(server.port())) {
            assertEquals("ERROR", c.cmd("bogus a b"));
            assertEquals("ERROR", c.cmd(""));
            assertEquals("ERROR", c.cmd("get"));
            assertEquals("CLIENT_ERROR bad command line format", c.cmd("set a x 0 1"));
            assertEquals("CLIENT_ERROR bad command line format", c.cmd("set a 0 0 -1"));
            assertEquals("CLIENT_ERROR bad command line format", c.cmd("set a 0 0"));
            assertEquals("CLIENT_ERROR bad command line format", c.cmd("set a 0 0 1 maybe"));
            assertEquals("CLIENT_ERROR bad command line format", c.cmd("get " + "k".repeat(251)));
            assertEquals("CLIENT_ERROR bad command line format", c.cmd("delete"));
            assertEquals("CLIENT_ERROR bad data chunk", c.cmd("set a 0 0 1\r\nxyz"));
            assertEquals("ERROR", c.line(), "the rest of the bad chunk is read as a command");
            String big = "v".repeat(5000);
            assertEquals("SERVER_ERROR object too large for cache", c.cmd("set big 0 0 5000\r\n" + big));
            assertEquals("END", c.cmd("get big"), "the oversized value was dropped, its data skipped");
            assertEquals("STORED", c.cmd("set ok 0 0 2\r\nok"), "the connection goes on");
        }
        try (Conn c = new Conn(server.port())) {
            c.send("get " + "x".repeat(3000) + "\r\n");
            assertEquals("CLIENT_ERROR line too long", c.line());
            assertNull(c.line(), "a line over the limit closes the connection");
        }
        try (Conn c = new Conn(server.port())) {
            assertEquals("VALUE ok 0 2", c.cmd("get ok"), "the server goes on");
        }
    }

    @Test
    void realClientLibrary() throws Exception {
        MemcachedClient mc = new MemcachedClient(new ConnectionFactoryBuilder()
                .setProtocol(ConnectionFactoryBuilder.Protocol.TEXT).setOpTimeout(30_000).build(),
                AddrUtil.getAddresses("127.0.0.1:" + server.port()));
        try {
            for (int i = 0; i < 200; i++) {
                assertTrue(mc.set("key" + i, 0, "value" + i).get());
            }
            for (int i = 0; i < 200; i++) {
                assertEquals("value" + i, mc.get("key" + i));
            }
            Map<String, Object> bulk = mc.getBulk("key1", "key2", "nokey");
            assertEquals(2, bulk.size());
            assertFalse(mc.add("key1", 0, "x").get());
            assertTrue(mc.replace("key1", 0, "y").get());
            CASValue<Object> cv = mc.gets("key1");
            assertEquals("y", cv.getValue());
            assertEquals(CASResponse.OK, mc.cas("key1", cv.getCas(), "z"));
            assertEquals(CASResponse.EXISTS, mc.cas("key1", cv.getCas(), "w"));
            assertEquals("z", mc.get("key1"));
            assertTrue(mc.append(0, "key2", "!").get());
            assertEquals("value2!", mc.get("key2"));
            assertEquals(10, mc.incr("ctr", 1, 10));
            assertEquals(13, mc.incr("ctr", 3));
            assertEquals(11, mc.decr("ctr", 2));
            assertTrue(mc.delete("key3").get());
            assertNull(mc.get("key3"));
            assertTrue(mc.touch("key4", 1000).get());
            assertFalse(mc.getVersions().isEmpty());
            assertTrue(mc.flush().get());
            assertNull(mc.get("key5"));
        } finally {
            mc.shutdown();
        }
    }

    private static long casOf(Conn c, String key) throws Exception {
        String[] v = c.cmd("gets " + key).split(" ");
        c.line(); // the data
        c.line(); // END
        return Long.parseLong(v[4]);
    }

    @Test
    void dataSurvivesRestartWithEngramOn() throws Exception {
        long casBefore;
        try (Conn c = new Conn(server.port())) {
            for (int i = 0; i < 300; i++) {
                assertEquals("STORED", c.cmd("set k" + i + " " + i + " 0 " + ("v" + i).length() + "\r\nv" + i));
            }
            assertEquals("DELETED", c.cmd("delete k7"));
            assertEquals("STORED", c.cmd("set ctr 0 0 1\r\n7"));
            assertEquals("12", c.cmd("incr ctr 5"));
            casBefore = casOf(c, "k1");
        }
        server.close();
        pool.close();
        EngramStore.forget();
        pool = AppPools.open(path);
        server = new KvServer(EngramStore.attach(64), 0, 4096);
        try (Conn c = new Conn(server.port())) {
            assertEquals("13", c.cmd("incr ctr 1"), "the counter came back as 12");
            // the item keeps its unique across the restart; uniques handed out after it are larger than any before
            assertEquals(casBefore, casOf(c, "k1"));
            assertEquals("STORED", c.cmd("set k0 0 0 1\r\nz"));
            assertTrue(casOf(c, "k0") > casBefore, "a unique after the restart is larger than one before it");
            assertEquals("STORED", c.cmd("cas k1 1 0 2 " + casBefore + "\r\nv1"));
            assertEquals("STORED", c.cmd("set k0 0 0 2\r\nv0"));
            for (int i = 0; i < 300; i++) {
                String first = c.cmd("get k" + i);
                if (i == 7) {
                    assertEquals("END", first);
                    continue;
                }
                assertEquals("VALUE k" + i + " " + i + " " + ("v" + i).length(), first);
                assertEquals("v" + i, c.line());
                assertEquals("END", c.line());
            }
        }
    }

    @Test
    void dataIsGoneWithEngramOff() throws Exception {
        server.close();
        pool.close();
        pool = null;
        EngramStore.forget();
        server = new KvServer(EngramStore.attach(64), 0, 4096);   // no pool: volatile HashMaps
        try (Conn c = new Conn(server.port())) {
            assertEquals("STORED", c.cmd("set a 0 0 1\r\nx"));
        }
        assertFalse(Engram.isRecoverable(new Object()));
        server.close();
        EngramStore.forget();
        server = new KvServer(EngramStore.attach(64), 0, 4096);
        try (Conn c = new Conn(server.port())) {
            assertEquals("END", c.cmd("get a"));
        }
    }
}
