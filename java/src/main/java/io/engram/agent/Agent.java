package io.engram.agent;

import java.lang.instrument.Instrumentation;

/**
 * The java agent: {@code -javaagent:engram-java-<version>-agent.jar}.
 * Installs the {@link Transformer}, which instruments application classes
 * as they load (no retransformation: classes loaded before the agent, and
 * JDK classes, are never changed).
 */
public final class Agent {
    private static volatile Instrumentation instrumentation;

    private Agent() {
    }

    public static void premain(String args, Instrumentation inst) {
        install(args, inst);
    }

    public static void agentmain(String args, Instrumentation inst) {
        install(args, inst);
    }

    private static synchronized void install(String args, Instrumentation inst) {
        if (instrumentation != null) {
            return;
        }
        instrumentation = inst;
        inst.addTransformer(new Transformer(Transformer.Options.parse(args)), false);
    }

    /** The JVM's instrumentation, or null when the agent is not running. */
    public static Instrumentation instrumentation() {
        return instrumentation;
    }
}
