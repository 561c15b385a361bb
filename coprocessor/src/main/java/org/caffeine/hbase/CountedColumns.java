package org.caffeine.hbase;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
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
 * <p>Contract: once {@link #complete()}, {@link #record} answers false only for a column,
 * of a family counted when the region opened, that no cell of the region has (a family whose
 * counting began later, without the region reopening, is always read). It holds because a
 * column of a counted family, once it has a cell, always has one: such a family takes no deletes and no cells with a time to live
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
 * reads again. A region's open is held up for {@link #INLINE_BUILD_MS} at most: a larger
 * region's build goes on in the background, and its counted writes read until it is done.
 */
final class CountedColumns {
  private static final Logger LOG = LoggerFactory.getLogger(CountedColumns.class);
  private static final double FALSE_POSITIVES = 0.01;
  private static final long FIRST_CAPACITY = 1 << 14;
  /** Columns the filters of one region answer for at most: about 40 MB of filters. */
  static final long MAX_COLUMNS = 1L << 25;
  /** How long a region's open scans its counted columns before a background thread takes over. */
  static final long INLINE_BUILD_MS = 2_000;
  /** The thread that finishes the builds of large regions, one region at a time. */
  private static final ExecutorService BUILDS = Executors.newSingleThreadExecutor(task -> {
    Thread thread = new Thread(task, "caffeine-counted-columns");
    thread.setDaemon(true);
    return thread;
  });

  private final List<BloomFilter<byte[]>> filters = new CopyOnWriteArrayList<>();
  private final AtomicLong addedToNewest = new AtomicLong();
  private volatile BloomFilter<byte[]> newest;
  private volatile long newestCapacity = FIRST_CAPACITY;
  private volatile boolean complete;
  private volatile boolean disabled;
  private volatile boolean closed;

  /** The families it answers for: those counted when the region opened. */
  private final List<byte[]> families;

  /** The set of {@code families}' columns, recording from now on. */
  CountedColumns(List<byte[]> families) {
    this.families = List.copyOf(families);
    newest = BloomFilter.create(Funnels.byteArrayFunnel(), FIRST_CAPACITY, FALSE_POSITIVES);
    filters.add(newest);
  }

  /** Whether {@link #record} now answers for the whole region. */
  boolean complete() {
    return complete && !disabled;
  }

  /**
   * Records that the region holds (or is about to hold) a cell of the column, and answers
   * whether it may have held one before: false only when the set is complete and the region
   * held no cell of the column; true when it may (or when the set cannot tell).
   */
  boolean record(byte[] family, byte[] row, byte[] qualifier) {
    byte[] key = key(family, row, qualifier);
    boolean mayHaveHeld = !complete() || !answersFor(family) || mightContain(key);
    add(key);
    return mayHaveHeld;
  }

  private boolean mightContain(byte[] key) {
    for (BloomFilter<byte[]> filter : filters) {
      if (filter.mightContain(key)) {
        return true;
      }
    }
    return false;
  }

  private void add(byte[] key) {
    if (disabled) {
      return;
    }
    newest.put(key);
    if (addedToNewest.incrementAndGet() > newestCapacity) {
      grow();
    }
  }

  private synchronized void grow() {
    if (disabled || addedToNewest.get() <= newestCapacity) {
      return;  // another thread grew it meanwhile
    }
    long capacity = newestCapacity * 2;
    // FIRST + 2·FIRST + ... + capacity: what all the filters would answer for.
    if (2 * capacity - FIRST_CAPACITY > MAX_COLUMNS) {
      disable("more than " + MAX_COLUMNS + " columns");
      return;
    }
    // The new filter takes the new columns; the full one stays and is still asked.
    BloomFilter<byte[]> next = BloomFilter.create(Funnels.byteArrayFunnel(), capacity, FALSE_POSITIVES);
    filters.add(next);
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
   * Adds every column of its families the region holds, then declares the set complete: a
   * key-only scan, run here for up to {@link #INLINE_BUILD_MS} (a small region is complete when
   * it opens) and, for a larger one, finished by a daemon thread of the region server (its
   * counted writes read their columns meanwhile). Turned off if the scan fails.
   */
  void build(Region region) {
    Scan scan = new Scan().readVersions(1).setFilter(new KeyOnlyFilter()).setCacheBlocks(false);
    for (byte[] family : families) {
      scan.addFamily(family);
    }
    Build build;
    try {
      build = new Build(region.getRegionInfo().getEncodedName(), region.getScanner(scan));
    } catch (IOException | RuntimeException e) {
      disable("the build of " + region.getRegionInfo().getEncodedName() + " failed: " + e);
      return;
    }
    if (!build.run(INLINE_BUILD_MS)) {
      BUILDS.execute(() -> build.run(Long.MAX_VALUE));
    }
  }

  /** The region closes: a build still running stops. */
  void close() {
    closed = true;
  }

  /** One region's scan of its counted columns, run in turns. */
  private final class Build {
    private final String region;
    private final RegionScanner scanner;
    private final long started = System.nanoTime();
    private final List<Cell> batch = new ArrayList<>();
    private long cells;

    Build(String region, RegionScanner scanner) {
      this.region = region;
      this.scanner = scanner;
    }

    /** Scans for up to {@code budgetMs}; true once done (complete, or given up). */
    boolean run(long budgetMs) {
      long turn = System.nanoTime();
      try {
        boolean more;
        do {
          if (closed || disabled) {
            scanner.close();
            return true;
          }
          batch.clear();
          more = scanner.next(batch);
          for (Cell cell : batch) {
            add(key(CellUtil.cloneFamily(cell), CellUtil.cloneRow(cell), CellUtil.cloneQualifier(cell)));
          }
          cells += batch.size();
          if (more && (System.nanoTime() - turn) / 1_000_000 > budgetMs) {
            LOG.info("counted columns of {}: {} columns so far, building on in the background", region, cells);
            return false;
          }
        } while (more);
        scanner.close();
      } catch (IOException | RuntimeException e) {
        disable("the build of " + region + " failed: " + e);
        try {
          scanner.close();
        } catch (IOException | RuntimeException ignored) {
          // the region is closing: nothing left to release
        }
        return true;
      }
      if (!disabled) {
        complete = true;
        LOG.info("counted columns of {}: {} columns in {} ms", region, cells, (System.nanoTime() - started) / 1_000_000);
      }
      return true;
    }
  }

  /** Whether {@code family} is one this set was built for (a family counted later is not). */
  private boolean answersFor(byte[] family) {
    for (byte[] f : families) {
      if (Arrays.equals(f, family)) {
        return true;
      }
    }
    return false;
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
