package org.caffeine.hbase;

import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.hbase.thirdparty.com.google.common.hash.HashFunction;
import org.apache.hbase.thirdparty.com.google.common.hash.Hasher;
import org.apache.hbase.thirdparty.com.google.common.hash.Hashing;

/**
 * The newest version of a region's counted columns ({@link RowCounts}) as its counted writes
 * last left it: its timestamp and whether its value is live. A counted write needs the newest
 * version of every column it writes that the region may already hold; one found here is not
 * read. A page's re-export overwrites columns its earlier export wrote (a posting whose anchor
 * text changed, a tombstone where an impact level moved), so most of the columns a counted
 * write would have to read are here while the crawl is at most minutes past them.
 *
 * <p>Contract: an entry, when present, is the newest version of its (row, family, qualifier)
 * in the region as stored. Kept by the same rules as {@link CountCache}, under the row stripe
 * ({@link RowStripes}) every counted writer of the row holds while it reads, decides and
 * records: an entry is put from a column's newest version once HBase reports the batch that
 * wrote it {@code SUCCESS} (before the stripes are let go); a column a batch is about to write
 * loses its entry until then, so a batch whose outcome never reaches the cache leaves a miss,
 * never a stale entry. Nothing else changes a counted column's newest version: such a family
 * takes no deletes and no cells with a time to live, a compaction keeps each column's newest
 * version, and recovered edits are replayed before the region's instance records anything. A
 * bulk load (store files no hook sees) turns the instance off for the rest of the region's
 * life ({@link #disable}).
 *
 * <p>Layout, and why not a map: a counted column's name holds a URL, so a map keyed by it
 * costs about 250 bytes an entry, and minutes of a crawl's columns are millions of entries. A
 * column is kept here as the 128-bit murmur3 hash of (instance, family, row, qualifier) and
 * one long (the timestamp, the sign bit set when live): 24 bytes an entry, in arrays shared by
 * every region of the region server and allocated once. Two columns would be confused only if
 * their 128-bit hashes were equal (about 2^-87 for a full table). The table is
 * {@link #WAYS}-way set associative: a column may sit in one of the slots of the set its hash
 * picks, a full set gives up a slot at random, and each set is read and written under one of
 * {@link #LOCKS} locks. Each instance's id is hashed in, so a region reopened, split or merged
 * never finds another instance's entries.
 */
final class NewestCache {
  static final int SETS = 1 << 18;
  static final int WAYS = 4;
  /** Columns the region server keeps: 1,048,576 (24 MB). */
  static final int SLOTS = SETS * WAYS;

  /** A column's newest version: its timestamp, and whether its value is non-empty. */
  record Entry(long ts, boolean live) {}

  private static final HashFunction HASH = Hashing.murmur3_128();
  /** Per slot, the column's hash as two longs; (0, 0) is an empty slot. */
  private static final long[] HASHES = new long[SLOTS * 2];
  /** Per slot, the newest version's timestamp, with the sign bit set when it is live. */
  private static final long[] VERSIONS = new long[SLOTS];
  private static final Object[] LOCKS = new Object[1 << 12];
  private static final AtomicLong NEXT_ID = new AtomicLong();

  static {
    for (int i = 0; i < LOCKS.length; i++) {
      LOCKS[i] = new Object();
    }
  }

  private final long id = NEXT_ID.getAndIncrement();
  private volatile boolean disabled;

  /** The column's newest version, or null when it is not known here. */
  Entry get(byte[] family, byte[] row, byte[] qualifier) {
    if (disabled) {
      return null;
    }
    long[] h = hash(family, row, qualifier);
    int set = set(h);
    synchronized (LOCKS[set & (LOCKS.length - 1)]) {
      int slot = find(set, h);
      if (slot < 0) {
        return null;
      }
      long v = VERSIONS[slot];
      return new Entry(v & Long.MAX_VALUE, v < 0);
    }
  }

  /** Records the column's newest version (a negative timestamp is not kept). */
  void put(byte[] family, byte[] row, byte[] qualifier, Entry entry) {
    if (disabled || entry.ts() < 0) {
      return;
    }
    long[] h = hash(family, row, qualifier);
    int set = set(h);
    synchronized (LOCKS[set & (LOCKS.length - 1)]) {
      int slot = find(set, h);
      if (slot < 0) {
        slot = free(set);
        HASHES[2 * slot] = h[0];
        HASHES[2 * slot + 1] = h[1];
      }
      VERSIONS[slot] = entry.live() ? entry.ts() | Long.MIN_VALUE : entry.ts();
    }
  }

  /** Forgets the column. */
  void remove(byte[] family, byte[] row, byte[] qualifier) {
    long[] h = hash(family, row, qualifier);
    int set = set(h);
    synchronized (LOCKS[set & (LOCKS.length - 1)]) {
      int slot = find(set, h);
      if (slot >= 0) {
        HASHES[2 * slot] = 0;
        HASHES[2 * slot + 1] = 0;
      }
    }
  }

  /** Stops answering for the rest of the region's life (a bulk load: store files no hook sees). */
  void disable() {
    disabled = true;
  }

  private long[] hash(byte[] family, byte[] row, byte[] qualifier) {
    Hasher hasher = HASH.newHasher().putLong(id).putInt(family.length).putBytes(family)
        .putInt(row.length).putBytes(row).putBytes(qualifier);
    byte[] b = hasher.hash().asBytes();
    long h0 = 0;
    long h1 = 0;
    for (int i = 0; i < 8; i++) {
      h0 = (h0 << 8) | (b[i] & 0xff);
      h1 = (h1 << 8) | (b[8 + i] & 0xff);
    }
    // Never (0, 0), the empty slot's mark.
    return new long[] {h0, h1 | 1};
  }

  private static int set(long[] h) {
    return (int) (h[0] >>> 1) & (SETS - 1);
  }

  /** The slot of {@code set} holding hash {@code h}, or -1 (the set's lock held). */
  private static int find(int set, long[] h) {
    for (int slot = set * WAYS; slot < (set + 1) * WAYS; slot++) {
      if (HASHES[2 * slot] == h[0] && HASHES[2 * slot + 1] == h[1]) {
        return slot;
      }
    }
    return -1;
  }

  /** An empty slot of {@code set}, or one given up at random (the set's lock held). */
  private static int free(int set) {
    for (int slot = set * WAYS; slot < (set + 1) * WAYS; slot++) {
      if (HASHES[2 * slot + 1] == 0) {
        return slot;
      }
    }
    return set * WAYS + ThreadLocalRandom.current().nextInt(WAYS);
  }
}
