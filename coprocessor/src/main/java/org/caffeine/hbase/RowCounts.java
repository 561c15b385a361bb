package org.caffeine.hbase;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.CellUtil;
import org.apache.hadoop.hbase.HConstants;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptor;
import org.apache.hadoop.hbase.client.Delete;
import org.apache.hadoop.hbase.client.Get;
import org.apache.hadoop.hbase.client.Mutation;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.client.TableDescriptor;
import org.apache.hadoop.hbase.regionserver.MiniBatchOperationInProgress;
import org.apache.hadoop.hbase.regionserver.Region;
import org.apache.hadoop.hbase.regionserver.RegionScanner;

/**
 * Live-cell counts of counted families, kept at write time so that a summary read
 * ({@link RowSummaries}) need not walk a row to count it.
 *
 * <p>A family is counted when its descriptor's configuration says
 * {@code caffeine.count = live}. Its table then also has the family {@code _n}: per row, one
 * cell per counted family (qualifier = the family's name, value = the count in decimal ASCII)
 * holding how many of the row's columns of that family have a non-empty newest value (an
 * empty value is a serving table's tombstone).
 *
 * <p>Per row of a mini-batch with cells in a counted family, under the row's stripe
 * ({@link RowStripes}, held until the batch is visible), one Get reads the newest version of
 * every written column and the count cell (not the count cell when the region's
 * {@link CountCache} holds it: the cache is settled from the batch's outcome before the stripes
 * are let go, {@link #settle}); the row's put cells are then applied in batch order
 * with HBase's own visibility rule (a cell at a timestamp at or above the column's newest one
 * replaces it, the later one on a tie; a lower one stays hidden), and the count moves by what
 * became live or dead. A replay (same cells, same timestamps) moves nothing. An absent count
 * cell is first computed by walking the row's family once, so a family counted after data was
 * written, or a row written before its table was, still ends up right. The new count is added
 * to the batch ({@code addOperationsFromCP}) as a put at the old count cell's timestamp + 1, so
 * it always supersedes it and is written, in the WAL and the memstore, with the row's cells.
 *
 * <p>That Get is most of what a counted write costs the region server (its seeks into the
 * counted family's memstore and store files, for the written columns), so it leaves out the
 * columns the region never held ({@link CountedColumns}: a new document's columns, almost all
 * of an export's), and is not made at all when that leaves nothing to read. The count family
 * is laid out for it too ({@code caffeine.storage.hbase.COUNT_FAMILY_SPEC}): its blocks index
 * their rows (ROW_INDEX_V1), so seeking a row's count cell bisects a block instead of walking
 * its small cells from the start.
 *
 * <p>Deletes are refused (a whole row's pending mutations, {@link RowFailures}) with a message
 * starting {@code CAFFEINE-COUNT}: a delete can uncover an older version whose liveness only a
 * read of every version could tell; a serving table removes a cell by writing an empty value.
 * So are Increments and Appends (HBase computes their cells after this hook, which would not
 * count them) and puts with a time to live (HBase gives the count cells added to a mutation
 * its TTL, and a cell that expires would leave the count it moved).
 * So is any client mutation of the count family itself: a count is kept, never recomputed, so
 * one written from outside would stay wrong (and a count too low makes a partial head of a row
 * look whole to a summary read).
 *
 * <p>Verified in HBase 2.6.1's {@code HRegion}: {@code checkAndMergeCPMutations} (called right
 * after {@code preBatchMutate}) merges the added cells into the mutation's family map after
 * {@code checkAndPrepareMutation}, which only sanity-checks timestamps
 * ({@code checkTimestamps}, off by default) and does not restamp them (only the batch's own
 * cells at LATEST_TIMESTAMP get "now", in {@code prepareMiniBatchOperations}, before the hook):
 * the explicit timestamp of the count cell is kept, and it goes to the WAL with the batch
 * ({@code buildWALEdits} runs after). {@code doMiniBatchMutate} completes the MVCC write entry
 * ({@code completeMiniBatchOperations}: {@code mvcc.completeAndWait}) before its
 * {@code finally} calls {@code postBatchMutateIndispensably}, where the stripes are released, so
 * the next batch on the row reads this batch's cells and count.
 */
final class RowCounts {
  static final String CONFIG_KEY = "caffeine.count";
  static final String CONFIG_LIVE = "live";
  static final byte[] FAMILY = "_n".getBytes(StandardCharsets.US_ASCII);
  static final String MESSAGE_PREFIX = "CAFFEINE-COUNT";

