package io.engram.apps.kv;

import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The memcached text protocol over one connection (get, gets, set, add,
 * replace, append, prepend, cas, delete, incr, decr, touch, flush_all,
 * stats, version, verbosity, quit), as memcached answers it. Every
 * read-modify-write runs under the store's lock for the key. Bad input gets
 * the protocol's errors and never closes the server: an unknown command is
 * {@code ERROR}, a malformed line {@code CLIENT_ERROR bad command line
 * format}, a data block without its CRLF {@code CLIENT_ERROR bad data
 * chunk}, a value over the limit {@code SERVER_ERROR object too large for
 * cache} (its data is read and dropped), a line over 2048 bytes closes the
 * connection after {@code CLIENT_ERROR line too long}.
 */
public final class Protocol {
    public static final int MAX_KEY = 250;
    public static final int MAX_LINE = 2048;
    static final long RELATIVE_LIMIT = 60L * 60 * 24 * 30;
    public static final String VERSION = "1.6.21-engram";

    /** Server-wide counters (not persisted). */
    public static final class Stats {
        final long started = System.currentTimeMillis();
        final AtomicLong gets = new AtomicLong();
        final AtomicLong hits = new AtomicLong();
        final AtomicLong sets = new AtomicLong();
        final AtomicLong connections = new AtomicLong();
    }

    private final KvMap store;
    private final long maxValue;
    private final Stats stats;
    private final InputStream in;
    private final OutputStream out;

    public Protocol(KvMap store, long maxValue, Stats stats, InputStream in, OutputStream out) {
        this.store = store;
        this.maxValue = maxValue;
        this.stats = stats;
        this.in = in;
        this.out = out;
    }

    /** Serves commands until quit, end of input or a fatal protocol error. */
    public void serve() throws IOException {
        stats.connections.incrementAndGet();
        while (true) {
            String line;
            try {
                line = readLine();
            } catch (LineTooLong e) {
                reply("CLIENT_ERROR line too long");
                out.flush();
                return;
            }
            if (line == null || !execute(line)) {
                out.flush();
                return;
            }
            if (in.available() == 0) {
                out.flush();
            }
        }
    }

    private static final class LineTooLong extends IOException {
    }

    private String readLine() throws IOException {
        ByteArrayOutputStream b = new ByteArrayOutputStream(64);
        int c;
        while ((c = in.read()) != '\n') {
            if (c < 0) {
                return b.size() == 0 ? null : b.toString(StandardCharsets.ISO_8859_1);
            }
            if (b.size() >= MAX_LINE) {
                throw new LineTooLong();
            }
            b.write(c);
        }
        String s = b.toString(StandardCharsets.ISO_8859_1);
        return s.endsWith("\r") ? s.substring(0, s.length() - 1) : s;
    }

    private void reply(String s) throws IOException {
        out.write(s.getBytes(StandardCharsets.ISO_8859_1));
        out.write('\r');
        out.write('\n');
    }

    /** Executes one command line; false ends the connection. */
    boolean execute(String line) throws IOException {
        String[] t = line.trim().split(" +");
        if (t[0].isEmpty()) {
            reply("ERROR");
            return true;
        }
        try {
            switch (t[0]) {
                case "get", "gets" -> get(t, t[0].equals("gets"));
                case "set", "add", "replace", "append", "prepend", "cas" -> store(t);
                case "delete" -> delete(t);
                case "incr", "decr" -> arith(t, t[0].equals("incr"));
                case "touch" -> touch(t);
                case "flush_all" -> flushAll(t);
                case "stats" -> stats();
                case "version" -> reply("VERSION " + VERSION);
                case "verbosity" -> verbosity(t);
                case "quit" -> {
                    return false;
                }
                default -> reply("ERROR");
            }
        } catch (BadLine e) {
            reply("CLIENT_ERROR " + e.getMessage());
        }
        return true;
    }

    /** A malformed command line (the message is the CLIENT_ERROR text). */
    private static final class BadLine extends Exception {
        BadLine(String m) {
            super(m, null, false, false);
        }
    }

    private static BadLine bad() {
        return new BadLine("bad command line format");
    }

    private static String key(String k) throws BadLine {
        if (k.length() > MAX_KEY) {
            throw bad();
        }
        return k;
    }

