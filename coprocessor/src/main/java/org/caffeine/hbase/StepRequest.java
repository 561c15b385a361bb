package org.caffeine.hbase;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Objects;
import org.apache.hadoop.hbase.client.Mutation;

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
 * </ul>
 * A mutation without {@code caffeine.step} asks for nothing ({@link #of} returns null).
 * Equal requests (same step, timestamps and columns) compare equal, so several mutations of
 * one row carrying the same request are checked once.
 */
final class StepRequest {
  static final String STEP = "caffeine.step";
  static final String START_TS = "caffeine.start_ts";
  static final String COMMIT_TS = "caffeine.commit_ts";
  static final String COLUMNS = "caffeine.columns";

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

  private StepRequest(Step step, long startTs, long commitTs, List<byte[]> columns) {
    this.step = step;
    this.startTs = startTs;
    this.commitTs = commitTs;
    this.columns = columns;
  }

  /** The request of {@code m}, or null when it carries no {@code caffeine.step}. */
  static StepRequest of(Mutation m) throws BadRequest {
    byte[] stepAttr = m.getAttribute(STEP);
    if (stepAttr == null) {
      return null;
    }
    Step step = parseStep(stepAttr);
    if (step == Step.PROBE) {
      return new StepRequest(Step.PROBE, 0L, 0L, Collections.emptyList());
    }
    long startTs = timestamp(m.getAttribute(START_TS), "start_ts");
    long commitTs = 0L;
    if (step == Step.COMMIT) {
      commitTs = timestamp(m.getAttribute(COMMIT_TS), "commit_ts");
      if (commitTs <= startTs) {
        throw new BadRequest("commit_ts-not-after-start_ts");
      }
    }
    return new StepRequest(step, startTs, commitTs, columns(m.getAttribute(COLUMNS)));
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

  @Override
  public boolean equals(Object o) {
    if (!(o instanceof StepRequest)) {
      return false;
    }
    StepRequest r = (StepRequest) o;
    if (step != r.step || startTs != r.startTs || commitTs != r.commitTs
        || columns.size() != r.columns.size()) {
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
    int h = Objects.hash(step, startTs, commitTs);
    for (byte[] c : columns) {
      h = 31 * h + Arrays.hashCode(c);
    }
    return h;
  }
}