  /** The cells one row writes to counted families, and the indexes of its mutations. */
  private static final class CountedRow {
    final byte[] row;
    final List<Integer> indexes = new ArrayList<>();
    String refusal;  // why this row's mutations are refused (a delete, a write of the counts)

    CountedRow(byte[] row) {
      this.row = row;
    }
  }

  /** A count put added to the batch: recorded in the cache once its mutation is written. */
  private record Written(byte[] row, byte[] family, CountCache.Entry entry, int index) {}

  private final List<byte[]> counted;
  private final Map<ByteBuffer, CountedRow> rows;
  private final CountCache cache;
  private final CountedColumns columns;
  private final List<Written> written = new ArrayList<>();

  private RowCounts(List<byte[]> counted, Map<ByteBuffer, CountedRow> rows, CountCache cache,
      CountedColumns columns) {
    this.counted = counted;
    this.rows = rows;
    this.cache = cache;
    this.columns = columns;
  }

  /** The counted families of {@code table} (none without the count family). */
  static List<byte[]> countedFamilies(TableDescriptor table) {
    List<byte[]> counted = new ArrayList<>();
    if (table.hasColumnFamily(FAMILY)) {
      for (ColumnFamilyDescriptor family : table.getColumnFamilies()) {
        if (CONFIG_LIVE.equals(family.getConfigurationValue(CONFIG_KEY))) {
          counted.add(family.getName());
        }
      }
    }
    return counted;
  }

  /**
   * Whether {@code family} of the region's table is counted. A table without the count family
   * counts nothing (its writes must not fail on a family it lacks).
   */
  static boolean counted(Region region, byte[] family) {
    return counted(region.getTableDescriptor(), family);
  }

  /** Whether {@code family} of {@code table} is counted (see above). */
  static boolean counted(TableDescriptor table, byte[] family) {
    ColumnFamilyDescriptor descriptor = table.getColumnFamily(family);
    return descriptor != null && CONFIG_LIVE.equals(descriptor.getConfigurationValue(CONFIG_KEY))
        && table.hasColumnFamily(FAMILY);
  }

  /**
   * The rows of the mini-batch with pending mutations in a counted family, or null when there
   * is none (a table without counted families costs a look at its few descriptors).
   */
  static RowCounts of(Region region, MiniBatchOperationInProgress<Mutation> batch,
      CountCache cache, CountedColumns columns) {
    List<byte[]> counted = countedFamilies(region.getTableDescriptor());
    if (counted.isEmpty()) {
      return null;
    }
    Map<ByteBuffer, CountedRow> rows = null;
    for (int i = 0; i < batch.size(); i++) {
      if (!RowFailures.pending(batch, i)) {
        continue;
      }
      Mutation m = batch.getOperation(i);
      byte[] touched = touchedCounted(m, counted);
      boolean writesCounts = m.getFamilyCellMap().containsKey(FAMILY);
      if (touched == null && !writesCounts) {
        continue;
      }
      if (rows == null) {
        rows = new LinkedHashMap<>();
      }
      byte[] row = m.getRow();
      CountedRow cr = rows.computeIfAbsent(ByteBuffer.wrap(row), k -> new CountedRow(row));
      if (cr.refusal == null) {
        cr.refusal = refusalOf(m, touched, writesCounts);
      }
    }
    return rows == null ? null : new RowCounts(counted, rows, cache, columns);
  }

  /**
   * Why {@code m}, a mutation with cells in counted family {@code touched} or in the count
   * family itself ({@code writesCounts}), is refused, or null when it may be counted (see the
   * class comment).
   */
  private static String refusalOf(Mutation m, byte[] touched, boolean writesCounts) {
    if (writesCounts) {
      return "family _n holds the counts the store keeps and takes no client writes";
    }
    if (m instanceof Delete) {
      return "family " + name(touched)
          + " is counted and takes no deletes: write an empty value instead";
    }
    if (!(m instanceof Put)) {
      // An Increment or Append: HBase computes its cells after this hook could count them.
      return "family " + name(touched) + " is counted and takes no "
          + m.getClass().getSimpleName().toLowerCase(Locale.ROOT)
          + "s: write the new value instead";
    }
    if (m.getTTL() != Long.MAX_VALUE) {
      // HBase gives the count cells added to it the mutation's TTL too (rewriteCellTags in
      // checkAndMergeCPMutations), and expiring cells would leave the count they moved.
      return "family " + name(touched) + " is counted and takes no cells with a time to live";
    }
    return null;
  }

