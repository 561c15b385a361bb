package org.caffeine.hbase;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.CoprocessorEnvironment;
import org.apache.hadoop.hbase.DoNotRetryIOException;
import org.apache.hadoop.hbase.HConstants.OperationStatusCode;
import org.apache.hadoop.hbase.client.Get;
import org.apache.hadoop.hbase.client.Mutation;
import org.apache.hadoop.hbase.coprocessor.ObserverContext;
import org.apache.hadoop.hbase.coprocessor.RegionCoprocessor;
import org.apache.hadoop.hbase.coprocessor.RegionCoprocessorEnvironment;
import org.apache.hadoop.hbase.coprocessor.RegionObserver;
import org.apache.hadoop.hbase.regionserver.MiniBatchOperationInProgress;
import org.apache.hadoop.hbase.regionserver.OperationStatus;
import org.apache.hadoop.hbase.regionserver.Region;

/**
 * Caffeine's Percolator row steps, checked inside the region server: a mutation carrying the
 * attribute {@code caffeine.step} (see {@link StepRequest}) is applied only if its row passes
 * the step's precondition ({@link RowChecks}); the client computed every cell the step writes
 * and put them into the mutation itself, so this observer only reads, decides, and lets the
 * row's mutations through or fails them.
 *
 * <p>Contract, per row of a batch that has at least one step mutation: either ALL mutations of
 * that row in the (mini-)batch apply untouched, or ALL fail with a
 * {@link DoNotRetryIOException} whose whole message is
 * {@code CAFFEINE-STEP row=<hex row> <ANSWER> [args...]} (single spaces, no newline), which a
 * client finds with {@code CAFFEINE-STEP row=([0-9a-f]*) ([A-Z_]+)((?: [0-9a-f]+)*)}, also
 * inside the aggregated message HBase's client builds for a failed multi-row batch. Answers:
 * see {@link RowChecks}; malformed attributes answer {@code BAD_REQUEST <token>}. Mutations of
 * rows without a step mutation pass untouched, so plain writes keep working.
 *
 * <p>How a row is failed: in a mini-batch that holds other rows too (a Thrift2
 * {@code putMultiple}/{@code deleteMultiple}, HBase's non-atomic batch) its mutations get the
 * status {@code FAILURE} with the message, and the other rows still apply. When every pending
 * mutation of the mini-batch belongs to the failing row, the hook throws the
 * {@link DoNotRetryIOException} instead: that covers the atomic batches ({@code mutateRow},
 * always one row), whose statuses HBase ignores (it would answer success having written
 * nothing), and single puts and deletes, whose {@code FAILURE} status HBase also drops.
 *
 * <p>Atomicity: {@code preBatchMutate} runs after the mini-batch's row locks are taken, but a
 * non-atomic batch holds them shared; the check and the write are serialized per row by
 * {@link RowStripes}, held from before the read until {@code postBatchMutateIndispensably}.
 *
 * <p>It also answers the summary reads of {@link RowSummaries} (a Get with the attribute
 * {@code caffeine.read}), so one class is all a region server loads.
 */
public final class PercolatorRowSteps implements RegionCoprocessor, RegionObserver {
  /** Milliseconds a batch waits for the stripes of its step rows before it is retried. */
  public static final String LOCK_TIMEOUT_KEY = "caffeine.rowsteps.lock.timeout.ms";
  static final long DEFAULT_LOCK_TIMEOUT_MS = 10_000L;
  static final String MESSAGE_PREFIX = "CAFFEINE-STEP row=";

  /** Stripes held by this thread, per mini-batch, from preBatchMutate until it is written. */
  private static final ThreadLocal<Map<Object, int[]>> HELD =
      ThreadLocal.withInitial(IdentityHashMap::new);

  private long lockTimeoutMs = DEFAULT_LOCK_TIMEOUT_MS;

  @Override
  public void start(CoprocessorEnvironment env) {
    lockTimeoutMs = env.getConfiguration().getLong(LOCK_TIMEOUT_KEY, DEFAULT_LOCK_TIMEOUT_MS);
  }

  @Override
  public Optional<RegionObserver> getRegionObserver() {
    return Optional.of(this);
  }

  @Override
  public void preGetOp(ObserverContext<RegionCoprocessorEnvironment> ctx, Get get, List<Cell> result)
      throws IOException {
    if (RowSummaries.requested(get)) {
      RowSummaries.answer(ctx.getEnvironment().getRegion(), get, result);
      ctx.bypass();
    }
  }

  /** The step rows of one mini-batch: the requests on each, and the indexes of its mutations. */
  private static final class StepRow {
    final byte[] row;
    final Set<StepRequest> requests = new LinkedHashSet<>();
    final List<Integer> indexes = new ArrayList<>();
    String answer;  // null: passes (so far)

    StepRow(byte[] row) {
      this.row = row;
    }
  }

