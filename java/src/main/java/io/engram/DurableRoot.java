package io.engram;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Marks a static reference field as a durable root (AutoPersist's
 * {@code @durable_root}).
 *
 * <p>Once a pool is open, every store to the field makes the stored object,
 * and everything it reaches, recoverable before the store becomes visible,
 * and records it in the pool under the root name {@code ClassName.field}.
 * {@link Engram#open} and {@link Engram#recover} assign the recovered graph
 * back to the field (running the class's static initializer first, whose
 * stores to pending roots are then ignored). Only reference-typed static
 * fields can be durable roots.
 */
@Retention(RetentionPolicy.RUNTIME)
@Target(ElementType.FIELD)
public @interface DurableRoot {
}
