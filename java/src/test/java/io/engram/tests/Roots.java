package io.engram.tests;

import io.engram.DurableRoot;

import java.util.List;
import java.util.Map;

/** Durable roots used by the tests (reset by {@link Pools#fresh}). */
public final class Roots {
    private Roots() {
    }

    @DurableRoot
    public static Node head;
    @DurableRoot
    public static Node second;
    @DurableRoot
    public static Object any;
    @DurableRoot
    public static List<Object> list;
    @DurableRoot
    public static Map<Object, Object> map;

    /** Not a durable root. */
    public static Node plain;

    public static void reset() {
        head = null;
        second = null;
        any = null;
        list = null;
        map = null;
        plain = null;
    }
}
