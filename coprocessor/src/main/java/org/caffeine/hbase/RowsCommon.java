package org.caffeine.hbase;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.Semaphore;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.CellUtil;
import org.apache.hadoop.hbase.DoNotRetryIOException;
import org.apache.hadoop.hbase.KeyValue;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Get;
import org.apache.hadoop.hbase.client.PackagePrivateFieldAccessor;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.coprocessor.RegionCoprocessorEnvironment;
import org.apache.hadoop.hbase.regionserver.Region;
import org.apache.hadoop.hbase.regionserver.RegionScanner;
import org.apache.hadoop.hbase.util.Bytes;

/**
 * The cells several rows have in common, found where the first row is: what an AND of
 * several posting lists needs, without sending the lists.
 *
 * <p>Request ({@code caffeine.read} value, ASCII): {@code common <n> <row> ...}: the rows after
 * the Get's own, hex-encoded (at most {@link #MAX_ROWS} rows in all). Looked at: the newest
 * version of every column of the Get's (first) family in each row; a column is live in a row
 * when that value is non-empty (an empty value is a serving table's tombstone).
 *
 * <p>Answer: ONE packed cell ({@link RowPacks}) whose count is the number of qualifiers live
 * in every row, and whose cells are, for the first {@code n} of them in qualifier order, the
 * Get's row's cell of each, then the next row's cells of the same qualifiers in the same
 * order, and so on: as many equal runs as rows, in the request's order.
 *
 * <p>Where the rows are read: the Get's row in its region; another row in its own region when
 * this region server holds that region (at the Get's row's MVCC read point when it is the same
 * region, so the rows of one region are seen in one state), else with a Get through the region
 * server's connection. Such a remote read holds an RPC handler while it waits for another:
 * at most {@link #GATHER_SHARE} of the handlers gather at once, so the others are always free
 * to answer the reads they wait for; beyond that the request is refused as
 * {@code CAFFEINE-READ busy} and the client reads another way. Rows read at different points
 * may see different states of the table: a serving table is near-real-time anyway.
 *
 * <p>Cost: every row is read whole inside the region servers (no per-cell RPC encoding back
 * to the client); the intersection walks the shortest row and binary-searches the others;
 * only the common cells are copied into the answer.
 */
final class RowsCommon {
  static final String REQUEST = "common";
  static final int MAX_ROWS = 16;
  /** The share of a region server's RPC handlers that may gather remote rows at once. */
  static final double GATHER_SHARE = 0.25;
  private static final int DEFAULT_HANDLERS = 30;

  private static volatile Semaphore gathering = new Semaphore(permits(DEFAULT_HANDLERS));

  private RowsCommon() {}

  /** Sizes the gathering limit from the region server's handler count. */
  static void configure(Configuration conf) {
    gathering = new Semaphore(permits(conf.getInt("hbase.regionserver.handler.count", DEFAULT_HANDLERS)));
  }

  private static int permits(int handlers) {
    return Math.max(1, (int) (handlers * GATHER_SHARE));
  }

  /** Whether {@code request} (a {@code caffeine.read} value) is one of this class's. */
  static boolean requested(String request) {
    return request.startsWith(REQUEST + " ");
  }

  /** A row's live cells of one family, in qualifier order: qualifiers and values, copied. */
  private static final class Live {
    final byte[] row;
    final List<byte[]> qualifiers = new ArrayList<>();
    final List<byte[]> values = new ArrayList<>();
    byte[][] sorted;

    Live(byte[] row) {
      this.row = row;
    }

    void add(Cell cell) {
      if (cell.getValueLength() > 0) {
        qualifiers.add(CellUtil.cloneQualifier(cell));
        values.add(CellUtil.cloneValue(cell));
      }
    }

    byte[][] keys() {
      if (sorted == null) {
        sorted = qualifiers.toArray(new byte[0][]);
      }
      return sorted;
    }
  }

