package io.engram.tests;

/** Entry point of the child JVMs the tests start (scenarios by name). */
public final class ChildMain {
    private ChildMain() {
    }

    public static void main(String[] args) throws Exception {
        System.exit(0);
    }
}
