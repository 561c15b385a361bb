package org.caffeine.hbase;

import java.io.IOException;
import java.util.List;
import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.CellUtil;
import org.apache.hadoop.hbase.client.Get;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.regionserver.Region;

/**
 * The preconditions of the Percolator row steps: one read of the row's protocol cells, then a
 * decision. Contract: {@link #check} returns null when the step may apply, else the answer
 * (the part of the failure message after {@code row=<hex>}: an upper-case word and its
 * space-separated lower-case hex or decimal arguments).
 *
 * <p>The table layout (caffeine/percolator/layout.py): family {@code l} holds a transaction's
 * lock at its start_ts (one version), family {@code w} its write records: 9 bytes, a kind byte
 * (1 PUT, 2 DELETE, 3 ROLLBACK) and the writing transaction's start_ts (u64 big-endian); PUT
 * and DELETE at commit_ts, ROLLBACK at start_ts. The checks, per column in the request's order,
 * the first failing one answering:
 * <ul>
 *   <li>prewrite: {@code w} records at ts &gt;= start_ts, newest first: a ROLLBACK at exactly
 *       start_ts answers {@code ROLLED_BACK}, any other kind {@code CONFLICT <col> <ts>}
 *       (rollback records at other timestamps are skipped); then the latest lock: one at
 *       another ts answers {@code LOCKED <col> <lock ts> <lock value>} (our own is fine: a
 *       re-sent prewrite).</li>
 *   <li>commit: our lock (latest lock at start_ts) is fine; otherwise the write record that
 *       names start_ts: not a ROLLBACK answers {@code COMMITTED <its ts>}, a ROLLBACK or none
 *       {@code ROLLED_BACK}.</li>
 *   <li>rollback: a write record naming start_ts that is not a ROLLBACK answers
 *       {@code COMMITTED <its ts>}; anything else is fine.</li>
 *   <li>probe: always {@code PROBE <version>}, without reading.</li>
 * </ul>
 * Timestamps print in decimal, columns and lock values in lower-case hex.
 */
final class RowChecks {
  static final byte[] LOCK = {'l'};
  static final byte[] WRITE = {'w'};
  static final byte KIND_ROLLBACK = 3;
  /** The wire protocol's version, answered to a probe. */
  static final String PROTOCOL_VERSION = "2";

  private RowChecks() {
  }

  static String check(Region region, byte[] row, StepRequest req) throws IOException {
    if (req.step == StepRequest.Step.PROBE) {
      return "PROBE " + PROTOCOL_VERSION;
    }
    Result result = region.get(readFor(row, req));
    for (byte[] col : req.columns) {
      String answer = decide(req, col, result.getColumnCells(LOCK, col),
          result.getColumnCells(WRITE, col));
      if (answer != null) {
        return answer;
      }
    }
    return null;
  }

  /** One read per row: every column's lock (latest) and its write records at ts &gt;= start_ts. */
  static Get readFor(byte[] row, StepRequest req) throws IOException {
    Get get = new Get(row);
    for (byte[] col : req.columns) {
      get.addColumn(LOCK, col);
      get.addColumn(WRITE, col);
    }
    get.readAllVersions();
    get.setColumnFamilyTimeRange(WRITE, req.startTs, Long.MAX_VALUE);
    return get;
  }

  /** The decision for one column; cells newest first, as a Result holds them. */
  static String decide(StepRequest req, byte[] col, List<Cell> locks, List<Cell> writes) {
    Cell lock = locks.isEmpty() ? null : locks.get(0);
    long start = req.startTs;
    switch (req.step) {
      case PREWRITE:
        for (Cell w : writes) {
          long ts = w.getTimestamp();
          if (ts < start) {
            break;  // the read's time range already excludes these; kept for clarity
          }
          if (kind(w) == KIND_ROLLBACK) {
            if (ts == start) {
              return "ROLLED_BACK";
            }
            continue;
          }
          return "CONFLICT " + Hex.of(col) + " " + ts;
        }
        if (lock != null && lock.getTimestamp() != start) {
          return "LOCKED " + Hex.of(col) + " " + lock.getTimestamp() + " "
              + Hex.of(CellUtil.cloneValue(lock));
        }
        return null;
      case COMMIT: {
        if (lock != null && lock.getTimestamp() == start) {
          return null;
        }
        Cell record = commitRecordOf(writes, start);
        return record != null ? "COMMITTED " + record.getTimestamp() : "ROLLED_BACK";
      }
      case ROLLBACK: {
        Cell record = commitRecordOf(writes, start);
        return record != null ? "COMMITTED " + record.getTimestamp() : null;
      }
      default:
        throw new IllegalArgumentException("no check for " + req.step);
    }
  }

  /** The newest PUT/DELETE record (not a ROLLBACK) that names {@code start}, or null. */
  private static Cell commitRecordOf(List<Cell> writes, long start) {
    for (Cell w : writes) {
      if (w.getValueLength() >= 9 && kind(w) != KIND_ROLLBACK && encodedStart(w) == start) {
        return w;
      }
    }
    return null;
  }

  /** The record's kind byte; 0 for an empty value (counts as "not a rollback"). */
  private static byte kind(Cell w) {
    return w.getValueLength() == 0 ? 0 : w.getValueArray()[w.getValueOffset()];
  }

  private static long encodedStart(Cell w) {
    byte[] a = w.getValueArray();
    int off = w.getValueOffset() + 1;
    long v = 0;
    for (int i = 0; i < 8; i++) {
      v = (v << 8) | (a[off + i] & 0xffL);
    }
    return v;
  }
}
