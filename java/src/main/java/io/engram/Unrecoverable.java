package io.engram;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Marks an instance field that is not persisted (AutoPersist's
 * {@code @unrecoverable}): stores to it are never written to the pool, the
 * objects it reaches are not made recoverable through it, and after a
 * restart it holds its type's default value ({@code null}, 0, false).
 * {@code transient} fields are treated exactly the same way.
 */
@Retention(RetentionPolicy.RUNTIME)
@Target(ElementType.FIELD)
public @interface Unrecoverable {
}
