package io.engram.tests;

import io.engram.Engram;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.*;
import java.util.concurrent.ConcurrentHashMap;

import static org.junit.jupiter.api.Assertions.*;

/** Every supported type survives a reopen, and mutations of each are persisted. */
class TypesTest {
    private Engram pool;

    @AfterEach
    void close() {
        if (pool != null && Engram.isOpen()) {
            pool.close();
        }
    }

    private Path open(String name) throws Exception {
        Path p = Pools.fresh(name);
        pool = Pools.open(p);
        return p;
    }

    private void reopen(Path p) {
        pool = Pools.reopen(pool, p);
    }

    @Test
    void primitivesFinalsAndInheritedFields() throws Exception {
        Path p = open("types-prims");
        Kinds.Prims x = new Kinds.Prims();
        Kinds.Derived d = new Kinds.Derived();
        Roots.list = new ArrayList<>(List.of(x, d));
        x.z = true;
        x.b = -5;
        x.c = 'é';
        x.s = -300;
        x.i = Integer.MIN_VALUE;
        x.j = Long.MAX_VALUE;
        x.f = -1.5f;
        x.d = Math.PI;
        x.ref = 12L;
        d.baseValue = 7;
        d.derivedValue = 8;
        d.baseRef = "base";
        reopen(p);
        Kinds.Prims y = (Kinds.Prims) Roots.list.get(0);
        assertTrue(y.z);
        assertEquals(-5, y.b);
        assertEquals('é', y.c);
        assertEquals(-300, y.s);
        assertEquals(Integer.MIN_VALUE, y.i);
        assertEquals(Long.MAX_VALUE, y.j);
        assertEquals(-1.5f, y.f);
        assertEquals(Math.PI, y.d);
        assertEquals(12L, y.ref);
        assertEquals("final", y.fin);
        Kinds.Derived e = (Kinds.Derived) Roots.list.get(1);
        assertEquals(7, e.baseValue);
        assertEquals(8, e.derivedValue);
        assertEquals("base", e.baseRef);
    }

    @Test
    void arraysOfEveryKind() throws Exception {
        Path p = open("types-arrays");
        Object[] all = {
            new boolean[] {true, false, true}, new byte[] {1, -2, 3}, new char[] {'a', 'ß'},
            new short[] {-1, 2}, new int[] {1, 2, 3}, new long[] {Long.MIN_VALUE, 0}, new float[] {1.25f},
            new double[] {-0.0, 2.5}, new String[] {"x", null, "z"}, new int[][] {{1}, {2, 3}}, new Object[0]
        };
        Roots.any = all;
        ((int[]) all[4])[1] = 20;
        ((boolean[]) all[0])[1] = true;
        ((byte[]) all[1])[0] = 9;
        ((char[]) all[2])[0] = 'q';
        ((short[]) all[3])[0] = 5;
        ((long[]) all[5])[1] = 77;
        ((float[]) all[6])[0] = 3.5f;
        ((double[]) all[7])[1] = 9.75;
        ((String[]) all[8])[1] = "y";
        ((int[][]) all[9])[0] = new int[] {10, 11};
        System.arraycopy(new int[] {8, 9}, 0, (int[]) all[4], 0, 2);
        reopen(p);
        Object[] r = (Object[]) Roots.any;
        assertArrayEquals(new boolean[] {true, true, true}, (boolean[]) r[0]);
        assertArrayEquals(new byte[] {9, -2, 3}, (byte[]) r[1]);
        assertArrayEquals(new char[] {'q', 'ß'}, (char[]) r[2]);
        assertArrayEquals(new short[] {5, 2}, (short[]) r[3]);
        assertArrayEquals(new int[] {8, 9, 3}, (int[]) r[4]);
        assertArrayEquals(new long[] {Long.MIN_VALUE, 77}, (long[]) r[5]);
        assertArrayEquals(new float[] {3.5f}, (float[]) r[6]);
        assertArrayEquals(new double[] {-0.0, 9.75}, (double[]) r[7]);
        assertArrayEquals(new String[] {"x", "y", "z"}, (String[]) r[8]);
        assertArrayEquals(new int[] {10, 11}, ((int[][]) r[9])[0]);
        assertEquals(0, ((Object[]) r[10]).length);
    }

    @Test
    void badArrayStoresFailAsTheJvmWouldAndChangeNothing() throws Exception {
        Path p = open("types-badstores");
        int[] ints = {1, 2};
        Object[] objs = new String[] {"a"};
        Roots.list = new ArrayList<>(List.of(ints, objs));
        assertThrows(ArrayIndexOutOfBoundsException.class, () -> ints[2] = 5);
        assertThrows(ArrayIndexOutOfBoundsException.class, () -> ints[-1] = 5);
        assertThrows(ArrayStoreException.class, () -> objs[0] = 42);
        assertThrows(ArrayIndexOutOfBoundsException.class, () -> System.arraycopy(new int[] {9, 9, 9}, 0, ints, 0, 3));
        int[] none = null;
        assertThrows(NullPointerException.class, () -> none[0] = 1);
        reopen(p);
        assertArrayEquals(new int[] {1, 2}, (int[]) Roots.list.get(0));
        assertArrayEquals(new String[] {"a"}, (Object[]) Roots.list.get(1));
    }