  private static String name(byte[] family) {
    return new String(family, StandardCharsets.UTF_8);
  }

  /** The first counted family {@code m} has cells in (a Delete of a whole row: all), or null. */
  private static byte[] touchedCounted(Mutation m, List<byte[]> counted) {
    if (m instanceof Delete && m.getFamilyCellMap().isEmpty()) {
      return counted.get(0);
    }
    for (byte[] family : counted) {
      if (m.getFamilyCellMap().containsKey(family)) {
        return family;
      }
    }
    return null;
  }

  /** The rows whose counts this batch may change: their stripes must be held. */
  List<byte[]> rows() {
    List<byte[]> out = new ArrayList<>(rows.size());
    for (CountedRow cr : rows.values()) {
      out.add(cr.row);
    }
    return out;
  }

  /**
   * Refuses every row that deletes in a counted family or writes the count family (see the
   * class comment).
   */
  void refuseForbidden(MiniBatchOperationInProgress<Mutation> batch) throws IOException {
    List<RowFailures.Refused> refused = new ArrayList<>();
    for (CountedRow cr : rows.values()) {
      if (cr.refusal == null) {
        continue;
      }
      List<Integer> indexes = new ArrayList<>();
      for (int i = 0; i < batch.size(); i++) {
        if (RowFailures.pending(batch, i)
            && Arrays.equals(batch.getOperation(i).getRow(), cr.row)) {
          indexes.add(i);
        }
      }
      if (!indexes.isEmpty()) {
        refused.add(new RowFailures.Refused(
            MESSAGE_PREFIX + " row=" + Hex.of(cr.row) + " " + cr.refusal, indexes));
      }
    }
    RowFailures.refuse(batch, refused);
  }

  /** Adds each row's new counts to the batch (see the class comment). */
  void addCounts(Region region, MiniBatchOperationInProgress<Mutation> batch) throws IOException {
    for (int i = 0; i < batch.size(); i++) {
      if (RowFailures.pending(batch, i) && batch.getOperation(i) instanceof Put) {
        CountedRow cr = rows.get(ByteBuffer.wrap(batch.getOperation(i).getRow()));
        if (cr != null && touchedCounted(batch.getOperation(i), counted) != null) {
          cr.indexes.add(i);
        }
      }
    }
    for (CountedRow cr : rows.values()) {
      if (!cr.indexes.isEmpty()) {
        List<Written> changed = new ArrayList<>();
        int carrier = cr.indexes.get(cr.indexes.size() - 1);
        Put counts = countPut(region, batch, cr, carrier, changed);
        if (counts != null) {
          // The last put of the row carries it (beside a step's carried deletes, if any).
          BatchAdditions.add(batch, carrier, counts);
          // Forgotten until settle records the new count: should this batch's outcome never
          // reach the cache, the next write reads the store rather than the old count.
          for (Written w : changed) {
            cache.remove(w.row(), w.family());
          }
          written.addAll(changed);
        }
      }
    }
  }

  /**
   * Records in the cache the count puts this batch wrote, and forgets those it did not; called
   * once the batch is done ({@code postBatchMutateIndispensably}: HBase has set each mutation's
   * status by then), or failed, while the rows' stripes are still held.
   */
  void settle(MiniBatchOperationInProgress<Mutation> batch, boolean success) {
    for (Written w : written) {
      if (success && batch.getOperationStatus(w.index()).getOperationStatusCode()
          == HConstants.OperationStatusCode.SUCCESS) {
        cache.put(w.row(), w.family(), w.entry());
      } else {
        cache.remove(w.row(), w.family());
      }
    }
    written.clear();
  }

  /** A column's newest version as far as this batch has got: its timestamp and liveness. */
  private record Newest(long ts, boolean live) {}

