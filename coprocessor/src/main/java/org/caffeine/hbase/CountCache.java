package org.caffeine.hbase;

import java.nio.ByteBuffer;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One region's newest count cells ({@link RowCounts}), remembered so that a counted write need
 * not read its row's count cell again: the read of the written columns is then all it costs.
 *
 * <p>Contract: an entry, when present, is the value and timestamp of the newest count cell of
 * its (row, counted family) in the region as stored. Every writer of a count cell holds the
 * row's stripe ({@link RowStripes}) while it reads, decides and (after the batch is written)
 * records here, and no client writes count cells (refused), so keeping it right takes three
 * rules: an entry is put from a count cell read under the stripe, or from a count put whose
 * mutation HBase reports written ({@code SUCCESS} in {@code postBatchMutateIndispensably},
 * before the stripes are let go); a row whose count a batch is about to change loses its entry
 * until then, so a batch whose outcome never reaches the cache leaves a miss, never a stale
 * value; a count put whose batch failed leaves it removed.
 *
 * <p>One per region: HBase makes a coprocessor instance per region, and each instance's cache
 * has an id of its own that every key starts with, so a region closed and opened again, split,
 * merged or dropped and made again never finds another instance's entries. The entries of all
 * regions share one map bounded for the whole region server ({@link #MAX_ENTRIES}): when it is
 * full it is emptied, which is always safe (a missing entry only costs the read it saves), and
 * that also frees what closed regions left.
 */
final class CountCache {
  /**
   * Entries one region server keeps for all its regions: about 170 bytes each with a short row
   * key (the key's buffer and array, the entry, the map's node), so about 45 MB.
   */
  static final int MAX_ENTRIES = 1 << 18;

  /** A count cell: the count it holds and its timestamp. */
  record Entry(long count, long ts) {}

  private static final ConcurrentHashMap<ByteBuffer, Entry> ENTRIES = new ConcurrentHashMap<>();
  private static final AtomicLong NEXT_ID = new AtomicLong();

  private final long id = NEXT_ID.getAndIncrement();

  Entry get(byte[] row, byte[] family) {
    return ENTRIES.get(key(row, family));
  }

  void put(byte[] row, byte[] family, Entry entry) {
    if (ENTRIES.size() >= MAX_ENTRIES) {
      ENTRIES.clear();
    }
    ENTRIES.put(key(row, family), entry);
  }

  void remove(byte[] row, byte[] family) {
    ENTRIES.remove(key(row, family));
  }

  private ByteBuffer key(byte[] row, byte[] family) {
    byte[] key = new byte[8 + 4 + family.length + row.length];
    ByteBuffer.wrap(key).putLong(id).putInt(family.length).put(family).put(row);
    return ByteBuffer.wrap(key);
  }
}