    private static long number(String s, long min, long max) throws BadLine {
        try {
            long v = Long.parseLong(s);
            if (v < min || v > max) {
                throw bad();
            }
            return v;
        } catch (NumberFormatException e) {
            throw bad();
        }
    }

    private static boolean noreply(String[] t, int at) throws BadLine {
        if (t.length == at + 1) {
            if (!t[at].equals("noreply")) {
                throw bad();
            }
            return true;
        }
        if (t.length > at + 1) {
            throw bad();
        }
        return false;
    }

    private void verbosity(String[] t) throws IOException, BadLine {
        if (t.length < 2) {
            throw bad();
        }
        number(t[1], 0, Integer.MAX_VALUE);
        if (!noreply(t, 2)) {
            reply("OK");
        }
    }

    static long absolute(long exptime) {
        if (exptime == 0) {
            return 0;
        }
        return exptime <= RELATIVE_LIMIT ? System.currentTimeMillis() / 1000 + exptime : exptime;
    }

    /** The live item for {@code key} (expired or flushed ones are dropped); call under the key's lock. */
    private Item live(String key) {
        Item it = store.get(key);
        if (it == null) {
            return null;
        }
        long now = System.currentTimeMillis();
        long flush = store.flushAt();
        boolean flushed = flush != 0 && now >= flush && it.storedMs < flush;
        if ((it.exptime != 0 && it.exptime <= now / 1000) || flushed) {
            store.remove(key);
            return null;
        }
        return it;
    }

    private void get(String[] t, boolean withCas) throws IOException, BadLine {
        if (t.length < 2) {
            reply("ERROR");
            return;
        }
        for (int i = 1; i < t.length; i++) {
            String k = key(t[i]);
            Item it;
            synchronized (store.lock(k)) {
                it = live(k);
            }
            stats.gets.incrementAndGet();
            if (it != null) {
                stats.hits.incrementAndGet();
                reply("VALUE " + k + " " + Integer.toUnsignedString(it.flags) + " " + it.value.length
                        + (withCas ? " " + it.cas : ""));
                out.write(it.value);
                reply("");
            }
        }
        reply("END");
    }

    /** set/add/replace/append/prepend/cas: parse, read the data block, apply. */
    private void store(String[] t) throws IOException, BadLine {
        boolean cas = t[0].equals("cas");
        int base = cas ? 6 : 5;
        if (t.length < base || t.length > base + 1) {
            throw bad();
        }
        String k = key(t[1]);
        int flags = (int) number(t[2], 0, 0xFFFFFFFFL);
        long exptime = number(t[3], Integer.MIN_VALUE, Integer.MAX_VALUE);
        long bytes = number(t[4], 0, Integer.MAX_VALUE);
        long unique = cas ? number(t[5], 0, Long.MAX_VALUE) : 0;
        boolean quiet = noreply(t, base);
        if (bytes > maxValue) {
            skip(bytes + 2);
            reply("SERVER_ERROR object too large for cache");
            return;
        }
        byte[] data = in.readNBytes((int) bytes);
        if (data.length < bytes) {
            throw new EOFException("data block cut short");
        }
        int cr = in.read();
        int lf = cr == '\r' ? in.read() : cr;
        if (cr != '\r' || lf != '\n') {
            reply("CLIENT_ERROR bad data chunk");
            return;
        }
        stats.sets.incrementAndGet();
        String result = apply(t[0], k, flags, absolute(exptime), data, unique);
        if (!quiet) {
            reply(result);
        }
    }

    private void skip(long n) throws IOException {
        while (n > 0) {
            long s = in.skip(n);
            if (s <= 0) {
                if (in.read() < 0) {
                    return;
                }
                s = 1;
            }
            n -= s;
        }
    }

