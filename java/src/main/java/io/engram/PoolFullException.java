package io.engram;

/**
 * The pool has no room for the images a store needs. Thrown before the
 * store becomes visible: the store is not performed, nothing already
 * persistent is lost, and the images allocated for it are freed.
 */
public final class PoolFullException extends EngramException {
    public PoolFullException(String message) {
        super(Code.POOL_FULL, message);
    }
}
