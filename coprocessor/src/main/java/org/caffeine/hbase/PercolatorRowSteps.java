package org.caffeine.hbase;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.CoprocessorEnvironment;
import org.apache.hadoop.hbase.DoNotRetryIOException;
import org.apache.hadoop.hbase.client.Delete;
import org.apache.hadoop.hbase.client.Get;
import org.apache.hadoop.hbase.client.Mutation;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.client.TableDescriptor;
import org.apache.hadoop.hbase.coprocessor.ObserverContext;
import org.apache.hadoop.hbase.coprocessor.RegionCoprocessor;
import org.apache.hadoop.hbase.coprocessor.RegionCoprocessorEnvironment;
import org.apache.hadoop.hbase.coprocessor.RegionObserver;
import org.apache.hadoop.hbase.regionserver.MiniBatchOperationInProgress;
import org.apache.hadoop.hbase.regionserver.Region;
import org.apache.hadoop.hbase.util.Pair;

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
 * see {@link RowChecks}; malformed attributes answer {@code BAD_REQUEST <token>}, and so does a
 * row with two different step requests in the mini-batch ({@code several-steps-one-row}).
 * A passing row's step also writes the deletes its request carries ({@code caffeine.deletes},
 * {@link StepRequest}), atomically with the row's mutations ({@link BatchAdditions}): a step
 * is puts only on the wire, so steps of many rows go in one {@code putMultiple}. Mutations of
 * rows without a step mutation pass untouched, so plain writes keep working.
 *
 * <p>How a row is failed: see {@link RowFailures}.
 *
 * <p>Atomicity: {@code preBatchMutate} runs after the mini-batch's row locks are taken, but a
 * non-atomic batch holds them shared; the check and the write are serialized per row by
 * {@link RowStripes}, held from before the read until {@code postBatchMutateIndispensably}.
 *
 * <p>It also keeps the live-cell counts of counted families ({@link RowCounts}), under the same
 * stripes as the step rows, and answers the summary reads of {@link RowSummaries} (a Get with
 * the attribute {@code caffeine.read}), so one class is all a region server loads; and it
 * registers each region with a churn family ({@link ChurnCompactor}) for compaction on its own;
 * a scan carrying {@code caffeine.shard} returns one shard of the rows ({@link RowShards}).
 */
public final class PercolatorRowSteps implements RegionCoprocessor, RegionObserver {
  /** Milliseconds a batch waits for the stripes of its step rows before it is retried. */
  public static final String LOCK_TIMEOUT_KEY = "caffeine.rowsteps.lock.timeout.ms";
  static final long DEFAULT_LOCK_TIMEOUT_MS = 10_000L;
  static final String MESSAGE_PREFIX = "CAFFEINE-STEP row=";
  /** The BAD_REQUEST token of a row with different step requests in one mini-batch. */
  static final String SEVERAL_STEPS = "several-steps-one-row";

  /** Stripes held by this thread, per mini-batch, from preBatchMutate until it is written. */
  private static final ThreadLocal<Map<Object, int[]>> HELD =
      ThreadLocal.withInitial(IdentityHashMap::new);

  /** The counts of a mini-batch that wrote count cells, from preBatchMutate until it is done. */
  private static final ThreadLocal<Map<Object, RowCounts>> COUNTING =
      ThreadLocal.withInitial(IdentityHashMap::new);

  private long lockTimeoutMs = DEFAULT_LOCK_TIMEOUT_MS;
  /** This region's count cells ({@link CountCache}): one coprocessor instance per region. */
  private final CountCache countCache = new CountCache();
  /**
   * The columns this region's counted families hold ({@link CountedColumns}), or null when its
   * table counts none; recording from here, in the region's constructor, before any write.
   */
  private CountedColumns countedColumns;