  /** Fills {@code result} with the answer to {@code request} (see the class comment). */
  static void answer(RegionCoprocessorEnvironment env, Get get, byte[] family, String request, List<Cell> result)
      throws IOException {
    String[] parts = request.split(" ");
    int n = parseLimit(parts, request);
    List<byte[]> rows = new ArrayList<>();
    rows.add(get.getRow());
    for (int i = 2; i < parts.length; i++) {
      rows.add(unhex(parts[i], request));
    }
    Region region = env.getRegion();
    List<Live> read = new ArrayList<>();
    boolean remote = false;
    for (byte[] row : rows) {
      remote |= hostingRegion(env, row) == null;
    }
    if (remote && !gathering.tryAcquire()) {
      throw new DoNotRetryIOException("CAFFEINE-READ busy: too many reads gathering rows from other servers");
    }
    try {
      long readPoint = -1;
      for (byte[] row : rows) {
        Live live = new Live(row);
        Region home = hostingRegion(env, row);
        if (home == null) {
          readRemote(env, region.getTableDescriptor().getTableName(), row, family, live);
        } else {
          Scan scan = new Scan(new Get(row).addFamily(family).readVersions(1));
          if (home == region && readPoint >= 0) {
            PackagePrivateFieldAccessor.setMvccReadPoint(scan, readPoint);
          }
          try (RegionScanner scanner = home.getScanner(scan)) {
            if (home == region && readPoint < 0) {
              readPoint = scanner.getMvccReadPoint();
            }
            RowCells.each(scanner, cell -> {
              live.add(cell);
              return true;
            });
          }
        }
        read.add(live);
      }
    } finally {
      if (remote) {
        gathering.release();
      }
    }
    List<int[]> common = intersect(read);
    int kept = (int) Math.min(n, common.size());
    List<Cell> cells = new ArrayList<>(kept * read.size());
    for (int r = 0; r < read.size(); r++) {
      Live live = read.get(r);
      for (int i = 0; i < kept; i++) {
        int at = common.get(i)[r];
        cells.add(new KeyValue(live.row, family, live.qualifiers.get(at), 0L, live.values.get(at)));
      }
    }
    result.add(RowPacks.pack(get.getRow(), family, cells, common.size()));
  }

  /** The region of this region server's table that holds {@code row}, or null when none does. */
  private static Region hostingRegion(RegionCoprocessorEnvironment env, byte[] row) throws IOException {
    Region region = env.getRegion();
    if (region.getRegionInfo().containsRow(row)) {
      return region;
    }
    TableName table = region.getTableDescriptor().getTableName();
    for (Region other : env.getOnlineRegions().getRegions(table)) {
      if (other.getRegionInfo().containsRow(row)) {
        return other;
      }
    }
    return null;
  }

  private static void readRemote(RegionCoprocessorEnvironment env, TableName table, byte[] row, byte[] family,
      Live live) throws IOException {
    // The region server's shared connection: not closed here.
    try (Table t = env.getConnection().getTable(table)) {
      Result got = t.get(new Get(row).addFamily(family).readVersions(1));
      for (Cell cell : got.rawCells()) {
        live.add(cell);
      }
    }
  }

  /**
   * For each qualifier live in every row, in qualifier order, its index in each row: walks the
   * shortest row and binary-searches the others from where their last match was.
   */
  static List<int[]> intersect(List<Live> rows) {
    int shortest = 0;
    for (int r = 1; r < rows.size(); r++) {
      if (rows.get(r).qualifiers.size() < rows.get(shortest).qualifiers.size()) {
        shortest = r;
      }
    }
    byte[][][] keys = new byte[rows.size()][][];
    for (int r = 0; r < rows.size(); r++) {
      keys[r] = rows.get(r).keys();
    }
    int[] from = new int[rows.size()];
    List<int[]> common = new ArrayList<>();
    walk:
    for (int i = 0; i < keys[shortest].length; i++) {
      byte[] qualifier = keys[shortest][i];
      int[] at = new int[rows.size()];
      for (int r = 0; r < rows.size(); r++) {
        if (r == shortest) {
          at[r] = i;
          continue;
        }
        int found = Arrays.binarySearch(keys[r], from[r], keys[r].length, qualifier, Bytes.BYTES_COMPARATOR);
        if (found < 0) {
          from[r] = -found - 1;
          if (from[r] >= keys[r].length) {
            break walk;  // this row has no later qualifier: nothing more is common
          }
          continue walk;
        }
        at[r] = found;
        from[r] = found + 1;
      }
      common.add(at);
    }
    return common;
  }

  private static int parseLimit(String[] parts, String request) throws DoNotRetryIOException {
    if (parts.length >= 2 && parts.length <= MAX_ROWS + 1) {
      try {
        int n = Integer.parseInt(parts[1]);
        if (n >= 0 && n <= RowSummaries.MAX_PREFIX) {
          return n;
        }
      } catch (NumberFormatException e) {
        // falls through to the refusal
      }
    }
    throw new DoNotRetryIOException("CAFFEINE-READ bad request " + request);
  }

  private static byte[] unhex(String hex, String request) throws DoNotRetryIOException {
    if (hex.length() % 2 != 0 || hex.isEmpty()) {
      throw new DoNotRetryIOException("CAFFEINE-READ bad request " + request);
    }
    byte[] out = new byte[hex.length() / 2];
    for (int i = 0; i < out.length; i++) {
      int hi = Character.digit(hex.charAt(2 * i), 16);
      int lo = Character.digit(hex.charAt(2 * i + 1), 16);
      if (hi < 0 || lo < 0) {
        throw new DoNotRetryIOException("CAFFEINE-READ bad request " + request);
      }
      out[i] = (byte) (hi << 4 | lo);
    }
    return out;
  }
}
