package org.caffeine.hbase;

import java.nio.ByteBuffer;
import java.util.concurrent.ConcurrentHashMap;

/**
 * One region's newest count cells ({@link RowCounts}), remembered so that a counted write need
 * not read its row's count cell again: the read of the written columns is then all it costs.
 *
 * <p>Contract: an entry, when present, is the value and timestamp of the newest count cell of
 * its (row, counted family) in the region as stored. Every writer of a count cell holds the
 * row's stripe ({@link RowStripes}) while it reads, decides and (after the batch is written)
 * records here, and no client writes count cells (refused), so keeping it right takes two
 * rules: an entry is put from a count cell read under the stripe, or from a count put whose
 * mutation HBase reports written ({@code SUCCESS} in {@code postBatchMutateIndispensably},
 * before the stripes are let go); a count put whose batch failed removes its entry, so the next
 * write reads the store. One instance per region (HBase makes a coprocessor instance per
 * region), so a region closed and opened again, split or merged starts empty.
 *
 * <p>Bounded: when it holds {@link #MAX_ENTRIES} it is emptied, which is always safe (a
 * missing entry only costs the read it saves).
 */
final class CountCache {
  /** Entries one region keeps (about 100 bytes each with a short row key). */
  static final int MAX_ENTRIES = 1 << 17;

  /** A count cell: the count it holds and its timestamp. */
  record Entry(long count, long ts) {}

  private final ConcurrentHashMap<ByteBuffer, Entry> entries = new ConcurrentHashMap<>();

  Entry get(byte[] row, byte[] family) {
    return entries.get(key(row, family));
  }

  void put(byte[] row, byte[] family, Entry entry) {
    if (entries.size() >= MAX_ENTRIES) {
      entries.clear();
    }
    entries.put(key(row, family), entry);
  }

  void remove(byte[] row, byte[] family) {
    entries.remove(key(row, family));
  }

  /** How many entries it holds (for tests and metrics). */
  int size() {
    return entries.size();
  }

  private static ByteBuffer key(byte[] row, byte[] family) {
    byte[] key = new byte[4 + family.length + row.length];
    ByteBuffer.wrap(key).putInt(family.length).put(family).put(row);
    return ByteBuffer.wrap(key);
  }
}