    @Test
    void stringsBoxesEnumsRecords() throws Exception {
        Path p = open("types-values");
        Roots.list = new ArrayList<>(List.of("héllo", "", 1, 2L, 3.5, 4.5f, (short) 5, (byte) 6, 'c', true,
                Kinds.Color.BLUE, Kinds.Op.SUB, new Kinds.Point(1, 2, "p")));
        reopen(p);
        assertEquals(List.of("héllo", "", 1, 2L, 3.5, 4.5f, (short) 5, (byte) 6, 'c', true, Kinds.Color.BLUE,
                Kinds.Op.SUB, new Kinds.Point(1, 2, "p")), Roots.list);
        assertSame(Kinds.Color.BLUE, Roots.list.get(10));
        assertEquals(1, ((Kinds.Op) Roots.list.get(11)).apply(3, 2));
    }

    @Test
    void collectionsRoundTripAndMutations() throws Exception {
        Path p = open("types-colls");
        Map<Object, Object> m = new HashMap<>();
        Roots.map = m;
        List<Object> al = new ArrayList<>();
        LinkedList<Object> ll = new LinkedList<>();
        ArrayDeque<Object> dq = new ArrayDeque<>();
        LinkedHashMap<Object, Object> lhm = new LinkedHashMap<>();
        TreeMap<String, Object> tm = new TreeMap<>(new Kinds.Reverse());
        TreeMap<Integer, Object> tmNatural = new TreeMap<>();
        Set<Object> hs = new HashSet<>();
        LinkedHashSet<Object> lhs = new LinkedHashSet<>();
        TreeSet<Integer> ts = new TreeSet<>();
        ConcurrentHashMap<Object, Object> chm = new ConcurrentHashMap<>();
        m.put("al", al);
        m.put("ll", ll);
        m.put("dq", dq);
        m.put("lhm", lhm);
        m.put("tm", tm);
        m.put("tmn", tmNatural);
        m.put("hs", hs);
        m.put("lhs", lhs);
        m.put("ts", ts);
        m.put("chm", chm);
        al.add("a");
        al.add(0, "z");
        al.add("b");
        al.remove("a");
        al.set(1, "B");
        ll.add(1);
        ll.addFirst(0);
        dq.push("d1");
        dq.offerLast("d2");
        dq.poll();
        lhm.put("k2", 2);
        lhm.put("k1", 1);
        tm.put("a", 1);
        tm.put("c", 3);
        tm.put("b", 2);
        tmNatural.put(5, "five");
        tmNatural.put(1, "one");
        hs.add(new Kinds.Key(1));
        hs.add(new Kinds.Key(2));
        hs.remove(new Kinds.Key(1));
        lhs.add("y");
        lhs.add("x");
        ts.addAll(List.of(3, 1, 2));
        chm.put("c", 1);
        chm.merge("c", 5, (x, y) -> (Integer) x + (Integer) y);
        m.put(new Kinds.Key(9), "keyed");
        reopen(p);
        Map<Object, Object> r = Roots.map;
        assertEquals(List.of("z", "B"), r.get("al"));
        assertEquals(List.of(0, 1), r.get("ll"));
        assertEquals(List.of("d2"), new ArrayList<>((ArrayDeque<?>) r.get("dq")));
        assertEquals(List.of("k2", "k1"), new ArrayList<>(((Map<?, ?>) r.get("lhm")).keySet()));
        TreeMap<?, ?> rtm = (TreeMap<?, ?>) r.get("tm");
        assertEquals(List.of("c", "b", "a"), new ArrayList<>(rtm.keySet()));
        assertInstanceOf(Kinds.Reverse.class, rtm.comparator());
        assertEquals(List.of(1, 5), new ArrayList<>(((TreeMap<?, ?>) r.get("tmn")).keySet()));
        assertEquals(Set.of(new Kinds.Key(2)), r.get("hs"));
        assertEquals(List.of("y", "x"), new ArrayList<>((Set<?>) r.get("lhs")));
        assertEquals(List.of(1, 2, 3), new ArrayList<>((Set<?>) r.get("ts")));
        assertEquals(6, ((Map<?, ?>) r.get("chm")).get("c"));
        assertEquals("keyed", r.get(new Kinds.Key(9)));
        // restored collections keep being persisted
        ((List<Object>) r.get("al")).add("again");
        reopen(p);
        assertEquals(List.of("z", "B", "again"), Roots.map.get("al"));
    }

    @Test
    void identitySharingAndCyclesSurvive() throws Exception {
        Path p = open("types-identity");
        Node shared = new Node(1, "shared");
        Node a = new Node(2, "a");
        Node b = new Node(3, "b");
        a.next = shared;
        b.next = shared;
        shared.next = a; // cycle a -> shared -> a
        shared.other = shared; // self loop
        Roots.head = a;
        Roots.second = b;
        Roots.list = new ArrayList<>(List.of(shared, shared));
        reopen(p);
        assertSame(Roots.head.next, Roots.second.next);
        assertSame(Roots.head, Roots.head.next.next);
        assertSame(Roots.head.next, Roots.head.next.other);
        assertSame(Roots.list.get(0), Roots.list.get(1));
        assertSame(Roots.list.get(0), Roots.head.next);
        assertTrue(Engram.isRecoverable(Roots.head.next));
    }
}
