package io.engram.tests;

import io.engram.DurableRoot;
import io.engram.Engram;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;

/**
 * The crash workload: transfers between accounts in failure-atomic regions
 * (each also appends a record and bumps a counter), and an append-only
 * chain written with plain stores outside regions (sequential persistency).
 *
 * <p>Invariants after any crash: the balances sum to {@link #TOTAL}; the
 * counter equals the number of records and the last record's sequence
 * number; the chain holds 0, 1, 2, ... with no gap (a prefix of what was
 * appended); every array slot written in order is a prefix.
 */
public final class Bank {
    private Bank() {
    }

    public static final int ACCOUNTS = 8;
    public static final long TOTAL = ACCOUNTS * 1000L;

    public static final class Account {
        public long balance;
        public String owner;

        Account(long balance, String owner) {
            this.balance = balance;
            this.owner = owner;
        }
    }

    public record Transfer(int from, int to, long amount, long seq) {
    }

    public static final class Counter {
        public long n;
    }

    @DurableRoot
    public static List<Account> accounts;
    @DurableRoot
    public static List<Transfer> records;
    @DurableRoot
    public static Counter counter;
    @DurableRoot
    public static Node chain;
    @DurableRoot
    public static long[] progress;

    public static void reset() {
        accounts = null;
        records = null;
        counter = null;
        chain = null;
        progress = null;
    }

    /** Sets the roots up (in the open pool) if they are not there yet. */
    public static void init() {
        if (accounts != null) {
            return;
        }
        List<Account> as = new ArrayList<>();
        for (int i = 0; i < ACCOUNTS; i++) {
            as.add(new Account(1000, "owner" + i));
        }
        Engram.atomic(() -> {
            accounts = as;
            records = new ArrayList<>();
            counter = new Counter();
            chain = new Node(0, "chain");
            progress = new long[4096];
        });
    }

    /**
     * Runs {@code ops} operations; with {@code haltAt >= 0} the JVM halts at
     * that step (steps are numbered across operations and inside them).
     */
    public static void run(long seed, long ops, long haltAt) {
        Random rnd = new Random(seed);
        long step = 0;
        Node tail = chain;
        while (tail.next != null) {
            tail = tail.next;
        }
        for (long op = 0; op < ops; op++) {
            int from = rnd.nextInt(ACCOUNTS), to = rnd.nextInt(ACCOUNTS);
            long amount = rnd.nextInt(50);
            long s0 = step;
            Engram.atomic(() -> {
                Account a = accounts.get(from), b = accounts.get(to);
                a.balance -= amount;
                maybeHalt(s0 + 1, haltAt);
                b.balance += amount;
                maybeHalt(s0 + 2, haltAt);
                long seq = counter.n + 1;
                records.add(new Transfer(from, to, amount, seq));
                maybeHalt(s0 + 3, haltAt);
                counter.n = seq;
                maybeHalt(s0 + 4, haltAt);
            });
            step += 5;
            maybeHalt(step, haltAt);
            // sequential persistency: a new node, then the link that publishes it
            Node n = new Node(tail.value + 1, null);
            tail.next = n;
            tail = n;
            maybeHalt(++step, haltAt);
            int slot = (int) (n.value % progress.length);
            progress[slot] = n.value;
            maybeHalt(++step, haltAt);
        }
    }

    private static void maybeHalt(long step, long haltAt) {
        if (step == haltAt) {
            Runtime.getRuntime().halt(3);
        }
    }

    /** Checks every invariant; returns the number of transfers found. */
    public static long check() {
        long sum = 0;
        for (Account a : accounts) {
            sum += a.balance;
        }
        if (sum != TOTAL) {
            throw new AssertionError("balances sum to " + sum + ", not " + TOTAL);
        }
        if (counter.n != records.size()) {
            throw new AssertionError("counter " + counter.n + " but " + records.size() + " records");
        }
        for (int i = 0; i < records.size(); i++) {
            if (records.get(i).seq() != i + 1) {
                throw new AssertionError("record " + i + " has seq " + records.get(i).seq());
            }
        }
        long expect = 0, last = 0;
        for (Node n = chain; n != null; n = n.next) {
            if (n.value != expect++) {
                throw new AssertionError("chain gap: " + n.value + " where " + (expect - 1) + " was expected");
            }
            last = n.value;
        }
        // progress[v % len] = v is written after node v is linked: never ahead of the chain
        for (int i = 0; i < progress.length; i++) {
            if (progress[i] > last) {
                throw new AssertionError("progress slot " + i + " = " + progress[i] + " ahead of the chain (" + last + ")");
            }
        }
        return counter.n;
    }
}