    private String apply(String cmd, String k, int flags, long exp, byte[] data, long unique) {
        synchronized (store.lock(k)) {
            Item old = live(k);
            long now = System.currentTimeMillis();
            switch (cmd) {
                case "add":
                    if (old != null) {
                        return "NOT_STORED";
                    }
                    break;
                case "replace":
                    if (old == null) {
                        return "NOT_STORED";
                    }
                    break;
                case "append", "prepend":
                    if (old == null) {
                        return "NOT_STORED";
                    }
                    byte[] joined = new byte[old.value.length + data.length];
                    byte[] first = cmd.equals("append") ? old.value : data;
                    byte[] second = cmd.equals("append") ? data : old.value;
                    System.arraycopy(first, 0, joined, 0, first.length);
                    System.arraycopy(second, 0, joined, first.length, second.length);
                    store.put(k, new Item(joined, old.flags, old.exptime, store.nextCas(k), now));
                    return "STORED";
                case "cas":
                    if (old == null) {
                        return "NOT_FOUND";
                    }
                    if (old.cas != unique) {
                        return "EXISTS";
                    }
                    break;
                default:
                    break;
            }
            store.put(k, new Item(data, flags, exp, store.nextCas(k), now));
            return "STORED";
        }
    }

    private void delete(String[] t) throws IOException, BadLine {
        if (t.length < 2) {
            throw bad();
        }
        String k = key(t[1]);
        int at = 2;
        if (t.length > 2 && t[2].equals("0")) {
            at = 3;                                   // the legacy "delete <key> 0"
        }
        boolean quiet = noreply(t, at);
        boolean gone;
        synchronized (store.lock(k)) {
            gone = live(k) != null && store.remove(k);
        }
        if (!quiet) {
            reply(gone ? "DELETED" : "NOT_FOUND");
        }
    }

    private void arith(String[] t, boolean incr) throws IOException, BadLine {
        if (t.length < 3) {
            throw bad();
        }
        String k = key(t[1]);
        long delta;
        try {
            delta = Long.parseUnsignedLong(t[2]);
        } catch (NumberFormatException e) {
            throw new BadLine("invalid numeric delta argument");
        }
        boolean quiet = noreply(t, 3);
        String result;
        synchronized (store.lock(k)) {
            Item old = live(k);
            if (old == null) {
                result = "NOT_FOUND";
            } else {
                long cur;
                try {
                    cur = Long.parseUnsignedLong(new String(old.value, StandardCharsets.ISO_8859_1).trim());
                } catch (NumberFormatException e) {
                    throw new BadLine("cannot increment or decrement non-numeric value");
                }
                long next = incr ? cur + delta : (Long.compareUnsigned(delta, cur) > 0 ? 0 : cur - delta);
                result = Long.toUnsignedString(next);
                store.put(k, new Item(result.getBytes(StandardCharsets.ISO_8859_1), old.flags, old.exptime,
                        store.nextCas(k), System.currentTimeMillis()));
            }
        }
        if (!quiet) {
            reply(result);
        }
    }

    private void touch(String[] t) throws IOException, BadLine {
        if (t.length < 3) {
            throw bad();
        }
        String k = key(t[1]);
        long exp = absolute(number(t[2], Integer.MIN_VALUE, Integer.MAX_VALUE));
        boolean quiet = noreply(t, 3);
        boolean found;
        synchronized (store.lock(k)) {
            Item old = live(k);
            found = old != null;
            if (found) {
                store.put(k, new Item(old.value, old.flags, exp, old.cas, old.storedMs));
            }
        }
        if (!quiet) {
            reply(found ? "TOUCHED" : "NOT_FOUND");
        }
    }

    private void flushAll(String[] t) throws IOException, BadLine {
        long delay = 0;
        int at = 1;
        if (t.length > 1 && !t[1].equals("noreply")) {
            delay = number(t[1], 0, Integer.MAX_VALUE);
            at = 2;
        }
        boolean quiet = noreply(t, at);
        if (delay == 0) {
            store.clear();
        } else {
            store.setFlushAt(absolute(delay) * 1000);
        }
        if (!quiet) {
            reply("OK");
        }
    }

    private void stats() throws IOException {
        long now = System.currentTimeMillis();
        reply("STAT pid " + ProcessHandle.current().pid());
        reply("STAT uptime " + (now - stats.started) / 1000);
        reply("STAT time " + now / 1000);
        reply("STAT version " + VERSION);
        reply("STAT curr_items " + store.size());
        reply("STAT total_connections " + stats.connections.get());
        reply("STAT cmd_get " + stats.gets.get());
        reply("STAT cmd_set " + stats.sets.get());
        reply("STAT get_hits " + stats.hits.get());
        reply("STAT get_misses " + (stats.gets.get() - stats.hits.get()));
        reply("END");
    }
}
