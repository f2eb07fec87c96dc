package io.engram;

/**
 * The one exception of Engram for Java. {@link #code()} is the engine's
 * stable error code (the C ABI's {@code engram_code}: 1-99 engine, 100+
 * ABI) or one of the Java front end's own codes (200+). Subclasses exist
 * only for the cases callers commonly catch.
 */
public class EngramException extends RuntimeException {
    /** Stable codes, shared with the engine's C ABI where they overlap. */
    public enum Code {
        IO(1), NOT_A_POOL(2), TRUNCATED(3), BAD_CHECKSUM(4), UNSUPPORTED_VERSION(5),
        WRONG_LAYOUT(6), LAYOUT_MISMATCH(7), CORRUPT(8), POOL_FULL(9), INVALID_ARGUMENT(10),
        BAD_POINTER(11), ALREADY_OPEN(12), EXISTS(13), ROOT_TYPE(14), TABLE_FULL(15),
        LOCK_TIMEOUT(16), ABORTED(17), BUSY(18), READ_ONLY(19),
        TX_TOO_LARGE(20), NESTED_TRANSACTION(21), DOUBLE_FREE(22), OUT_OF_BOUNDS(23), POOL_TOO_SMALL(24),
        TXN_IN_ATOMICALLY(25), BAD_POINTER_FIELD(26), BAD_FIELDS(27), UNKNOWN_FUNCTION(28),
        CROSS_POOL(29), STM_CLOCK_EXHAUSTED(30),
        CLOSED(100), REGION_ENDED(101), INTERNAL(102),
        /** An object of a class that cannot be made persistent became reachable from a root. */
        NOT_PERSISTABLE(200),
        /** No pool is open (or one is already open). */
        NO_POOL(201);

        private final int value;

        Code(int value) {
            this.value = value;
        }

        /** The stable numeric code. */
        public int value() {
            return value;
        }

        /** The code with this number, or INTERNAL for an unknown one. */
        public static Code of(int value) {
            for (Code c : values()) {
                if (c.value == value) {
                    return c;
                }
            }
            return INTERNAL;
        }
    }

    private final Code code;

    public EngramException(Code code, String message) {
        super(code + ": " + message);
        this.code = code;
    }

    public EngramException(Code code, String message, Throwable cause) {
        super(code + ": " + message, cause);
        this.code = code;
    }

    /** What went wrong, as a stable code. */
    public Code code() {
        return code;
    }
}
