package org.caffeine.hbase;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptor;
import org.apache.hadoop.hbase.regionserver.FlushLifeCycleTracker;
import org.apache.hadoop.hbase.regionserver.HRegion;
import org.apache.hadoop.hbase.regionserver.HStore;
import org.apache.hadoop.hbase.regionserver.HStoreFile;
import org.apache.hadoop.hbase.regionserver.Region;
import org.apache.hadoop.hbase.regionserver.Store;
import org.apache.hadoop.hbase.regionserver.compactions.CompactionLifeCycleTracker;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Keeps churn families small: families whose cells are written and deleted within seconds
 * (Percolator's notifications), marked by the family configuration
 * {@code caffeine.churn.cells = <n>}.
 *
 * <p>Why: HBase keeps a deleted cell and its delete marker until a major compaction, and every
 * scan walks both. A family of short-lived cells is small, so HBase's per-family flush policy
 * leaves it in memory while the region's big families flush, and its markers pile up there:
 * after 20,000 pages the worker's scan of the notify family, which lists nothing, took 320 ms
 * and walked every notification the pipeline had ever cleared. Bigtable kept Percolator's
 * notify column in a locality group of its own for the same reason.
 *
 * <p>What: one daemon thread per region server checks, every {@code caffeine.churn.check.ms}
 * (default 2,000), each open primary region with a churn family; once the family's memstore
 * holds at least {@code n} cells (puts and delete markers), it flushes that family alone (as
 * HBase's own per-family flush does); and whenever the family has a file that is not a major
 * compaction's result (that flush's, or one of the region's whole flushes), it asks for a major
 * compaction of that family alone, which drops the markers and the cells they hide. A scan then walks at most about {@code n}
 * cells of history. Nothing a client reads changes: a flush or a compaction keeps every live
 * cell (a put hidden by a marker can only become visible again if it was written after the
 * marker with an older timestamp, which a notification's reader treats as one more
 * notification).
 */
final class ChurnCompactor {
  /** Family configuration: memstore cells at which the family is flushed and compacted. */
  static final String CELLS_KEY = "caffeine.churn.cells";
  /** Region server configuration: milliseconds between checks. */
  static final String CHECK_MS_KEY = "caffeine.churn.check.ms";
  static final long DEFAULT_CHECK_MS = 2_000L;

  private static final Logger LOG = LoggerFactory.getLogger(ChurnCompactor.class);
  /** Region -> its churn families and their thresholds; regions register on start. */
  private static final Map<Region, Map<byte[], Integer>> REGIONS = new ConcurrentHashMap<>();
  private static ScheduledExecutorService checker;

  private ChurnCompactor() {}

  /** Starts watching {@code region} if it has churn families (once the region is open). */
  static synchronized void watch(Region region, Configuration conf) {
    Map<byte[], Integer> families = churnFamilies(region);
    if (families.isEmpty() || region.getRegionInfo().getReplicaId() != 0) {
      return;
    }
    REGIONS.put(region, families);
    if (checker == null) {
      long every = Math.max(100L, conf.getLong(CHECK_MS_KEY, DEFAULT_CHECK_MS));
      checker = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "caffeine-churn-compactor");
        t.setDaemon(true);
        return t;
      });
      checker.scheduleWithFixedDelay(ChurnCompactor::checkAll, every, every, TimeUnit.MILLISECONDS);
    }
  }

  /** Stops watching {@code region} (a coprocessor's stop: the region closes). */
  static void forget(Region region) {
    REGIONS.remove(region);
  }

  static Map<byte[], Integer> churnFamilies(Region region) {
    Map<byte[], Integer> families = new java.util.LinkedHashMap<>();
    for (ColumnFamilyDescriptor family : region.getTableDescriptor().getColumnFamilies()) {
      String cells = family.getConfigurationValue(CELLS_KEY);
      if (cells != null) {
        try {
          families.put(family.getName(), Math.max(1, Integer.parseInt(cells.trim())));
        } catch (NumberFormatException e) {
          LOG.warn("{} of {}: {} is not a number of cells; family not watched",
              CELLS_KEY, family.getNameAsString(), cells);
        }
      }
    }
    return families;
  }

  private static void checkAll() {
    for (Map.Entry<Region, Map<byte[], Integer>> entry : REGIONS.entrySet()) {
      Region region = entry.getKey();
      if (region.isClosed() || region.isClosing() || !region.isAvailable() || region.isReadOnly()) {
        continue;
      }
      for (Map.Entry<byte[], Integer> family : entry.getValue().entrySet()) {
        try {
          compactIfFull(region, family.getKey(), family.getValue());
        } catch (Throwable e) {  // a failed check must not end the checker's schedule
          LOG.warn("churn compaction of {} {}: {}", region.getRegionInfo().getEncodedName(),
              new String(family.getKey(), java.nio.charset.StandardCharsets.UTF_8), e.toString());
        }
      }
    }
  }

  /**
   * Flushes the family alone once its memstore holds {@code cells} cells; major-compacts it
   * alone whenever one of its files is not a major compaction's result (our flush's, or the
   * region's whole flush, which also writes the family's markers to a file of its own).
   */
  private static void compactIfFull(Region region, byte[] family, int cells) throws Exception {
    if (!(region.getStore(family) instanceof HStore)) {
      return;
    }
    HStore store = (HStore) region.getStore(family);
    if (store.getMemStoreSize().getCellsCount() >= cells) {
      List<byte[]> families = new ArrayList<>();
      families.add(family);
      // HRegion: the per-family flush HBase's own flush policy uses (Region offers only a
      // whole-region request, which would flush the big families too).
      ((HRegion) region).flushcache(families, false, FlushLifeCycleTracker.DUMMY);
    }
    boolean compacted = true;
    for (HStoreFile file : store.getStorefiles()) {
      compacted &= file.isMajorCompactionResult();
    }
    if (!compacted) {  // (files already being compacted are not selected again)
      region.requestCompaction(family, "caffeine churn family", Store.PRIORITY_USER, true,
          CompactionLifeCycleTracker.DUMMY);
    }
  }
}
