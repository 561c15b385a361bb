package org.caffeine.hbase;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.DoNotRetryIOException;
import org.apache.hadoop.hbase.KeyValue;
import org.apache.hadoop.hbase.KeyValueUtil;
import org.apache.hadoop.hbase.client.Get;
import org.apache.hadoop.hbase.client.Scan;
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
 * </ul>
 * A malformed request fails the Get with a {@link DoNotRetryIOException} whose message starts
 * with {@code CAFFEINE-READ}. The count cell's qualifier starts with a 0 byte and cannot be
 * mistaken for an answer when the coprocessor is absent: the client then receives the plain
 * row and summarizes it itself.
 *
 * <p>Cost: one pass over the row's cells inside the region server (no per-cell RPC
 * encoding), and only the prefix is copied out.
 */
final class RowSummaries {
  static final String ATTRIBUTE = "caffeine.read";
  static final byte[] COUNT_QUALIFIER = "\u0000caffeine.count".getBytes(StandardCharsets.US_ASCII);
  static final int MAX_PREFIX = 1_000_000;

  private RowSummaries() {}

  /** Whether {@code get} asks for a summary. */
  static boolean requested(Get get) {
    return get.getAttribute(ATTRIBUTE) != null;
  }

  /** Fills {@code result} with the summary {@code get} asks for (see the class comment). */
  static void answer(Region region, Get get, List<Cell> result) throws IOException {
    String request = new String(get.getAttribute(ATTRIBUTE), StandardCharsets.US_ASCII);
    long[] parsed = parse(request);
    long prefix = parsed[0];
    long since = parsed[1];
    byte[] family = get.hasFamilies() ? get.familySet().iterator().next() : null;
    if (family == null) {
      throw new DoNotRetryIOException("CAFFEINE-READ a summary read names its family");
    }
    Scan scan = new Scan(get);
    scan.readVersions(1);
    long count = 0;
    List<Cell> kept = new ArrayList<>();
    try (RegionScanner scanner = region.getScanner(scan)) {
      List<Cell> batch = new ArrayList<>();
      boolean more;
      do {
        batch.clear();
        more = scanner.nextRaw(batch);
        for (Cell cell : batch) {
          if (cell.getValueLength() == 0) {
            continue;
          }
          if (count < prefix || cell.getTimestamp() >= since) {
            // Copied: the scanner's cells may point into blocks released when it closes.
            kept.add(KeyValueUtil.copyToNewKeyValue(cell));
          }
          count++;
        }
      } while (more);
    }
    result.addAll(kept);
    result.add(new KeyValue(get.getRow(), family, COUNT_QUALIFIER, 0L,
        Long.toString(count).getBytes(StandardCharsets.US_ASCII)));
  }

  /** {prefix length, since} of a request ({0, MAX} for {@code count}: no recent cells). */
  static long[] parse(String request) throws DoNotRetryIOException {
    if (request.equals("count")) {
      return new long[] {0, Long.MAX_VALUE};
    }
    String[] parts = request.split(" ");
    if (parts[0].equals("prefix") && (parts.length == 2 || parts.length == 3)) {
      try {
        long n = Long.parseLong(parts[1]);
        long since = parts.length == 3 ? Long.parseLong(parts[2]) : Long.MAX_VALUE;
        if (n >= 0 && n <= MAX_PREFIX && since >= 0) {
          return new long[] {n, since};
        }
      } catch (NumberFormatException e) {
        // falls through to the refusal
      }
    }
    throw new DoNotRetryIOException("CAFFEINE-READ bad request " + request);
  }
}
