package org.caffeine.hbase;

/**
 * Lower-case hex of bytes, as the answers print row keys, columns and lock values, and the
 * bytes of hex a request sends.
 */
final class Hex {
  private static final char[] DIGITS = "0123456789abcdef".toCharArray();

  private Hex() {
  }

  static String of(byte[] b) {
    char[] out = new char[b.length * 2];
    for (int i = 0; i < b.length; i++) {
      out[2 * i] = DIGITS[(b[i] >> 4) & 0xf];
      out[2 * i + 1] = DIGITS[b[i] & 0xf];
    }
    return new String(out);
  }

  /** The bytes {@code hex} spells (either case), or null when it is empty or not hex. */
  static byte[] parse(String hex) {
    if (hex.isEmpty() || hex.length() % 2 != 0) {
      return null;
    }
    byte[] out = new byte[hex.length() / 2];
    for (int i = 0; i < out.length; i++) {
      int hi = Character.digit(hex.charAt(2 * i), 16);
      int lo = Character.digit(hex.charAt(2 * i + 1), 16);
      if (hi < 0 || lo < 0) {
        return null;
      }
      out[i] = (byte) (hi << 4 | lo);
    }
    return out;
  }
}
