package io.engram;

/**
 * An object that cannot be made persistent (a thread, a socket, a lambda,
 * a class the agent did not instrument, ...) was about to become reachable
 * from a durable root. Thrown at the store that would have made it
 * reachable, before that store happens: the store is not performed and the
 * pool is unchanged. The message names the class and the path from the
 * stored-into object.
 */
public final class NotPersistableException extends EngramException {
    private final Class<?> type;
    private final String path;

    public NotPersistableException(Class<?> type, String path, String why) {
        super(Code.NOT_PERSISTABLE, "cannot persist " + type.getName() + " at " + path + ": " + why);
        this.type = type;
        this.path = path;
    }

    /** The class that cannot be persisted. */
    public Class<?> type() {
        return type;
    }

    /** The path from the stored-into object (or root) to the offending object. */
    public String path() {
        return path;
    }
}
