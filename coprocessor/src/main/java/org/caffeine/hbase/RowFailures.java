package org.caffeine.hbase;

import java.util.List;
import org.apache.hadoop.hbase.DoNotRetryIOException;
import org.apache.hadoop.hbase.HConstants.OperationStatusCode;
import org.apache.hadoop.hbase.client.Mutation;
import org.apache.hadoop.hbase.regionserver.MiniBatchOperationInProgress;
import org.apache.hadoop.hbase.regionserver.OperationStatus;

/**
 * How a hook of {@code preBatchMutate} refuses rows of a mini-batch, each row with its own
 * message: in a mini-batch that holds other rows too (a Thrift2 {@code putMultiple} or
 * {@code deleteMultiple}, HBase's non-atomic batch) the refused row's pending mutations get the
 * status {@code FAILURE} with the message and the other rows still apply. When every pending
 * mutation of the mini-batch belongs to the one refused row, a {@link DoNotRetryIOException}
 * carrying the message is thrown instead: that covers the atomic batches ({@code mutateRow},
 * always one row), whose statuses HBase ignores (it would answer success having written
 * nothing), and single puts and deletes, whose {@code FAILURE} status HBase also drops.
 */
final class RowFailures {
  private RowFailures() {}

  /** One refused row: what the client is told, and the indexes of its pending mutations. */
  record Refused(String message, List<Integer> indexes) {}

  /** Refuses {@code rows} (see the class comment); nothing when the list is empty. */
  static void refuse(MiniBatchOperationInProgress<Mutation> batch, List<Refused> rows)
      throws DoNotRetryIOException {
    if (rows.isEmpty()) {
      return;
    }
    if (rows.size() == 1 && rows.get(0).indexes().size() == pendingCount(batch)) {
      DoNotRetryIOException answer = new DoNotRetryIOException(rows.get(0).message());
      // An answer, not a fault: without a stack trace the client gets the message alone
      // (HBase ships an exception to the client as its printed stack trace).
      answer.setStackTrace(new StackTraceElement[0]);
      throw answer;
    }
    for (Refused row : rows) {
      OperationStatus failed = new OperationStatus(OperationStatusCode.FAILURE, row.message());
      for (int i : row.indexes()) {
        batch.setOperationStatus(i, failed);
      }
    }
  }

  /** Whether mutation {@code i} of the mini-batch is still to be written (not failed). */
  static boolean pending(MiniBatchOperationInProgress<Mutation> batch, int i) {
    OperationStatus st = batch.getOperationStatus(i);
    return st == null || st.getOperationStatusCode() == OperationStatusCode.NOT_RUN;
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
}