  /**
   * The put of the row's changed count cells, or null when no count changed; each changed
   * count is also added to {@code changed} (carried by mutation {@code carrier}). A count cell
   * the cache holds is not read; one read that this batch leaves as it is, is recorded in the
   * cache at once (it is the stored one whatever becomes of this batch); one it changes is
   * recorded by {@link #settle}, if the batch is written.
   */
  private Put countPut(Region region, MiniBatchOperationInProgress<Mutation> batch, CountedRow cr,
      int carrier, List<Written> changed) throws IOException {
    Get get = new Get(cr.row).readVersions(1);
    boolean reads = false;  // whether the Get names a column (one naming none reads the row)
    Map<ByteBuffer, CountCache.Entry> known = new HashMap<>();
    for (int i : cr.indexes) {
      for (byte[] family : counted) {
        List<Cell> cells = batch.getOperation(i).getFamilyCellMap().get(family);
        if (cells != null) {
          for (Cell cell : cells) {
            byte[] qualifier = CellUtil.cloneQualifier(cell);
            // A column the region never held has no newest version to read.
            if (columns == null || columns.record(family, cr.row, qualifier)) {
              get.addColumn(family, qualifier);
              reads = true;
            }
          }
          ByteBuffer name = ByteBuffer.wrap(family);
          if (!known.containsKey(name)) {
            CountCache.Entry cached = cache.get(cr.row, family);
            known.put(name, cached);
            if (cached == null) {
              get.addColumn(FAMILY, family);
              reads = true;
            }
          }
        }
      }
    }
    // Newest versions by family + qualifier, and the count cells by family.
    Map<ByteBuffer, Newest> newest = new HashMap<>();
    Set<ByteBuffer> read = new HashSet<>();  // the families whose count cell came from the store
    for (Cell cell : reads ? region.get(get, false) : List.<Cell>of()) {
      if (CellUtil.matchingFamily(cell, FAMILY)) {
        ByteBuffer family = ByteBuffer.wrap(CellUtil.cloneQualifier(cell));
        CountCache.Entry stored = new CountCache.Entry(parse(cell), cell.getTimestamp());
        known.put(family, stored);
        read.add(family);
      } else {
        newest.put(column(CellUtil.cloneFamily(cell), CellUtil.cloneQualifier(cell)),
            new Newest(cell.getTimestamp(), cell.getValueLength() > 0));
      }
    }
    Put out = null;
    for (byte[] family : counted) {
      long delta = 0;
      boolean written = false;
      for (int i : cr.indexes) {
        List<Cell> cells = batch.getOperation(i).getFamilyCellMap().get(family);
        if (cells == null) {
          continue;
        }
        written = true;
        for (Cell cell : cells) {
          ByteBuffer key = column(family, CellUtil.cloneQualifier(cell));
          Newest before = newest.get(key);
          long ts = cell.getTimestamp();
          if (before == null || ts >= before.ts() || ts == HConstants.LATEST_TIMESTAMP) {
            boolean live = cell.getValueLength() > 0;
            delta += (live ? 1 : 0) - (before != null && before.live() ? 1 : 0);
            newest.put(key, new Newest(ts, live));
          }
        }
      }
      if (!written) {
        continue;
      }
      CountCache.Entry old = known.get(ByteBuffer.wrap(family));
      if (old != null && delta == 0) {
        if (read.contains(ByteBuffer.wrap(family))) {
          cache.put(cr.row, family, old);  // unchanged by this batch: stored as read
        }
        continue;
      }
      long base = old != null ? old.count() : walk(region, cr.row, family);
      long ts = old != null ? old.ts() + 1 : 1;
      if (out == null) {
        out = new Put(cr.row);
      }
      out.addColumn(FAMILY, family, ts,
          Long.toString(base + delta).getBytes(StandardCharsets.US_ASCII));
      changed.add(new Written(cr.row, family, new CountCache.Entry(base + delta, ts), carrier));
    }
    return out;
  }

  private static ByteBuffer column(byte[] family, byte[] qualifier) {
    byte[] key = new byte[4 + family.length + qualifier.length];
    ByteBuffer.wrap(key).putInt(family.length).put(family).put(qualifier);
    return ByteBuffer.wrap(key);
  }

  /** The count a count cell holds. */
  static long parse(Cell cell) throws IOException {
    try {
      return Long.parseLong(new String(CellUtil.cloneValue(cell), StandardCharsets.US_ASCII));
    } catch (NumberFormatException e) {
      throw new IOException(
          "caffeine: malformed count cell in row " + Hex.of(CellUtil.cloneRow(cell)), e);
    }
  }

  /** The row's number of live cells of {@code family}, by walking them (as stored now). */
  static long walk(Region region, byte[] row, byte[] family) throws IOException {
    Scan scan = new Scan(new Get(row).addFamily(family).readVersions(1));
    long[] count = {0};
    try (RegionScanner scanner = region.getScanner(scan)) {
      RowCells.each(scanner, cell -> {
        if (cell.getValueLength() > 0) {
          count[0]++;
        }
        return true;
      });
    }
    return count[0];
  }
}
