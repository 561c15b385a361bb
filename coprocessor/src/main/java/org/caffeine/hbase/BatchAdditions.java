package org.caffeine.hbase;

import java.util.Arrays;
import org.apache.hadoop.hbase.client.Mutation;
import org.apache.hadoop.hbase.regionserver.MiniBatchOperationInProgress;

/**
 * Mutations a hook adds to a mini-batch, written atomically with the mutation they ride on.
 *
 * <p>{@code MiniBatchOperationInProgress.addOperationsFromCP(i, ms)} REPLACES the array added at
 * index {@code i}, so two hooks adding to one index (a step's carried deletes, a row's new
 * counts) would lose the first one's: {@link #add} appends instead.
 *
 * <p>Verified in HBase 2.6.1's {@code HRegion.MutationBatchOperation}: right after
 * {@code preBatchMutate}, {@code checkAndMergeCPMutations} visits the still pending indexes
 * only (a row failed by a hook has its additions dropped with it), runs
 * {@code checkAndPrepareMutation} on each added mutation (for a Delete: {@code prepareDelete},
 * which checks that its families exist, throwing {@code NoSuchColumnFamilyException} for the
 * whole mini-batch otherwise, and does not restamp cells: {@code prepareDeleteTimestamps}, which
 * turns LATEST_TIMESTAMP into "now", ran before the hook and only on the batch's own
 * mutations), and merges its cells into the family map of the mutation at that index. That map
 * is what {@code buildWALEdits} puts into the mini-batch's one WAL edit and what
 * {@code writeMiniBatchOperationsToMemStore} adds to the memstore under the batch's one MVCC
 * write number: added cells, delete markers included, become durable and visible together with
 * the mutation's own. A Delete cell of type {@code Delete} ({@code Delete.addColumn(f, q, ts)})
 * masks exactly the version at ts, one of type {@code DeleteColumn}
 * ({@code Delete.addColumns(f, q, ts)}) every version at or below ts
 * ({@code ScanDeleteTracker.isDeleted}), written before or after the marker, until a major
 * compaction.
 */
final class BatchAdditions {
  private BatchAdditions() {}

  /** Adds {@code m} to the mutations riding on the batch's mutation at {@code index}. */
  static void add(MiniBatchOperationInProgress<Mutation> batch, int index, Mutation m) {
    Mutation[] before = batch.getOperationsFromCoprocessors(index);
    Mutation[] after;
    if (before == null) {
      after = new Mutation[] {m};
    } else {
      after = Arrays.copyOf(before, before.length + 1);
      after[before.length] = m;
    }
    batch.addOperationsFromCP(index, after);
  }
}
