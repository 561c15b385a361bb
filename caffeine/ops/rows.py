"""Row ranges as users name them: ``--start``/``--stop`` keys or a ``--row-prefix``.

Layer: tools. Pure. Keys are UTF-8 text, or hex after ``0x`` (as ``caffeine inspect`` takes
them); a range is half-open, ``[start, stop)``, with ``stop=None`` meaning "to the end".
"""

from __future__ import annotations

from dataclasses import dataclass


def parse_key(text: str) -> bytes:
    """A row key from the command line: ``0x`` + hex, or UTF-8 text."""
    if text.startswith("0x"):
        return bytes.fromhex(text[2:])
    return text.encode("utf-8")


def show_key(key: bytes) -> str:
    """A row key for people: its text when it is UTF-8, else ``0x`` + hex (parse_key's inverse
    for every key that does not itself start with ``0x``)."""
    try:
        text = key.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + key.hex()
    return text if text.isprintable() else "0x" + key.hex()


def prefix_stop(prefix: bytes) -> bytes | None:
    """The first key after every key that starts with ``prefix`` (None: no such key)."""
    trimmed = prefix.rstrip(b"\xff")
    if not trimmed:
        return None
    return trimmed[:-1] + bytes([trimmed[-1] + 1])


@dataclass(frozen=True)
class RowRange:
    start: bytes = b""
    stop: bytes | None = None

    @classmethod
    def of(cls, start: str | None = None, stop: str | None = None, prefix: str | None = None) -> "RowRange":
        """The range named by command-line options; a prefix narrows start/stop further."""
        lo = parse_key(start) if start else b""
        hi = parse_key(stop) if stop else None
        if prefix:
            p = parse_key(prefix)
            lo = max(lo, p)
            p_stop = prefix_stop(p)
            hi = p_stop if hi is None else (hi if p_stop is None else min(hi, p_stop))
        if hi is not None and hi <= lo:
            raise ValueError(f"empty row range: start {show_key(lo)!r} is not below stop {show_key(hi)!r}")
        return cls(lo, hi)

    def after(self, key: bytes) -> "RowRange":
        """The rest of the range after ``key`` (for resuming)."""
        return RowRange(max(self.start, key + b"\x00"), self.stop)

    def describe(self) -> str:
        if not self.start and self.stop is None:
            return "every row"
        stop = "the end" if self.stop is None else repr(show_key(self.stop))
        return f"rows from {show_key(self.start)!r} up to {stop}"