  @Override
  public void start(CoprocessorEnvironment env) {
    lockTimeoutMs = env.getConfiguration().getLong(LOCK_TIMEOUT_KEY, DEFAULT_LOCK_TIMEOUT_MS);
    RowsCommon.configure(env.getConfiguration());
    if (env instanceof RegionCoprocessorEnvironment) {
      Region region = ((RegionCoprocessorEnvironment) env).getRegion();
      List<byte[]> counted = RowCounts.countedFamilies(region.getTableDescriptor());
      if (!counted.isEmpty()) {
        countedColumns = new CountedColumns(counted);
      }
    }
  }

  /**
   * Registers the region with {@link ChurnCompactor} once it is open, and builds its counted
   * columns ({@link CountedColumns#build}): {@code start} runs in the region's constructor,
   * before its recovered edits are replayed and its temporary files cleaned, when a flush or
   * compaction of its own must not run yet and the memstore does not hold all it will.
   */
  @Override
  public void postOpen(ObserverContext<RegionCoprocessorEnvironment> ctx) {
    RegionCoprocessorEnvironment env = ctx.getEnvironment();
    ChurnCompactor.watch(env.getRegion(), env.getConfiguration());
    if (countedColumns != null) {
      countedColumns.build(env.getRegion());
    }
  }

  /** Store files loaded in bulk pass no write hook: the counted columns stop answering. */
  @Override
  public void preBulkLoadHFile(ObserverContext<RegionCoprocessorEnvironment> ctx,
      List<Pair<byte[], String>> familyPaths) {
    if (countedColumns != null) {
      countedColumns.disable("a bulk load into " + ctx.getEnvironment().getRegion().getRegionInfo().getEncodedName());
    }
  }

  @Override
  public void stop(CoprocessorEnvironment env) {
    if (env instanceof RegionCoprocessorEnvironment) {
      ChurnCompactor.forget(((RegionCoprocessorEnvironment) env).getRegion());
    }
    if (countedColumns != null) {
      countedColumns.close();
    }
  }

  @Override
  public Optional<RegionObserver> getRegionObserver() {
    return Optional.of(this);
  }

  @Override
  public void preScannerOpen(ObserverContext<RegionCoprocessorEnvironment> ctx, Scan scan)
      throws IOException {
    RowShards.restrict(scan);
  }

  @Override
  public void preGetOp(ObserverContext<RegionCoprocessorEnvironment> ctx, Get get, List<Cell> result)
      throws IOException {
    if (RowSummaries.requested(get)) {
      RowSummaries.answer(ctx.getEnvironment(), get, result);
      ctx.bypass();
    }
  }

  /**
   * The step rows of one mini-batch: the distinct requests on each (with the index of the first
   * mutation carrying it), and the indexes of its mutations.
   */
  private static final class StepRow {
    final byte[] row;
    final Map<StepRequest, Integer> requests = new LinkedHashMap<>();
    final List<Integer> indexes = new ArrayList<>();
    String answer;  // null: passes (so far)

    StepRow(byte[] row) {
      this.row = row;
    }
  }

  @Override
  public void preBatchMutate(ObserverContext<RegionCoprocessorEnvironment> ctx,
      MiniBatchOperationInProgress<Mutation> batch) throws IOException {
    Region region = ctx.getEnvironment().getRegion();
    Map<ByteBuffer, StepRow> rows = stepRows(region.getTableDescriptor(), batch);
    RowCounts counts = RowCounts.of(region, batch, countCache, countedColumns);
    if (rows == null && counts == null) {
      return;  // no step, no counted family: the common case for plain writes, no read
    }
    // One union of stripes for both, taken at once in ascending order (RowStripes): a
    // second lockAll for the counted rows could wait on a stripe while holding others.
    List<byte[]> locked = new ArrayList<>();
    if (rows != null) {
      rows.values().forEach(r -> locked.add(r.row));
    }
    if (counts != null) {
      locked.addAll(counts.rows());
    }
    int[] stripes = RowStripes.stripesOf(locked);
    if (!RowStripes.lockAll(stripes, lockTimeoutMs)) {
      // Nothing was read or written: a retryable error, so the client tries the batch again.
      throw new IOException("caffeine: row stripes busy for " + lockTimeoutMs + " ms, retry");
    }
    HELD.get().put(batch, stripes);
    try {
      if (rows != null) {
        decideAndFail(region, batch, rows);
      }
      if (counts != null) {
        COUNTING.get().put(batch, counts);
        counts.refuseForbidden(batch);
        counts.addCounts(region, batch);
      }
    } catch (IOException | RuntimeException | Error e) {
      // The batch will not be written: let go at once (postBatchMutateIndispensably then
      // finds nothing to release). A RuntimeException escaping a coprocessor makes HBase
      // unload it or abort the server: report it as this batch's failure instead.
      release(batch, false);
      if (e instanceof RuntimeException) {
        throw new DoNotRetryIOException("caffeine: row step check failed: " + e, e);
      }
      throw e;
    }
  }

