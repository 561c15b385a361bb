package org.caffeine.hbase;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Objects;
import org.apache.hadoop.hbase.client.Delete;
import org.apache.hadoop.hbase.client.Mutation;
import org.apache.hadoop.hbase.client.TableDescriptor;

/**
 * The checked row step one mutation asks for, parsed from its attributes.
 *
 * <p>Attributes (all set by the client on the Thrift2 {@code TPut}/{@code TDelete}):
 * <ul>
 *   <li>{@code caffeine.step}: ASCII {@code prewrite | commit | rollback | probe}</li>
 *   <li>{@code caffeine.start_ts}: 8 bytes, big-endian (not for probe)</li>
 *   <li>{@code caffeine.commit_ts}: 8 bytes, big-endian (commit only)</li>
 *   <li>{@code caffeine.columns}: the user-column qualifiers the step covers, each as a 4-byte
 *       big-endian length followed by the bytes (not for probe; at least one)</li>
 *   <li>{@code caffeine.deletes} (optional, not for probe): deletes of the same row that apply
 *       with the mutation, atomically, if and only if the row passes the step (Thrift2 has no
 *       multi-row mutateRow, so a step whose deletes travel this way can go in a putMultiple of
 *       many rows). At least one entry, each: a kind byte ({@code 1}: exactly the version at
 *       the timestamp, HBase's {@code Delete.addColumn}; {@code 2}: every version at or below
 *       it, {@code Delete.addColumns}), the timestamp (8 bytes, big-endian, 0 to
 *       2<sup>63</sup>-2: HBase reads {@code Long.MAX_VALUE} as "now"), the family name (a
 *       1-byte length, at least 1, then the name's bytes: {@code l} lock, {@code d} or
 *       {@code a} data, {@code n} notify, as any family of the table is named), the qualifier
 *       (a 4-byte big-endian length, then the bytes; may be empty).</li>
 * </ul>
 * A mutation without {@code caffeine.step} asks for nothing ({@link #of} returns null).
 * Equal requests (same step, timestamps, columns and deletes) compare equal, so several
 * mutations of one row carrying the same request are checked once.
 */
final class StepRequest {
  static final String STEP = "caffeine.step";
  static final String START_TS = "caffeine.start_ts";
  static final String COMMIT_TS = "caffeine.commit_ts";
  static final String COLUMNS = "caffeine.columns";
  static final String DELETES = "caffeine.deletes";
  /** A carried delete's kind: exactly the version at its timestamp. */
  static final byte DELETE_VERSION = 1;
  /** A carried delete's kind: every version at or below its timestamp. */
  static final byte DELETE_UP_TO = 2;
  /** Families no step may delete in: the row guard's and the live-cell counts'. */
  private static final List<byte[]> RESERVED = List.of(
      "_g".getBytes(java.nio.charset.StandardCharsets.US_ASCII), RowCounts.FAMILY);

  /** One delete a step carries (see {@code caffeine.deletes}). */
  record CarriedDelete(byte[] family, byte[] qualifier, long ts, boolean upTo) {}

  enum Step {
    PREWRITE, COMMIT, ROLLBACK, PROBE
  }

  /** Raised for attributes that do not form a valid request; its message is one token. */
  static final class BadRequest extends Exception {
    private static final long serialVersionUID = 1L;

    BadRequest(String token) {
      super(token, null, false, false);
    }
  }

  final Step step;
  final long startTs;
  final long commitTs;
  final List<byte[]> columns;
  final List<CarriedDelete> deletes;
  /** The {@code caffeine.deletes} value as sent (null: none): equal lists, equal bytes. */
  private final byte[] rawDeletes;

  private StepRequest(Step step, long startTs, long commitTs, List<byte[]> columns,
      byte[] rawDeletes, List<CarriedDelete> deletes) {
    this.step = step;
    this.startTs = startTs;
    this.commitTs = commitTs;
    this.columns = columns;
    this.rawDeletes = rawDeletes;
    this.deletes = deletes;
  }

  /** The request of {@code m}, or null when it carries no {@code caffeine.step}. */
  static StepRequest of(Mutation m) throws BadRequest {
    byte[] stepAttr = m.getAttribute(STEP);
    if (stepAttr == null) {
      return null;
    }
    Step step = parseStep(stepAttr);
    if (step == Step.PROBE) {
      return new StepRequest(Step.PROBE, 0L, 0L, Collections.emptyList(), null,
          Collections.emptyList());
    }
    long startTs = timestamp(m.getAttribute(START_TS), "start_ts");
    long commitTs = 0L;
    if (step == Step.COMMIT) {
      commitTs = timestamp(m.getAttribute(COMMIT_TS), "commit_ts");
      if (commitTs <= startTs) {
        throw new BadRequest("commit_ts-not-after-start_ts");
      }
    }
    List<byte[]> columns = columns(m.getAttribute(COLUMNS));
    byte[] rawDeletes = m.getAttribute(DELETES);
    return new StepRequest(step, startTs, commitTs, columns, rawDeletes, deletes(rawDeletes));
  }

  /**
   * Refuses deletes the table cannot take: in a family it lacks ({@code unknown-delete-family};
   * HBase would fail the whole mini-batch on it, every row included) or in a counted one
   * ({@code counted-delete-family}: {@link RowCounts} takes no deletes), the first such
   * delete in the list answering.
   */
  void checkFamilies(TableDescriptor table) throws BadRequest {
    for (CarriedDelete d : deletes) {
      if (!table.hasColumnFamily(d.family())) {
        throw new BadRequest("unknown-delete-family");
      }
      if (RowCounts.counted(table, d.family())) {
        throw new BadRequest("counted-delete-family");
      }
    }
  }

