package org.caffeine.hbase;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.CellUtil;
import org.apache.hadoop.hbase.DoNotRetryIOException;
import org.apache.hadoop.hbase.KeyValue;

/**
 * Many cells sent as one: a summary read's answer packed into the value of a single cell, so
 * that neither the region server's RPC nor the Thrift server and its client encode and decode
 * one structure per cell (a few microseconds each on the client: most of a 2,048-cell read).
 *
 * <p>The packed cell: the row, the family asked for, qualifier {@link #QUALIFIER} (it starts
 * with a 0 byte, so it cannot be mistaken for a stored cell), timestamp 0, and the value
 * (big-endian):
 * <pre>
 *   count: int64      what the summary counts (a row's live cells; for {@code cells}, how many follow)
 *   k: int32          how many cells follow
 *   k × (family length, qualifier length, value length: int32 each)
 *   k × (family bytes, qualifier bytes, value bytes), in the same order
 * </pre>
 */
final class RowPacks {
  static final byte[] QUALIFIER = "\u0000caffeine.packed".getBytes(StandardCharsets.US_ASCII);

  private RowPacks() {}

  /**
   * The packed cell of {@code cells} and {@code count} (see the class comment); refused when it
   * would not fit one Java array (2 GiB): ask for fewer cells.
   */
  static Cell pack(byte[] row, byte[] family, List<Cell> cells, long count) throws DoNotRetryIOException {
    long size = 12L + 12L * cells.size();
    for (Cell cell : cells) {
      size += cell.getFamilyLength() + cell.getQualifierLength() + cell.getValueLength();
    }
    if (size > Integer.MAX_VALUE - 64) {
      throw new DoNotRetryIOException("CAFFEINE-READ a packed answer of " + size + " bytes is too large");
    }
    byte[] out = new byte[(int) size];
    ByteBuffer head = ByteBuffer.wrap(out);
    head.putLong(count).putInt(cells.size());
    for (Cell cell : cells) {
      head.putInt(cell.getFamilyLength()).putInt(cell.getQualifierLength()).putInt(cell.getValueLength());
    }
    int at = head.position();
    for (Cell cell : cells) {
      // CellUtil's copies read array- and buffer-backed cells alike.
      at = CellUtil.copyFamilyTo(cell, out, at);
      at = CellUtil.copyQualifierTo(cell, out, at);
      at = CellUtil.copyValueTo(cell, out, at);
    }
    return new KeyValue(row, family, QUALIFIER, 0L, out);
  }
}
