package org.caffeine.hbase;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.CellUtil;
import org.apache.hadoop.hbase.DoNotRetryIOException;
import org.apache.hadoop.hbase.KeyValue;
import org.apache.hadoop.hbase.KeyValueUtil;
import org.apache.hadoop.hbase.client.Get;
import org.apache.hadoop.hbase.client.PackagePrivateFieldAccessor;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.coprocessor.RegionCoprocessorEnvironment;
import org.apache.hadoop.hbase.filter.ColumnRangeFilter;
import org.apache.hadoop.hbase.regionserver.Region;
import org.apache.hadoop.hbase.regionserver.RegionScanner;

/**
 * Summaries of one row computed where the row is, so that a client needs neither the whole
 * row nor one cell per entry of it: a Get carrying the attribute {@code caffeine.read} is
 * answered by this class instead of being read (the rest of the Get — families, columns, time
 * range — still says which cells are looked at; only the newest version of each counts).
 *
 * <p>Requests ({@code caffeine.read} value, ASCII):
 * <ul>
 *   <li>{@code count}: the number of cells with a non-empty value (an empty value is a
 *       serving table's tombstone), answered as ONE cell: the row, the Get's first family,
 *       qualifier {@link #COUNT_QUALIFIER}, timestamp 0, the count in decimal ASCII.</li>
 *   <li>{@code prefix <n>}: the first {@code n} cells with a non-empty value, in qualifier
 *       order (family by family), as stored, followed by the same count cell for the whole
 *       row, so a client knows whether the prefix was all there is.</li>
 *   <li>{@code prefix <n> <since>}: the same, and after the prefix every later cell with a
 *       non-empty value whose timestamp is at least {@code since} (what changed lately).</li>
 *   <li>{@code packed <n>} and {@code packed <n> <since>}: the same cells and count as
 *       {@code prefix}, answered as ONE packed cell ({@link RowPacks}: the count, then the
 *       cells).</li>
 *   <li>{@code cells}: the cells the Get names (newest version of each, empty values too), as
 *       one packed cell whose count is their number: a read of many named columns without one
 *       encoded structure per cell on the way back.</li>
 *   <li>{@code common <n> <row> ...}: the cells the Get's row and the other rows have in
 *       common, as one packed cell ({@link RowsCommon}).</li>
 * </ul>
 * A malformed request fails the Get with a {@link DoNotRetryIOException} whose message starts
 * with {@code CAFFEINE-READ}. The count cell's qualifier starts with a 0 byte and cannot be
 * mistaken for an answer when the coprocessor is absent: the client then receives the plain
 * row and summarizes it itself.
 *
 * <p>Cost, for a counted family ({@link RowCounts}, the Get naming that whole family and no
 * time range): the count is the row's count cell, the prefix a scan that stops after its
 * {@code n}-th live cell, and the recent cells a read of the family with the time range
 * {@code [since, max)}, which skips every store file older than {@code since} and every column
 * up to the prefix's last one: what the prefix and the recent writes cost, not the row. The
 * three reads share one MVCC read point, so they see one state of the row, as one scan would.
 * A row without a count cell yet, and any other family: one pass over the row's cells inside
 * the region server (no per-cell RPC encoding), and only the prefix is copied out. Both give
 * the same answer, in the same form.
 */
final class RowSummaries {
  static final String ATTRIBUTE = "caffeine.read";
  static final byte[] COUNT_QUALIFIER = "\u0000caffeine.count".getBytes(StandardCharsets.US_ASCII);
  static final int MAX_PREFIX = 1_000_000;
  static final int HEAD_BATCH = 512;
  /** How an answer is sent ({@link #parse}'s third number). */
  static final long AS_CELLS = 0;
  static final long PACKED = 1;
  static final long GET_PACKED = 2;

  private RowSummaries() {}

  /** Whether {@code get} asks for a summary. */
  static boolean requested(Get get) {
    return get.getAttribute(ATTRIBUTE) != null;
  }

  /** Fills {@code result} with the summary {@code get} asks for (see the class comment). */
  static void answer(RegionCoprocessorEnvironment env, Get get, List<Cell> result) throws IOException {
    String request = new String(get.getAttribute(ATTRIBUTE), StandardCharsets.US_ASCII);
    byte[] family = get.hasFamilies() ? get.familySet().iterator().next() : null;
    if (family == null) {
      throw new DoNotRetryIOException("CAFFEINE-READ a summary read names its family");
    }
    if (RowsCommon.requested(request)) {
      RowsCommon.answer(env, get, family, request, result);
      return;
    }
    Region region = env.getRegion();
    long[] parsed = parse(request);
    long prefix = parsed[0];
    long since = parsed[1];
    Scan scan = new Scan(get);
    scan.readVersions(1);
    if (parsed[2] == GET_PACKED) {
      List<Cell> read = new ArrayList<>();
      try (RegionScanner scanner = region.getScanner(scan)) {
        RowCells.each(scanner, cell -> read.add(KeyValueUtil.copyToNewKeyValue(cell)));
      }
      result.add(RowPacks.pack(get.getRow(), family, read, read.size()));
      return;
    }
    List<Cell> kept = new ArrayList<>();
    long count;
    boolean countedFamily = wholeFamily(get, family) && RowCounts.counted(region, family);
    if (countedFamily) {
      // A row's cells come in batches of this many, so the head stops reading near its end
      // (unbatched, the scanner would gather the whole row before the first look at it).
      scan.setBatch(HEAD_BATCH);
    }
    try (RegionScanner scanner = region.getScanner(scan)) {
      Long counted = countedFamily
          ? keptCount(region, get.getRow(), family, scanner.getMvccReadPoint()) : null;
      if (counted == null) {
        count = walk(scanner, prefix, since, kept);
      } else {
        count = counted;
        byte[] last = head(scanner, prefix, kept);
        if (since != Long.MAX_VALUE && kept.size() == prefix) {
          recent(region, get.getRow(), family, last, since, scanner.getMvccReadPoint(), kept);
        }
      }
    }
    if (parsed[2] == PACKED) {
      result.add(RowPacks.pack(get.getRow(), family, kept, count));
      return;
    }
    result.addAll(kept);
    result.add(new KeyValue(get.getRow(), family, COUNT_QUALIFIER, 0L,
        Long.toString(count).getBytes(StandardCharsets.US_ASCII)));
  }

