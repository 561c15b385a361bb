package org.caffeine.hbase;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.util.Arrays;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Exclusive locks for rows, striped over a fixed set of locks shared by all regions of the
 * region server.
 *
 * <p>Why: HBase holds only a SHARED row lock while it applies a non-atomic batch (a
 * {@code putMultiple}; {@code HRegion.lockRowsAndBuildMiniBatch} asks for a read lock unless
 * the batch is atomic), so two such batches can be inside {@code preBatchMutate} for the same
 * row at the same time, and both could pass a check before either writes. A step's check and
 * its write are made atomic by holding the row's stripe from the check until the batch is
 * written and visible ({@code postBatchMutateIndispensably}, which HBase calls after the memstore
 * write and the MVCC completion, success or not).
 *
 * <p>Deadlock freedom: a thread takes all the stripes of one mini-batch at once, in ascending
 * stripe order, and holds them only while its batch is written; it waits for no row lock and no
 * stripe while holding them except larger stripes of the same set. (Atomic batches hold an
 * exclusive HBase row lock, which excludes the shared holders of that row; taking the stripe
 * as well is harmless and keeps the code path single.)
 */
final class RowStripes {
  private static final int STRIPES = 4096;  // a power of two
  private static final ReentrantLock[] LOCKS = new ReentrantLock[STRIPES];

  static {
    for (int i = 0; i < STRIPES; i++) {
      LOCKS[i] = new ReentrantLock();
    }
  }

  private RowStripes() {
  }

  static int stripeOf(byte[] row) {
    int h = Arrays.hashCode(row);
    h ^= (h >>> 16);
    h *= 0x85ebca6b;
    h ^= (h >>> 13);
    return h & (STRIPES - 1);
  }

  /** The distinct stripes of {@code rows}, ascending: the order they are taken in. */
  static int[] stripesOf(Iterable<byte[]> rows) {
    java.util.BitSet set = new java.util.BitSet(STRIPES);
    for (byte[] row : rows) {
      set.set(stripeOf(row));
    }
    return set.stream().toArray();
  }

  /**
   * Takes every stripe in {@code stripes} (ascending) or none: false when one was not free
   * within {@code timeoutMs}.
   */
  static boolean lockAll(int[] stripes, long timeoutMs) throws IOException {
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
    for (int i = 0; i < stripes.length; i++) {
      boolean got;
      try {
        got = LOCKS[stripes[i]].tryLock(Math.max(0L, deadline - System.nanoTime()),
            TimeUnit.NANOSECONDS);
      } catch (InterruptedException e) {
        unlock(stripes, i);
        Thread.currentThread().interrupt();
        throw (IOException) new InterruptedIOException("interrupted waiting for a row stripe")
            .initCause(e);
      }
      if (!got) {
        unlock(stripes, i);
        return false;
      }
    }
    return true;
  }

  /** Releases the first {@code count} stripes of {@code stripes}. */
  static void unlock(int[] stripes, int count) {
    for (int i = count - 1; i >= 0; i--) {
      LOCKS[stripes[i]].unlock();
    }
  }
}
