package org.caffeine.hbase;

import java.io.IOException;
import java.util.ArrayList;
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
 * <p>Request ({@code caffeine.read} value, ASCII): {@code common <n> <row>[.<size>] ...}: the
 * rows after the Get's own, hex-encoded, each with the number of cells the client expects it
 * to hold if it knows (at most {@link #MAX_ROWS} rows in all). Looked at: the newest
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
 * to answer the reads they wait for, and such a read gives up after
 * {@code caffeine.common.remote.timeout.ms} (5 s), refused as {@code CAFFEINE-READ busy} (not
 * retried: the caller's HBase client would otherwise send it again, a timeout each); beyond
 * that share the request is refused as busy at once. Either way the client reads another way. Rows read at different points
 * may see different states of the table: a serving table is near-real-time anyway.
 *
 * <p>Cost: the Get's row is read whole; each next row only at the qualifiers common so far
 * (a Get naming those columns: the store seeks to each), unless its given size is under
 * {@link #SEEK_COST} times their number (then it is walked whole, which costs less); and none
 * once nothing is common. So a client passes the shortest row first, then the others
 * from shorter to longer: the work is about the shortest row's length, not the longest's.
 * Only the common cells are copied into the answer.
 */
final class RowsCommon {
  static final String REQUEST = "common";
  static final int MAX_ROWS = 16;
  /** The share of a region server's RPC handlers that may gather remote rows at once. */
  static final double GATHER_SHARE = 0.25;
  private static final int DEFAULT_HANDLERS = 30;
  /**
   * What seeking to a column costs against walking past one cell: on 8 KB blocks about 10 µs
   * against 0.6 µs. A row whose size the request gives is walked when the qualifiers to look
   * up are more than its size over this.
   */
  static final long SEEK_COST = 16;

  /** How long a read of a row on another region server may take, retries included. */
  static final String REMOTE_TIMEOUT_KEY = "caffeine.common.remote.timeout.ms";
  static final int DEFAULT_REMOTE_TIMEOUT_MS = 5_000;

  // One per region server (the class is loaded once per server, configure runs per region):
  // made on the first configure, never replaced, so every permit taken is given back to the
  // semaphore it was taken from.
  private static Semaphore gathering;
  private static int remoteTimeoutMs = DEFAULT_REMOTE_TIMEOUT_MS;

  private RowsCommon() {}

  /** Sizes the gathering limit from the region server's handler count (the first call only). */
  static synchronized void configure(Configuration conf) {
    if (gathering == null) {
      gathering = new Semaphore(permits(conf.getInt("hbase.regionserver.handler.count", DEFAULT_HANDLERS)));
      remoteTimeoutMs = conf.getInt(REMOTE_TIMEOUT_KEY, DEFAULT_REMOTE_TIMEOUT_MS);
    }
  }

  private static synchronized Semaphore gathering() {
    if (gathering == null) {
      gathering = new Semaphore(permits(DEFAULT_HANDLERS));
    }
    return gathering;
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

    Live(byte[] row) {
      this.row = row;
    }

    void add(Cell cell) {
      if (cell.getValueLength() > 0) {
        qualifiers.add(CellUtil.cloneQualifier(cell));
        values.add(CellUtil.cloneValue(cell));
      }
    }
  }

  /** Fills {@code result} with the answer to {@code request} (see the class comment). */
  static void answer(RegionCoprocessorEnvironment env, Get get, byte[] family, String request, List<Cell> result)
      throws IOException {
    String[] parts = request.split(" ");
    if (parts.length < 2 || parts.length > MAX_ROWS + 1) {
      throw new DoNotRetryIOException("CAFFEINE-READ bad request " + request);
    }
    int n = (int) number(parts[1], RowSummaries.MAX_PREFIX, request);
    List<byte[]> rows = new ArrayList<>();
    List<Long> sizes = new ArrayList<>();
    rows.add(get.getRow());
    sizes.add(-1L);
    for (int i = 2; i < parts.length; i++) {
      int dot = parts[i].indexOf('.');
      rows.add(row(dot < 0 ? parts[i] : parts[i].substring(0, dot), request));
      sizes.add(dot < 0 ? -1L : number(parts[i].substring(dot + 1), Long.MAX_VALUE, request));
    }
    Region region = env.getRegion();
    List<Region> homes = new ArrayList<>();  // each row's region on this server; null: elsewhere
    boolean remote = false;
    for (byte[] row : rows) {
      Region home = hostingRegion(env, row);
      homes.add(home);
      remote |= home == null;
    }
    Semaphore permits = remote ? gathering() : null;
    if (permits != null && !permits.tryAcquire()) {
      throw new DoNotRetryIOException("CAFFEINE-READ busy: too many reads gathering rows from other servers");
    }
    List<Live> read = new ArrayList<>();
    List<byte[]> common = null;
    // The Get's row's scanner stays open until the end: the rows of its region read after it,
    // at its MVCC read point, then see one state of the region (an open scanner keeps that
    // point's versions from being compacted away).
    RegionScanner pinned = null;
    try {
      for (int r = 0; r < rows.size(); r++) {
        byte[] row = rows.get(r);
        Live live = new Live(row);
        read.add(live);
        if (common != null && common.isEmpty()) {
          continue;  // nothing left in common: the rest need not be read
        }
        // The first row is read whole; each next one only at the qualifiers still common,
        // unless its size says walking it costs less than seeking to each of them.
        Get one = new Get(row).readVersions(1);
        if (common == null || (sizes.get(r) >= 0 && (long) common.size() * SEEK_COST > sizes.get(r))) {
          one.addFamily(family);
        } else {
          for (byte[] qualifier : common) {
            one.addColumn(family, qualifier);
          }
        }
        Region home = homes.get(r);
        if (home == null) {
          readRemote(env, region.getTableDescriptor().getTableName(), one, live);
        } else {
          Scan scan = new Scan(one);
          if (home == region && pinned != null) {
            PackagePrivateFieldAccessor.setMvccReadPoint(scan, pinned.getMvccReadPoint());
          }
          RegionScanner scanner = home.getScanner(scan);
          try {
            RowCells.each(scanner, cell -> {
              live.add(cell);
              return true;
            });
          } finally {
            if (home == region && pinned == null) {
              pinned = scanner;
            } else {
              scanner.close();
            }
          }
        }
        common = common == null ? live.qualifiers : intersect(common, live.qualifiers);
      }
    } finally {
      if (pinned != null) {
        pinned.close();
      }
      if (permits != null) {
        permits.release();
      }
    }
    int kept = (int) Math.min(n, common.size());
    List<Cell> cells = new ArrayList<>(kept * read.size());
    for (Live live : read) {
      int at = 0;
      for (int i = 0; i < kept; i++) {
        // Each row's live qualifiers hold every common one, in the same order.
        while (Bytes.compareTo(live.qualifiers.get(at), common.get(i)) != 0) {
          at++;
        }
        cells.add(new KeyValue(live.row, family, live.qualifiers.get(at), 0L, live.values.get(at)));
        at++;
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

  private static void readRemote(RegionCoprocessorEnvironment env, TableName table, Get get, Live live)
      throws IOException {
    // The region server's shared connection (not closed here), with a bounded wait: the
    // handler this read holds serves nothing else meanwhile.
    try (Table t = env.getConnection().getTableBuilder(table, null)
        .setOperationTimeout(remoteTimeoutMs).setRpcTimeout(remoteTimeoutMs).build()) {
      for (Cell cell : t.get(get).rawCells()) {
        live.add(cell);
      }
    } catch (IOException e) {
      // Not retried: a retry by the caller (the Thrift server's HBase client retries a
      // failed Get many times) would hold a handler for another timeout on a server that
      // does not answer. Refused as busy, the client reads the rows itself at once.
      throw new DoNotRetryIOException("CAFFEINE-READ busy: a row on another region server did not answer within "
          + remoteTimeoutMs + " ms (" + e.getClass().getSimpleName() + ")");
    }
  }

  /** The qualifiers in both sorted lists, in order (a merge). */
  static List<byte[]> intersect(List<byte[]> a, List<byte[]> b) {
    List<byte[]> out = new ArrayList<>();
    int i = 0;
    int j = 0;
    while (i < a.size() && j < b.size()) {
      int c = Bytes.compareTo(a.get(i), b.get(j));
      if (c == 0) {
        out.add(a.get(i));
        i++;
        j++;
      } else if (c < 0) {
        i++;
      } else {
        j++;
      }
    }
    return out;
  }

  /** A non-negative number of the request at most {@code max}, else the refusal. */
  private static long number(String text, long max, String request) throws DoNotRetryIOException {
    try {
      long parsed = Long.parseLong(text);
      if (parsed >= 0 && parsed <= max) {
        return parsed;
      }
    } catch (NumberFormatException e) {
      // falls through to the refusal
    }
    throw new DoNotRetryIOException("CAFFEINE-READ bad request " + request);
  }

  private static byte[] row(String hex, String request) throws DoNotRetryIOException {
    byte[] row = Hex.parse(hex);
    if (row == null) {
      throw new DoNotRetryIOException("CAFFEINE-READ bad request " + request);
    }
    return row;
  }
}