  /** The HBase Delete of this request's carried deletes on {@code row}, or null for none. */
  Delete deleteOf(byte[] row) {
    if (deletes.isEmpty()) {
      return null;
    }
    Delete out = new Delete(row);
    for (CarriedDelete d : deletes) {
      if (d.upTo()) {
        out.addColumns(d.family(), d.qualifier(), d.ts());  // type DeleteColumn: <= ts
      } else {
        out.addColumn(d.family(), d.qualifier(), d.ts());   // type Delete: exactly ts
      }
    }
    return out;
  }

  private static Step parseStep(byte[] raw) throws BadRequest {
    switch (new String(raw, java.nio.charset.StandardCharsets.US_ASCII)) {
      case "prewrite":
        return Step.PREWRITE;
      case "commit":
        return Step.COMMIT;
      case "rollback":
        return Step.ROLLBACK;
      case "probe":
        return Step.PROBE;
      default:
        throw new BadRequest("unknown-step");
    }
  }

  private static long timestamp(byte[] raw, String name) throws BadRequest {
    if (raw == null) {
      throw new BadRequest("missing-" + name);
    }
    if (raw.length != 8) {
      throw new BadRequest(name + "-not-8-bytes");
    }
    long ts = ByteBuffer.wrap(raw).getLong();
    // HBase cell timestamps are non-negative Java longs: larger values cannot be cell versions.
    if (ts < 0) {
      throw new BadRequest(name + "-out-of-range");
    }
    return ts;
  }

  private static List<byte[]> columns(byte[] raw) throws BadRequest {
    if (raw == null) {
      throw new BadRequest("missing-columns");
    }
    List<byte[]> out = new ArrayList<>();
    ByteBuffer buf = ByteBuffer.wrap(raw);
    while (buf.hasRemaining()) {
      if (buf.remaining() < 4) {
        throw new BadRequest("truncated-columns");
      }
      int len = buf.getInt();
      if (len <= 0 || len > buf.remaining()) {
        // An empty qualifier could not be named in an answer (answers are space-separated hex).
        throw new BadRequest(len == 0 ? "empty-column" : "truncated-columns");
      }
      byte[] col = new byte[len];
      buf.get(col);
      out.add(col);
    }
    if (out.isEmpty()) {
      throw new BadRequest("no-columns");
    }
    return Collections.unmodifiableList(out);
  }

  /**
   * The deletes of a {@code caffeine.deletes} value (none when absent), or the first problem,
   * in the order met while reading each entry: {@code unknown-delete-kind},
   * {@code delete-ts-out-of-range}, {@code empty-delete-family}, {@code reserved-delete-family}
   * ({@code _g}, {@code _n}), {@code truncated-deletes} for any field cut short or a length
   * running past the end; {@code no-deletes} for an empty value.
   */
  private static List<CarriedDelete> deletes(byte[] raw) throws BadRequest {
    if (raw == null) {
      return Collections.emptyList();
    }
    if (raw.length == 0) {
      throw new BadRequest("no-deletes");
    }
    List<CarriedDelete> out = new ArrayList<>();
    ByteBuffer buf = ByteBuffer.wrap(raw);
    while (buf.hasRemaining()) {
      byte kind = buf.get();
      if (kind != DELETE_VERSION && kind != DELETE_UP_TO) {
        throw new BadRequest("unknown-delete-kind");
      }
      need(buf, 8);
      long ts = buf.getLong();
      if (ts < 0 || ts == Long.MAX_VALUE) {
        throw new BadRequest("delete-ts-out-of-range");
      }
      need(buf, 1);
      int familyLength = buf.get() & 0xff;
      if (familyLength == 0) {
        throw new BadRequest("empty-delete-family");
      }
      need(buf, familyLength);
      byte[] family = new byte[familyLength];
      buf.get(family);
      for (byte[] reserved : RESERVED) {
        if (Arrays.equals(family, reserved)) {
          throw new BadRequest("reserved-delete-family");
        }
      }
      need(buf, 4);
      int qualifierLength = buf.getInt();
      if (qualifierLength < 0) {
        throw new BadRequest("truncated-deletes");
      }
      need(buf, qualifierLength);
      byte[] qualifier = new byte[qualifierLength];
      buf.get(qualifier);
      out.add(new CarriedDelete(family, qualifier, ts, kind == DELETE_UP_TO));
    }
    return Collections.unmodifiableList(out);
  }

  private static void need(ByteBuffer buf, int n) throws BadRequest {
    if (buf.remaining() < n) {
      throw new BadRequest("truncated-deletes");
    }
  }

  @Override
  public boolean equals(Object o) {
    if (!(o instanceof StepRequest)) {
      return false;
    }
    StepRequest r = (StepRequest) o;
    if (step != r.step || startTs != r.startTs || commitTs != r.commitTs
        || columns.size() != r.columns.size() || !Arrays.equals(rawDeletes, r.rawDeletes)) {
      return false;
    }
    for (int i = 0; i < columns.size(); i++) {
      if (!Arrays.equals(columns.get(i), r.columns.get(i))) {
        return false;
      }
    }
    return true;
  }

  @Override
  public int hashCode() {
    int h = Objects.hash(step, startTs, commitTs) * 31 + Arrays.hashCode(rawDeletes);
    for (byte[] c : columns) {
      h = 31 * h + Arrays.hashCode(c);
    }
    return h;
  }
}
