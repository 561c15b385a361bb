package org.caffeine.hbase;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.zip.CRC32;
import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.DoNotRetryIOException;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.filter.Filter;
import org.apache.hadoop.hbase.filter.FilterBase;
import org.apache.hadoop.hbase.filter.FilterList;

/**
 * Shard scans: a Scan carrying the attribute {@code caffeine.shard} = {@code <index>/<count>}
 * (decimal ASCII, {@code 0 <= index < count}) returns only the rows whose key's CRC-32
 * (IEEE, as {@code java.util.zip.CRC32} and Python's {@code zlib.crc32} compute it) modulo
 * {@code count} is {@code index}, on top of whatever filter it has.
 *
 * <p>Caffeine's workers deal rows to themselves this way; each lists the notifications of its
 * own rows only, instead of every worker walking and shipping every notification to drop all
 * but its share. The client keeps its own check, so a region server without this class (or an
 * older jar) costs only the savings, never a wrong answer.
 *
 * <p>A malformed value fails the scan with {@code CAFFEINE-SHARD bad value ...} (a
 * {@link DoNotRetryIOException}): a client that sends one has a bug worth seeing.
 */
final class RowShards {
  static final String ATTRIBUTE = "caffeine.shard";
  static final String MESSAGE_PREFIX = "CAFFEINE-SHARD";

  private RowShards() {}

  /** Adds the shard filter the scan's attribute asks for, if it has one. */
  static void restrict(Scan scan) throws IOException {
    byte[] value = scan.getAttribute(ATTRIBUTE);
    if (value == null) {
      return;
    }
    Filter shard = parse(value);
    Filter existing = scan.getFilter();
    scan.setFilter(existing == null ? shard
        : new FilterList(FilterList.Operator.MUST_PASS_ALL, existing, shard));
  }

  static ShardFilter parse(byte[] value) throws IOException {
    String text = new String(value, StandardCharsets.US_ASCII);
    int slash = text.indexOf('/');
    try {
      if (slash > 0) {
        int index = Integer.parseInt(text.substring(0, slash));
        int count = Integer.parseInt(text.substring(slash + 1));
        if (count > 0 && index >= 0 && index < count) {
          return new ShardFilter(index, count);
        }
      }
    } catch (NumberFormatException e) {
      // answered below
    }
    throw new DoNotRetryIOException(MESSAGE_PREFIX + " bad value " + Hex.of(value)
        + ": expected <index>/<count>, 0 <= index < count");
  }

  /** Keeps the rows of one shard; server-side only (never serialized to a client). */
  static final class ShardFilter extends FilterBase {
    private final int index;
    private final int count;

    ShardFilter(int index, int count) {
      this.index = index;
      this.count = count;
    }

    static long crc(Cell cell) {
      CRC32 crc = new CRC32();
      crc.update(cell.getRowArray(), cell.getRowOffset(), cell.getRowLength());
      return crc.getValue();
    }

    @Override
    public boolean filterRowKey(Cell firstRowCell) {
      return crc(firstRowCell) % count != index;  // true: leave the row out
    }

    @Override
    public ReturnCode filterCell(Cell cell) {
      return ReturnCode.INCLUDE;
    }

    @Override
    public String toString() {
      return "ShardFilter " + index + "/" + count;
    }
  }
}