  @Override
  public void postBatchMutateIndispensably(ObserverContext<RegionCoprocessorEnvironment> ctx,
      MiniBatchOperationInProgress<Mutation> batch, boolean success) {
    release(batch, success);
  }

  /**
   * Settles the batch's counts in the cache ({@link RowCounts#settle}), then lets go of its
   * stripes: in this order, so the next batch on a row finds the cache as the store is.
   */
  private static void release(MiniBatchOperationInProgress<Mutation> batch, boolean success) {
    try {
      Map<Object, RowCounts> counting = COUNTING.get();
      if (!counting.isEmpty()) {
        RowCounts counts = counting.remove(batch);
        if (counts != null) {
          counts.settle(batch, success);
        }
      }
    } finally {
      // Whatever settling did (it only forgets or records), the stripes are let go.
      Map<Object, int[]> held = HELD.get();
      int[] stripes = held.isEmpty() ? null : held.remove(batch);
      if (stripes != null) {
        RowStripes.unlock(stripes, stripes.length);
      }
    }
  }

  /** The rows with a step mutation among the pending mutations, or null when there is none. */
  private static Map<ByteBuffer, StepRow> stepRows(TableDescriptor table,
      MiniBatchOperationInProgress<Mutation> batch) {
    Map<ByteBuffer, StepRow> rows = null;
    for (int i = 0; i < batch.size(); i++) {
      if (!RowFailures.pending(batch, i)) {
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
        StepRequest req = StepRequest.of(m);
        req.checkFamilies(table);
        sr.requests.putIfAbsent(req, i);
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
      if (RowFailures.pending(batch, i)) {
        StepRow sr = rows.get(ByteBuffer.wrap(batch.getOperation(i).getRow()));
        if (sr != null) {
          sr.indexes.add(i);
        }
      }
    }
    return rows;
  }

  private static void decideAndFail(Region region, MiniBatchOperationInProgress<Mutation> batch,
      Map<ByteBuffer, StepRow> rows) throws IOException {
    List<RowFailures.Refused> refused = new ArrayList<>();
    for (StepRow sr : rows.values()) {
      if (sr.answer == null && sr.requests.size() > 1) {
        // Checked together, both would be decided on the row as it was before either (one
        // read, one fate): two transactions' prewrites could both pass. Refused whole, before
        // reading, the same way every time; equal requests (a re-sent mutation) are one.
        sr.answer = "BAD_REQUEST " + SEVERAL_STEPS;
      }
      if (sr.answer == null) {
        Map.Entry<StepRequest, Integer> only = sr.requests.entrySet().iterator().next();
        sr.answer = RowChecks.check(region, sr.row, only.getKey());
        Delete deletes = only.getKey().deleteOf(sr.row);
        if (sr.answer == null && deletes != null) {
          // Written with the mutation that carried them, atomically (BatchAdditions); dropped
          // with it should a later hook still fail the row (RowCounts).
          BatchAdditions.add(batch, only.getValue(), deletes);
        }
      }
      if (sr.answer != null) {
        refused.add(new RowFailures.Refused(message(sr), sr.indexes));
      }
    }
    RowFailures.refuse(batch, refused);
  }

  static String message(StepRow sr) {
    return MESSAGE_PREFIX + Hex.of(sr.row) + " " + sr.answer;
  }
}