  @Override
  public void preBatchMutate(ObserverContext<RegionCoprocessorEnvironment> ctx,
      MiniBatchOperationInProgress<Mutation> batch) throws IOException {
    Map<ByteBuffer, StepRow> rows = stepRows(batch);
    if (rows == null) {
      return;  // no step in this batch: the common case for plain writes, one pass, no read
    }
    int[] stripes = RowStripes.stripesOf(() -> rows.values().stream().map(r -> r.row).iterator());
    if (!RowStripes.lockAll(stripes, lockTimeoutMs)) {
      // Nothing was read or written: a retryable error, so the client tries the batch again.
      throw new IOException("caffeine: row stripes busy for " + lockTimeoutMs + " ms, retry");
    }
    HELD.get().put(batch, stripes);
    try {
      decideAndFail(ctx.getEnvironment().getRegion(), batch, rows);
    } catch (IOException | RuntimeException | Error e) {
      // The batch will not be written: let go at once (postBatchMutateIndispensably then
      // finds nothing to release). A RuntimeException escaping a coprocessor makes HBase
      // unload it or abort the server: report it as this batch's failure instead.
      release(batch);
      if (e instanceof RuntimeException) {
        throw new DoNotRetryIOException("caffeine: row step check failed: " + e, e);
      }
      throw e;
    }
  }

  @Override
  public void postBatchMutateIndispensably(ObserverContext<RegionCoprocessorEnvironment> ctx,
      MiniBatchOperationInProgress<Mutation> batch, boolean success) {
    release(batch);
  }

  private static void release(MiniBatchOperationInProgress<Mutation> batch) {
    Map<Object, int[]> held = HELD.get();
    if (held.isEmpty()) {
      return;
    }
    int[] stripes = held.remove(batch);
    if (stripes != null) {
      RowStripes.unlock(stripes, stripes.length);
    }
  }

  /** The rows with a step mutation among the pending mutations, or null when there is none. */
  private static Map<ByteBuffer, StepRow> stepRows(MiniBatchOperationInProgress<Mutation> batch) {
    Map<ByteBuffer, StepRow> rows = null;
    for (int i = 0; i < batch.size(); i++) {
      if (!pending(batch, i)) {
        continue;
      }
      Mutation m = batch.getOperation(i);
      if (m.getAttribute(StepRequest.STEP) == null) {
        continue;
      }
      if (rows == null) {
        rows = new LinkedHashMap<>();
      }
      byte[] row = m.getRow();
      StepRow sr = rows.computeIfAbsent(ByteBuffer.wrap(row), k -> new StepRow(row));
      try {
        sr.requests.add(StepRequest.of(m));
      } catch (StepRequest.BadRequest e) {
        if (sr.answer == null) {
          sr.answer = "BAD_REQUEST " + e.getMessage();
        }
      }
    }
    if (rows == null) {
      return null;
    }
    // Every pending mutation of a step row shares its fate, plain ones included.
    for (int i = 0; i < batch.size(); i++) {
      if (pending(batch, i)) {
        StepRow sr = rows.get(ByteBuffer.wrap(batch.getOperation(i).getRow()));
        if (sr != null) {
          sr.indexes.add(i);
        }
      }
    }
    return rows;
  }

  private static boolean pending(MiniBatchOperationInProgress<Mutation> batch, int i) {
    OperationStatus st = batch.getOperationStatus(i);
    return st == null || st.getOperationStatusCode() == OperationStatusCode.NOT_RUN;
  }

  private static void decideAndFail(Region region, MiniBatchOperationInProgress<Mutation> batch,
      Map<ByteBuffer, StepRow> rows) throws IOException {
    StepRow lastFailed = null;
    int failedRows = 0;
    for (StepRow sr : rows.values()) {
      for (StepRequest req : sr.requests) {
        if (sr.answer != null) {
          break;
        }
        sr.answer = RowChecks.check(region, sr.row, req);
      }
      if (sr.answer != null) {
        failedRows++;
        lastFailed = sr;
      }
    }
    if (failedRows == 0) {
      return;
    }
    if (failedRows == 1 && lastFailed.indexes.size() == pendingCount(batch)) {
      // The failing row is all this mini-batch writes (mutateRow, a single put or delete, a
      // one-row putMultiple): throw, since HBase ignores a FAILURE status on these paths.
      DoNotRetryIOException answer = new DoNotRetryIOException(message(lastFailed));
      // An answer, not a fault: without a stack trace the client gets the message alone
      // (HBase ships an exception to the client as its printed stack trace).
      answer.setStackTrace(new StackTraceElement[0]);
      throw answer;
    }
    for (StepRow sr : rows.values()) {
      if (sr.answer != null) {
        OperationStatus failed = new OperationStatus(OperationStatusCode.FAILURE, message(sr));
        for (int i : sr.indexes) {
          batch.setOperationStatus(i, failed);
        }
      }
    }
  }

  private static int pendingCount(MiniBatchOperationInProgress<Mutation> batch) {
    int n = 0;
    for (int i = 0; i < batch.size(); i++) {
      if (pending(batch, i)) {
        n++;
      }
    }
    return n;
  }

  static String message(StepRow sr) {
    return MESSAGE_PREFIX + Hex.of(sr.row) + " " + sr.answer;
  }
}
