package org.caffeine.hbase;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.CellUtil;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.filter.KeyOnlyFilter;
import org.apache.hadoop.hbase.regionserver.Region;
import org.apache.hadoop.hbase.regionserver.RegionScanner;
import org.apache.hbase.thirdparty.com.google.common.hash.BloomFilter;
import org.apache.hbase.thirdparty.com.google.common.hash.Funnels;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Every column a region's counted families have ever held, as Bloom filters, so that a counted
 * write of a column the region never held need not read it ({@link RowCounts}): for a page's
 * first export, which writes one new column in each of a few hundred rows, that read was most
 * of what the count cost.
 *
 * <p>Contract: once {@link #complete()}, {@link #mightHold} answers false only for a column
 * that no cell of the region has. It holds because a column of a counted family, once it has
 * a cell, always has one: such a family takes no deletes and no cells with a time to live
 * ({@link RowCounts} refuses them), a serving table removes a cell by writing an empty value,
 * and a compaction keeps each column's newest version. So the set of columns only grows, and a
 * Bloom filter (no false negatives) can answer for it:
 *
 * <ul>
 *   <li>recording starts when the coprocessor instance is made, in the region's constructor,
 *       before the region takes its first write: every counted put passes {@link RowCounts},
 *       which adds its columns here (before it is written: a batch that then fails leaves a
 *       column that only costs a read);
 *   <li>{@link #build} then adds every column the region holds, by scanning its counted
 *       families once the region is open ({@code postOpen}: after its recovered edits were
 *       replayed into the memstore, which no write hook sees). A column written before the
 *       scan's read point is in the scan; one written later was recorded. Only then is the
 *       set complete;
 *   <li>a bulk load adds store files no hook sees: {@link #disable} turns the filters off for
 *       the rest of the region's life (every write reads again, as without them).
 * </ul>
 *
 * <p>A false positive (about 1%) costs the read it would have saved. The filters grow by
 * doubling as columns are added; past {@link #MAX_COLUMNS} they are dropped and the region
 * reads again. A build that meets more than {@link #MAX_COLUMNS} cells or runs longer than
 * {@link #MAX_BUILD_MS} gives up the same way: a region's open is not held up for long.
 */
final class CountedColumns {
  private static final Logger LOG = LoggerFactory.getLogger(CountedColumns.class);
  private static final double FALSE_POSITIVES = 0.01;
  private static final long FIRST_CAPACITY = 1 << 14;
  /** Columns the filters of one region answer for at most: about 40 MB of filters. */
  static final long MAX_COLUMNS = 1L << 25;
  static final long MAX_BUILD_MS = 15_000;

  private final List<BloomFilter<byte[]>> filters = new CopyOnWriteArrayList<>();
  private final AtomicLong addedToNewest = new AtomicLong();
  private volatile BloomFilter<byte[]> newest;
  private volatile long newestCapacity = FIRST_CAPACITY;
  private long totalCapacity = FIRST_CAPACITY;
  private volatile boolean complete;
  private volatile boolean disabled;

  CountedColumns() {
    newest = BloomFilter.create(Funnels.byteArrayFunnel(), FIRST_CAPACITY, FALSE_POSITIVES);
    filters.add(newest);
  }

  /** Whether {@link #mightHold} now answers for the whole region. */
  boolean complete() {
    return complete && !disabled;
  }

  /**
   * False only when the set is complete and the region holds no cell of the column; true when
   * it may (or when the set cannot tell).
   */
  boolean mightHold(byte[] family, byte[] row, byte[] qualifier) {
    if (!complete()) {
      return true;
    }
    byte[] key = key(family, row, qualifier);
    for (BloomFilter<byte[]> filter : filters) {
      if (filter.mightContain(key)) {
        return true;
      }
    }
    return false;
  }

  /** Records that the region holds (or is about to hold) a cell of the column. */
  void add(byte[] family, byte[] row, byte[] qualifier) {
    if (disabled) {
      return;
    }
    newest.put(key(family, row, qualifier));
    if (addedToNewest.incrementAndGet() > newestCapacity) {
      grow();
    }
  }

  private synchronized void grow() {
    if (disabled || addedToNewest.get() <= newestCapacity) {
      return;  // another thread grew it meanwhile
    }
    long capacity = newestCapacity * 2;
    if (totalCapacity + capacity > MAX_COLUMNS) {
      disable("more than " + MAX_COLUMNS + " columns");
      return;
    }
    // The new filter takes the new columns; the full one stays and is still asked.
    BloomFilter<byte[]> next = BloomFilter.create(Funnels.byteArrayFunnel(), capacity, FALSE_POSITIVES);
    filters.add(next);
    totalCapacity += capacity;
    newestCapacity = capacity;
    newest = next;
    addedToNewest.set(0);
  }

  /** The set stops answering for the region: every counted write reads its columns again. */
  void disable(String why) {
    if (!disabled) {
      disabled = true;
      filters.clear();
      LOG.info("counted columns: filters off ({}); counted writes read their columns", why);
    }
  }

  /**
   * Adds every column of {@code families} the region holds, then declares the set complete;
   * gives up (leaving it incomplete) past {@link #MAX_COLUMNS} cells or {@link #MAX_BUILD_MS}.
   */
  void build(Region region, List<byte[]> families) {
    long started = System.nanoTime();
    Scan scan = new Scan().readVersions(1).setFilter(new KeyOnlyFilter()).setCacheBlocks(false);
    for (byte[] family : families) {
      scan.addFamily(family);
    }
    long cells = 0;
    try (RegionScanner scanner = region.getScanner(scan)) {
      List<Cell> batch = new ArrayList<>();
      boolean more;
      do {
        batch.clear();
        more = scanner.next(batch);
        for (Cell cell : batch) {
          add(CellUtil.cloneFamily(cell), CellUtil.cloneRow(cell), CellUtil.cloneQualifier(cell));
        }
        cells += batch.size();
        long ms = (System.nanoTime() - started) / 1_000_000;
        if (ms > MAX_BUILD_MS) {
          disable("the build of " + region.getRegionInfo().getEncodedName() + " took over "
              + MAX_BUILD_MS + " ms, " + cells + " cells read");
        }
        if (disabled) {
          return;
        }
      } while (more);
    } catch (IOException | RuntimeException e) {
      disable("the build of " + region.getRegionInfo().getEncodedName() + " failed: " + e);
      return;
    }
    complete = true;
    LOG.info("counted columns of {}: {} columns in {} ms", region.getRegionInfo().getEncodedName(),
        cells, (System.nanoTime() - started) / 1_000_000);
  }

  private static byte[] key(byte[] family, byte[] row, byte[] qualifier) {
    byte[] key = new byte[2 + family.length + 4 + row.length + qualifier.length];
    int at = 0;
    key[at++] = (byte) (family.length >>> 8);
    key[at++] = (byte) family.length;
    System.arraycopy(family, 0, key, at, family.length);
    at += family.length;
    key[at++] = (byte) (row.length >>> 24);
    key[at++] = (byte) (row.length >>> 16);
    key[at++] = (byte) (row.length >>> 8);
    key[at++] = (byte) row.length;
    System.arraycopy(row, 0, key, at, row.length);
    at += row.length;
    System.arraycopy(qualifier, 0, key, at, qualifier.length);
    return key;
  }
}
