package org.caffeine.hbase;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.regionserver.RegionScanner;

/** Walking the cells a region scanner returns, with a way to stop early. */
final class RowCells {
  private RowCells() {}

  /** What a walk does with each cell: false stops the walk. */
  interface Visitor {
    boolean visit(Cell cell) throws IOException;
  }

  /**
   * Passes every cell of {@code scanner} to {@code visitor} until it returns false or the
   * scanner has no more. The cells may point into blocks released when the scanner closes:
   * a visitor that keeps one copies it.
   */
  static void each(RegionScanner scanner, Visitor visitor) throws IOException {
    List<Cell> batch = new ArrayList<>();
    boolean more;
    do {
      batch.clear();
      more = scanner.nextRaw(batch);
      for (Cell cell : batch) {
        if (!visitor.visit(cell)) {
          return;
        }
      }
    } while (more);
  }
}
