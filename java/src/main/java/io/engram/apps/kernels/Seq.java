package io.engram.apps.kernels;

/**
 * A sequence of longs, the interface every kernel implements (the
 * AutoPersist kernels, their explicit low-level twins, and the plain
 * reference used by the tests). Arrays support get/set; lists also insert
 * and remove. Crash behaviour is each implementation's (see its doc).
 */
public interface Seq {
    int size();

    long get(int i);

    void set(int i, long v);

    /** Inserts {@code v} before position {@code i} (0..size). Lists only. */
    default void insert(int i, long v) {
        throw new UnsupportedOperationException("insert on " + getClass().getSimpleName());
    }

    /** Removes position {@code i}. Lists only. */
    default void remove(int i) {
        throw new UnsupportedOperationException("remove on " + getClass().getSimpleName());
    }

    /** Does this kernel insert and remove? */
    default boolean structural() {
        return false;
    }
}
