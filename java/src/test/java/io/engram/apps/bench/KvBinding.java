package io.engram.apps.bench;

import net.spy.memcached.AddrUtil;
import net.spy.memcached.ConnectionFactoryBuilder;
import net.spy.memcached.MemcachedClient;
import site.ycsb.ByteArrayByteIterator;
import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.Status;

import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.Vector;

/**
 * The YCSB binding for the memcached-protocol server (as YCSB's own
 * memcached binding: a record's fields are encoded into one value, an
 * update overwrites the record with the fields it carries). One client per
 * YCSB thread; property {@code kv.server=host:port}. Property
 * {@code kv.client}: {@code direct} (default) is {@link TextClient}, a
 * blocking socket the YCSB thread reads and writes itself; {@code spy} is
 * spymemcached 2.12.3 (YCSB's own memcached binding's library), whose
 * per-request hand-off to its I/O thread made it the benchmark's bottleneck
 * (docs/bench/java.md, "Why the harness was slow").
 */
public class KvBinding extends DB {
    private MemcachedClient mc;
    private TextClient tc;

    @Override
    public void init() throws DBException {
        String server = getProperties().getProperty("kv.server", "127.0.0.1:11211");
        String client = getProperties().getProperty("kv.client", "direct");
        try {
            if (client.equals("direct")) {
                tc = TextClient.connect(server);
                return;
            }
            if (!client.equals("spy")) {
                throw new DBException("kv.client must be direct or spy, not " + client);
            }
            mc = new MemcachedClient(new ConnectionFactoryBuilder()
                    .setProtocol(ConnectionFactoryBuilder.Protocol.TEXT).setOpTimeout(120_000).build(),
                    AddrUtil.getAddresses(server));
        } catch (IOException e) {
            throw new DBException(e);
        }
    }

    @Override
    public void cleanup() throws DBException {
        try {
            if (tc != null) {
                tc.close();
            } else if (mc != null) {
                mc.shutdown();
            }
        } catch (IOException e) {
            throw new DBException(e);
        }
    }

    static byte[] encode(Map<String, ByteIterator> values) {
        try {
            ByteArrayOutputStream b = new ByteArrayOutputStream();
            DataOutputStream o = new DataOutputStream(b);
            o.writeInt(values.size());
            for (Map.Entry<String, ByteIterator> e : values.entrySet()) {
                o.writeUTF(e.getKey());
                byte[] v = e.getValue().toArray();
                o.writeInt(v.length);
                o.write(v);
            }
            return b.toByteArray();
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    static void decode(byte[] data, Set<String> fields, Map<String, ByteIterator> out) throws IOException {
        DataInputStream in = new DataInputStream(new java.io.ByteArrayInputStream(data));
        int n = in.readInt();
        for (int i = 0; i < n; i++) {
            String k = in.readUTF();
            byte[] v = new byte[in.readInt()];
            in.readFully(v);
            if (fields == null || fields.contains(k)) {
                out.put(k, new ByteArrayByteIterator(v));
            }
        }
    }

    @Override
    public Status read(String table, String key, Set<String> fields, Map<String, ByteIterator> result) {
        try {
            Object v = tc != null ? tc.get(key) : mc.get(key);
            if (v == null) {
                return Status.NOT_FOUND;
            }
            decode((byte[]) v, fields, result);
            return Status.OK;
        } catch (RuntimeException | IOException e) {
            return Status.ERROR;
        }
    }

    @Override
    public Status scan(String table, String startkey, int recordcount, Set<String> fields,
                       Vector<HashMap<String, ByteIterator>> result) {
        return Status.NOT_IMPLEMENTED;
    }

    private Status store(String key, Map<String, ByteIterator> values) {
        try {
            boolean ok = tc != null ? tc.set(key, encode(values)) : mc.set(key, 0, encode(values)).get();
            return ok ? Status.OK : Status.ERROR;
        } catch (Exception e) {
            return Status.ERROR;
        }
    }

    @Override
    public Status update(String table, String key, Map<String, ByteIterator> values) {
        return store(key, values);
    }

    @Override
    public Status insert(String table, String key, Map<String, ByteIterator> values) {
        return store(key, values);
    }

    @Override
    public Status delete(String table, String key) {
        try {
            boolean gone = tc != null ? tc.delete(key) : mc.delete(key).get();
            return gone ? Status.OK : Status.NOT_FOUND;
        } catch (Exception e) {
            return Status.ERROR;
        }
    }
}
