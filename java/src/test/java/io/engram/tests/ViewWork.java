package io.engram.tests;

import java.lang.reflect.Field;
import java.util.*;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The mutations the agent does not see as a collection's own mutator:
 * through views, iterators and map entries, the JDK's in-place helpers
 * ({@code Collections}, {@code List.sort}, {@code Arrays}) and reflection.
 * Used by {@code ViewsTest} in process and by {@code ChildMain views} in a
 * child JVM that halts afterwards. Deterministic: the same calls give the
 * same graph, compared with {@link #describe}.
 */
public final class ViewWork {
    private ViewWork() {
    }

    // Indices of the structures in Roots.list.
    static final int LIST = 0, HASH = 1, TREE = 2, TSET = 3, LINKED = 4, DEQUE = 5, LHM = 6, CHM = 7, INTS = 8,
            STRS = 9, OBJS = 10, NODE = 11, LONGS = 12, DOUBLES = 13, COPY = 14;

    /** Builds the structures under {@code Roots.list} (recoverable once stored). */
    public static void init() {
        List<Object> r = new ArrayList<>();
        List<String> list = new ArrayList<>();
        Map<String, Integer> hash = new HashMap<>();
        TreeMap<String, Integer> tree = new TreeMap<>();
        TreeSet<String> tset = new TreeSet<>();
        LinkedList<String> linked = new LinkedList<>();
        ArrayDeque<String> deque = new ArrayDeque<>();
        LinkedHashMap<String, Integer> lhm = new LinkedHashMap<>();
        ConcurrentHashMap<String, Integer> chm = new ConcurrentHashMap<>();
        for (int i = 0; i < 20; i++) {
            String n = String.format("%02d", i);
            list.add("a" + n);
            hash.put("k" + n, i);
            tree.put("t" + n, i);
            tset.add("s" + n);
            linked.add("l" + n);
            deque.add("d" + n);
            lhm.put("h" + n, i);
            chm.put("c" + n, i);
        }
        Collections.addAll(r, list, hash, tree, tset, linked, deque, lhm, chm, new int[] {5, 3, 9, 1, 7, 2, 8},
                new String[] {"q", "w", "e", "r", "t"}, new Object[4], new Node(1, "reflected"), new long[5],
                new double[] {3.5, -1, 2.25, 0}, new ArrayList<>(List.of("c0", "c1", "c2", "c3")));
        Roots.list = r;
    }

    @SuppressWarnings("unchecked")
    static <T> T at(int i) {
        return (T) Roots.list.get(i);
    }

    /** Everything below, in order. */
    public static void all() throws ReflectiveOperationException {
        views();
        helpers();
        reflection();
    }

    /** Iterators, list iterators, entries, key/value/entry sets, sub-lists and navigable views. */
    public static void views() {
        List<String> a = at(LIST);
        Iterator<String> it = a.iterator();
        while (it.hasNext()) {
            if (it.next().endsWith("3")) {
                it.remove();
            }
        }
        ListIterator<String> li = a.listIterator();
        li.next();
        li.set("first");
        li.add("afterFirst");
        li.next();
        li.remove();
        a.subList(2, 5).clear();
        List<String> sub = a.subList(1, 8);
        sub.set(0, "subSet");
        sub.add("subAdd");
        sub.subList(1, 4).sort(Comparator.reverseOrder()); // a sub-list of a sub-list
        ViewOps.removeFirst(a.subList(0, 3).iterator()); // obtained here, mutated in another class
        Collections.synchronizedList(a).add("sync");

        Map<String, Integer> m = at(HASH);
        for (Map.Entry<String, Integer> e : m.entrySet()) {
            e.setValue(e.getValue() * 10);
        }
        m.keySet().remove("k01");
        m.keySet().removeIf(k -> k.endsWith("2"));
        m.values().remove(30);
        m.values().removeIf(v -> v == 40);
        m.entrySet().removeIf(e -> e.getValue() == 50);
        Iterator<String> ki = m.keySet().iterator(); // an iterator over a key-set view
        ki.next();
        ki.remove();
        m.replaceAll((k, v) -> v + 1);
        m.computeIfPresent("k07", (k, v) -> v + 1000);
        m.merge("k08", 5, Integer::sum);
        ViewOps.setAll(m.entrySet(), -7, "k09");
        m.entrySet().forEach(e -> e.setValue(e.getValue() + 1)); // entries handed to a lambda by the JDK

        TreeMap<String, Integer> t = at(TREE);
        t.headMap("t05").clear();
        t.tailMap("t15", true).put("t99", 99);
        t.subMap("t07", "t09").clear();
        t.descendingMap().pollFirstEntry();
        t.navigableKeySet().remove("t10");
        for (Map.Entry<String, Integer> e : t.tailMap("t16").entrySet()) {
            e.setValue(-e.getValue());
        }
        t.descendingKeySet().iterator().next();
        Iterator<String> dk = t.descendingKeySet().iterator();
        dk.next();
        dk.remove();

        TreeSet<String> s = at(TSET);
        s.subSet("s03", "s06").clear();
        s.headSet("s02").add("s00a");
        s.descendingSet().pollFirst();
        s.tailSet("s10").removeIf(x -> x.endsWith("2"));
        Iterator<String> di = s.descendingIterator();
        di.next();
        di.remove();

        LinkedList<String> ll = at(LINKED);
        ListIterator<String> back = ll.listIterator(ll.size());
        back.previous();
        back.set("lastSet");
        back.previous();
        back.remove();
        back.add("inserted");
        ArrayDeque<String> dq = at(DEQUE);
        Iterator<String> dqi = dq.descendingIterator();
        dqi.next();
        dqi.remove();
        LinkedHashMap<String, Integer> lhm = at(LHM);
        Iterator<Integer> vi = lhm.values().iterator();
        vi.next();
        vi.remove();
        lhm.sequencedKeySet().reversed().removeFirst();
        lhm.entrySet().forEach(e -> e.setValue(-e.getValue()));
        String[] strs = at(STRS);
        List<String> asList = Arrays.asList(strs); // writes through to the recoverable array
        asList.set(1, "viaAsList");
        Collections.reverse(asList);
        ConcurrentHashMap<String, Integer> chm = at(CHM);
        chm.keySet(-1).add("cNew");
        chm.keySet().remove("c00");
        for (Map.Entry<String, Integer> e : chm.entrySet()) {
            if (e.getKey().endsWith("5")) {
                e.setValue(555);
            }
        }
    }

    /** Collections.*, List.sort/replaceAll, Map.replaceAll and Arrays.* on recoverable lists and arrays. */
    public static void helpers() {
        List<String> a = at(LIST);
        Collections.sort(a);
        Collections.reverse(a);
        Collections.shuffle(a, new Random(7));
        Collections.swap(a, 0, 1);
        Collections.rotate(a, 3);
        Collections.replaceAll(a, a.get(0), "replaced");
        Collections.addAll(a, "x1", "x2");
        a.sort(null);
        a.replaceAll(x -> x + "!");
        List<String> c = at(COPY);
        Collections.copy(c, List.of("copied0", "copied1"));
        Collections.fill(at(LINKED), "filled");
        Map<String, Integer> lhm = at(LHM);
        lhm.replaceAll((k, v) -> v * 2);

        int[] ints = at(INTS);
        Arrays.fill(ints, 2, 4, 7);
        Arrays.sort(ints);
        Arrays.parallelPrefix(ints, Integer::sum);
        long[] longs = at(LONGS);
        Arrays.setAll(longs, i -> i * 3L);
        double[] ds = at(DOUBLES);
        Arrays.parallelSort(ds);
        String[] strs = at(STRS);
        Arrays.sort(strs);
        Arrays.fill(strs, 0, 2, "filled");
        Object[] objs = at(OBJS);
        Arrays.fill(objs, new Node(5, "shared-fill")); // made recoverable, one object in four slots
    }

    /**
     * Field.set* and Array.set* on recoverable objects and arrays, Field.set of a durable root, and
     * setter method handles (findSetter, unreflectSetter, findStaticSetter of a durable root).
     */
    public static void reflection() throws ReflectiveOperationException {
        Node n = at(NODE);
        Field value = Node.class.getDeclaredField("value");
        value.setLong(n, 42);
        Field next = Node.class.getDeclaredField("next");
        next.set(n, new Node(9, "reflected-next"));
        Field label = Node.class.getField("label");
        label.set(n, "relabelled");
        java.lang.reflect.Array.setInt(at(INTS), 0, -1);
        java.lang.reflect.Array.set(at(STRS), 4, "reflArr");
        Roots.class.getField("second").set(null, new Node(77, "root-by-reflection"));
        java.lang.invoke.MethodHandles.Lookup lookup = java.lang.invoke.MethodHandles.lookup();
        try {
            lookup.findSetter(Node.class, "other", Node.class).invoke(n, new Node(8, "by-handle"));
            lookup.unreflectSetter(value).invoke(n, 43L);
            lookup.findStaticSetter(Roots.class, "head", Node.class).invoke(new Node(66, "root-by-handle"));
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /** A canonical text of everything under Roots.list and Roots.second. */
    public static String describe() {
        StringBuilder sb = new StringBuilder();
        for (Object o : Roots.list) {
            sb.append(text(o)).append('\n');
        }
        sb.append(text(Roots.second)).append('\n').append(text(Roots.head));
        return sb.toString();
    }

    private static String text(Object o) {
        if (o instanceof Node n) {
            return "Node(" + n.value + "," + n.label + "," + (n.next == null ? "-" : text(n.next)) + ","
                    + (n.other == null ? "-" : text(n.other)) + ")";
        } else if (o instanceof int[] x) {
            return Arrays.toString(x);
        } else if (o instanceof long[] x) {
            return Arrays.toString(x);
        } else if (o instanceof double[] x) {
            return Arrays.toString(x);
        } else if (o instanceof Object[] x) {
            StringBuilder sb = new StringBuilder("[");
            for (Object e : x) {
                sb.append(text(e)).append(';');
            }
            return sb.append(']').toString();
        } else if (o instanceof ConcurrentHashMap<?, ?> m) {
            return new TreeMap<>(m).toString(); // its order is not the insertion's
        } else if (o instanceof HashMap<?, ?> m && !(o instanceof LinkedHashMap<?, ?>)) {
            return new TreeMap<>(m).toString();
        }
        return String.valueOf(o);
    }
}
