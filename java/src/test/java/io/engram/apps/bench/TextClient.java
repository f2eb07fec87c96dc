package io.engram.apps.bench;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;

/**
 * A minimal blocking client for the memcached text protocol (get, set,
 * delete), used by the YCSB binding instead of spymemcached by default
 * ({@code kv.client=direct}). One connection per YCSB thread, TCP_NODELAY,
 * buffered streams, one flush per request; the calling thread writes the
 * request and reads the reply itself, so a request costs one loopback round
 * trip and no hand-off to an I/O thread (spymemcached queues each operation
 * for its selector thread and waits on a latch: two thread wake-ups per
 * request, which on this 2-core shared machine capped the volatile server at
 * 1,600-4,600 ops/s; docs/bench/java.md, "Why the harness was slow").
 *
 * <p>Not thread-safe: one instance per thread. A protocol error or a closed
 * connection is an {@link IOException}; the binding reports it as a failed
 * operation.
 */
final class TextClient implements AutoCloseable {
    private static final int MAX_LINE = 2048;
    private final Socket socket;
    private final InputStream in;
    private final OutputStream out;
    private final byte[] line = new byte[MAX_LINE];

    TextClient(String host, int port) throws IOException {
        socket = new Socket();
        socket.setTcpNoDelay(true);
        socket.connect(new InetSocketAddress(host, port), 10_000);
        in = new BufferedInputStream(socket.getInputStream(), 1 << 16);
        out = new BufferedOutputStream(socket.getOutputStream(), 1 << 16);
    }

    /** {@code host:port} as YCSB's property gives it. */
    static TextClient connect(String address) throws IOException {
        int colon = address.lastIndexOf(':');
        return new TextClient(address.substring(0, colon), Integer.parseInt(address.substring(colon + 1)));
    }

    private void ascii(String s) throws IOException {
        out.write(s.getBytes(StandardCharsets.ISO_8859_1));
    }

    /** Reads one reply line without its CRLF. */
    private String readLine() throws IOException {
        int n = 0;
        int c;
        while ((c = in.read()) != '\n') {
            if (c < 0) {
                throw new EOFException("server closed the connection");
            }
            if (n == MAX_LINE) {
                throw new IOException("reply line too long");
            }
            line[n++] = (byte) c;
        }
        if (n > 0 && line[n - 1] == '\r') {
            n--;
        }
        return new String(line, 0, n, StandardCharsets.ISO_8859_1);
    }

    /** The value of {@code key}, or null if the server has none. */
    byte[] get(String key) throws IOException {
        ascii("get " + key + "\r\n");
        out.flush();
        String head = readLine();
        if (head.equals("END")) {
            return null;
        }
        String[] t = head.split(" ");
        if (t.length < 4 || !t[0].equals("VALUE")) {
            throw new IOException("unexpected reply: " + head);
        }
        byte[] v = in.readNBytes(Integer.parseInt(t[3]));
        if (!readLine().isEmpty() || !readLine().equals("END")) {
            throw new IOException("bad data block for " + key);
        }
        return v;
    }

    /** {@code set key 0 0 len}; true if STORED. */
    boolean set(String key, byte[] value) throws IOException {
        ascii("set " + key + " 0 0 " + value.length + "\r\n");
        out.write(value);
        ascii("\r\n");
        out.flush();
        return readLine().equals("STORED");
    }

    /** true if DELETED, false if NOT_FOUND. */
    boolean delete(String key) throws IOException {
        ascii("delete " + key + "\r\n");
        out.flush();
        return readLine().equals("DELETED");
    }

    @Override
    public void close() throws IOException {
        socket.close();
    }
}