  /** Whether {@code get} reads the whole of {@code family}, at any time, and nothing else. */
  private static boolean wholeFamily(Get get, byte[] family) {
    return get.familySet().size() == 1 && get.getFamilyMap().get(family) == null
        && get.getTimeRange().isAllTime();
  }

  /**
   * The count {@link RowCounts} keeps for the row's family, read at {@code readPoint} (the
   * prefix scanner's, so both see one state of the row), or null when the row has none yet.
   */
  private static Long keptCount(Region region, byte[] row, byte[] family, long readPoint)
      throws IOException {
    Scan scan = new Scan(new Get(row).addColumn(RowCounts.FAMILY, family).readVersions(1));
    PackagePrivateFieldAccessor.setMvccReadPoint(scan, readPoint);
    try (RegionScanner scanner = region.getScanner(scan)) {
      List<Cell> cells = new ArrayList<>();
      scanner.nextRaw(cells);
      return cells.isEmpty() ? null : RowCounts.parse(cells.get(0));
    }
  }

  /**
   * Walks the whole row: keeps the first {@code prefix} live cells and the later live ones
   * written at or after {@code since}; returns the number of live cells.
   */
  private static long walk(RegionScanner scanner, long prefix, long since, List<Cell> kept)
      throws IOException {
    long[] count = {0};
    RowCells.each(scanner, cell -> {
      if (cell.getValueLength() > 0) {
        if (count[0] < prefix || cell.getTimestamp() >= since) {
          // Copied: the scanner's cells may point into blocks released when it closes.
          kept.add(KeyValueUtil.copyToNewKeyValue(cell));
        }
        count[0]++;
      }
      return true;
    });
    return count[0];
  }

  /**
   * Keeps the first {@code prefix} live cells, reading no further than the last of them;
   * returns its qualifier (null when none was kept).
   */
  private static byte[] head(RegionScanner scanner, long prefix, List<Cell> kept)
      throws IOException {
    if (prefix > 0) {
      RowCells.each(scanner, cell -> {
        if (cell.getValueLength() > 0) {
          kept.add(KeyValueUtil.copyToNewKeyValue(cell));
        }
        return kept.size() < prefix;
      });
    }
    return kept.isEmpty() ? null : CellUtil.cloneQualifier(kept.get(kept.size() - 1));
  }

  /**
   * Keeps the live cells of the family written at or after {@code since} whose qualifier sorts
   * after {@code after} (those up to it are in the prefix, or tombstones), read at
   * {@code readPoint}. The time range lets HBase skip every store file older than {@code since}.
   */
  private static void recent(Region region, byte[] row, byte[] family, byte[] after, long since,
      long readPoint, List<Cell> kept) throws IOException {
    Get get = new Get(row).addFamily(family).readVersions(1).setTimeRange(since, Long.MAX_VALUE);
    if (after != null) {
      get.setFilter(new ColumnRangeFilter(after, false, null, false));
    }
    Scan scan = new Scan(get);
    PackagePrivateFieldAccessor.setMvccReadPoint(scan, readPoint);
    try (RegionScanner scanner = region.getScanner(scan)) {
      RowCells.each(scanner, cell -> {
        if (cell.getValueLength() > 0) {
          kept.add(KeyValueUtil.copyToNewKeyValue(cell));
        }
        return true;
      });
    }
  }

  /**
   * {prefix length, since, form} of a request ({0, MAX} for {@code count} and {@code cells}: no
   * recent cells); the form is {@link #AS_CELLS}, {@link #PACKED} or {@link #GET_PACKED}.
   */
  static long[] parse(String request) throws DoNotRetryIOException {
    if (request.equals("count")) {
      return new long[] {0, Long.MAX_VALUE, AS_CELLS};
    }
    if (request.equals("cells")) {
      return new long[] {0, Long.MAX_VALUE, GET_PACKED};
    }
    String[] parts = request.split(" ");
    boolean packed = parts[0].equals("packed");
    if ((packed || parts[0].equals("prefix")) && (parts.length == 2 || parts.length == 3)) {
      try {
        long n = Long.parseLong(parts[1]);
        long since = parts.length == 3 ? Long.parseLong(parts[2]) : Long.MAX_VALUE;
        if (n >= 0 && n <= MAX_PREFIX && since >= 0) {
          return new long[] {n, since, packed ? PACKED : AS_CELLS};
        }
      } catch (NumberFormatException e) {
        // falls through to the refusal
      }
    }
    throw new DoNotRetryIOException("CAFFEINE-READ bad request " + request);
  }
}
