"""Finding WARC records in a file that may be damaged: plain, per-record gzip, whole-file gzip.

Layer: crawler. Imports the standard library only; no HBase, no HTTP parsing: ``crawler.ingest`` parses
each record's bytes with warcio. warcio's own iterator stops at the first damaged byte
(garbage between records, a truncated gzip member) and trusts Content-Length blindly; this
module frames records itself so a damaged stretch costs exactly that stretch.

``frame(path, start=None)`` yields, in file order, ``Record(position, data)`` for every
well-framed record (``data`` = WARC header lines + block, ``Content-Length`` bytes of it,
exactly) and ``Damage(position, error)`` once for each damaged stretch, then carries on
with the next record it can find.

A position is ``(outer, inner)``: for a gzip file, ``outer`` is the byte offset of the gzip
member holding the record and ``inner`` the record's offset in that member's decompressed
bytes (0 for per-record gzip; a whole-file gzip is one member); for a plain file ``outer``
is 0 and ``inner`` the byte offset. Positions increase in file order; ``frame(path,
start=p)`` begins with the first record at or after ``p`` (resuming an ingest).

Damage rules, each yielding one ``Damage``:

* a gzip member that does not decompress or ends before its end (truncated): the next
  member is searched from the damaged member's next byte (a candidate must decompress
  fully and start with ``WARC/``);
* bytes that are not a record (garbage between records or members): skipped up to the next
  ``WARC/1.`` line (plain) or the next gzip member that starts with one;
* a record whose block is followed by anything but line ends up to the next ``WARC/1.``
  line or the end of the data (its Content-Length is wrong, or it was cut): the record is
  dropped, and the next record is searched from the start of its block, so a
  Content-Length too long does not swallow the records it overran;
* a header block that does not parse (no Content-Length, not a number), or that another
  record's ``WARC/1.`` line interrupts (a record cut inside its header).

Leniency, as warcio's reader (the reference) has it, wherever a record's extent is still
unambiguous: the format puts two CRLFs after each block, but a block followed by one, by
none, or by bare LFs, up to the next record or the end of the data, is a whole record; and
header lines may end in LF or CR CR LF instead of CRLF (files whose line ends a tool
rewrote), the header ending at its first empty line.
"""

from __future__ import annotations

import mmap
import os
import re
import tempfile
import zlib
from dataclasses import dataclass
from typing import Iterator

__all__ = ["Archive", "Record", "Damage", "frame", "Position", "HEADER_END"]

Position = tuple[int, int]

_GZIP_MAGIC = b"\x1f\x8b\x08"
_END = b"\r\n\r\n"
# The empty line that ends a header: after a line's LF, any CRs, then LF (CRLF, LF and
# CR CR LF line ends alike).
HEADER_END = re.compile(rb"\n\r*\n")
# A version line: a record starting inside another's header means that header was cut.
_VERSION_LINE = re.compile(rb"WARC/1\.[01]\r*\n")
_LINE_ENDS = (b"\r", b"\n")
_CHUNK = 64 << 10
_SPOOL_BYTES = 64 << 20  # a decompressed member larger than this is spooled to disk


@dataclass(frozen=True)
class Record:
    position: Position
    data: bytes


@dataclass(frozen=True)
class Damage:
    position: Position
    error: str


class Archive:
    """One WARC file opened for framing: ``kind`` is ``plain``, ``gzip-records`` (one or a
    few records per gzip member, the usual ``.warc.gz``) or ``gzip-stream`` (the whole file
    compressed as one stream: decompressed once into a temporary file, positions then count
    in the decompressed bytes). Not thread-safe; ``close()`` it."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        self._file = open(self.path, "rb")
        self.size = os.fstat(self._file.fileno()).st_size
        self._raw = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ) if self.size else b""
        self._plain = None          # the decompressed stream of a gzip-stream file
        self._stream_damage: Damage | None = None
        self._member_cache: tuple[int, object, int] | None = None
        self.kind = "plain"
        if self._raw[:3] == _GZIP_MAGIC:
            self.kind = "gzip-records"
            member = _inflate(self._raw, 0)
            if not isinstance(member, str):
                data, end = member
                records = sum(isinstance(r, Record) for r in _records(data, 0, 0))
                if records > 1 and end == self.size:
                    self.kind = "gzip-stream"
                if hasattr(data, "close"):
                    data.close()
            if self.kind == "gzip-stream":
                self._decompress_stream()

    def _decompress_stream(self) -> None:
        spool = tempfile.TemporaryFile()
        at, length = 0, len(self._raw)
        while at < length:
            d = zlib.decompressobj(wbits=31)
            try:
                while not d.eof and at < length:
                    piece = self._raw[at:at + _CHUNK]
                    spool.write(d.decompress(piece))
                    at += len(piece)
                if not d.eof:
                    self._stream_damage = Damage((0, spool.tell()), "the gzip stream is truncated: the rest is lost")
                    break
            except zlib.error as exc:
                self._stream_damage = Damage((0, spool.tell()), f"the gzip stream does not decompress ({exc}): "
                                                                "the rest is lost")
                break
            at -= len(d.unused_data)
        spool.flush()
        self._plain = mmap.mmap(spool.fileno(), 0, access=mmap.ACCESS_READ) if spool.tell() else b""
        spool.close()

    def frame(self, start: Position | None = None) -> Iterator[Record | Damage]:
        """Every record and damaged stretch from ``start`` on (the module docstring)."""
        if self.kind == "plain":
            yield from _records(self._raw, 0, start[1] if start else 0)
        elif self.kind == "gzip-stream":
            yield from _records(self._plain, 0, start[1] if start else 0)
            if self._stream_damage is not None and (start is None or start <= self._stream_damage.position):
                yield self._stream_damage
        else:
            yield from _gzip_members(self._raw, start)

    def read(self, position: Position) -> bytes | None:
        """The record at ``position`` (random access, for revisits and redirects)."""
        outer, inner = position
        if self.kind != "gzip-records":
            for item in _records(self._raw if self.kind == "plain" else self._plain, 0, inner):
                return item.data if isinstance(item, Record) and item.position == position else None
            return None
        if self._member_cache is None or self._member_cache[0] != outer:
            member = _inflate(self._raw, outer)
            if isinstance(member, str):
                return None
            if self._member_cache is not None and hasattr(self._member_cache[1], "close"):
                self._member_cache[1].close()
            self._member_cache = (outer, member[0], member[1])
        for item in _records(self._member_cache[1], outer, inner):
            return item.data if isinstance(item, Record) and item.position == position else None
        return None

    def progress(self, position: Position) -> float:
        """How far ``position`` is into the file, 0..1."""
        if self.kind == "gzip-stream":
            return position[1] / max(len(self._plain), 1)
        return (position[0] if self.kind == "gzip-records" else position[1]) / max(self.size, 1)

    def close(self) -> None:
        for m in (self._plain, self._raw):
            if isinstance(m, mmap.mmap):
                m.close()
        self._file.close()

    def __enter__(self) -> "Archive":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def frame(path: str | os.PathLike, start: Position | None = None) -> Iterator[Record | Damage]:
    """Every record and damaged stretch of ``path`` from ``start`` on (module docstring)."""
    with Archive(path) as archive:
        yield from archive.frame(start)


# -- plain records -----------------------------------------------------------------------------


def _records(buf, outer: int, first: int) -> Iterator[Record | Damage]:
    """The records of an uncompressed buffer (a plain file, or one decompressed member),
    from offset ``first`` on (a record start: framing found it before)."""
    pos = first
    length = len(buf)
    while pos < length:
        # Blank lines between records are the format's; anything else is damage.
        while pos < length and buf[pos:pos + 1] in (b"\r", b"\n"):
            pos += 1
        if pos >= length:
            return
        if not buf[pos:pos + 7] == b"WARC/1.":
            nxt = _next_record_start(buf, pos)
            if pos >= first:
                yield Damage((outer, pos), f"{(nxt if nxt is not None else length) - pos} bytes that are not a "
                                           "WARC record skipped")
            if nxt is None:
                return
            pos = nxt
            continue
        end = HEADER_END.search(buf, pos)
        if end is None:
            if pos >= first:
                yield Damage((outer, pos), "record header without an end (file cut short)")
            return
        header_end, block_start = end.start(), end.end()
        # A version line inside the header (even mid-line: the record was cut and the next
        # one appended) means this header is not whole.
        cut = _VERSION_LINE.search(buf, pos + 1, header_end)
        if cut is not None:
            if pos >= first:
                yield Damage((outer, pos), "record header cut short (another record starts inside it)")
            pos = cut.start()
            continue
        content_length = _content_length(buf[pos:header_end])
        if content_length is None:
            if pos >= first:
                yield Damage((outer, pos), "record header without a valid Content-Length")
            pos = _next_record_start(buf, block_start) or length
            continue
        block_end = block_start + content_length
        if block_end > length or not _block_ends_at(buf, block_end):
            nxt = _next_record_start(buf, block_start)
            if pos >= first:
                why = ("the file ends inside the record" if block_end > length else
                       "its block is followed by more than line ends")
                yield Damage((outer, pos), f"record dropped: Content-Length {content_length} is wrong ({why})")
            if nxt is None:
                return
            pos = nxt
            continue
        if pos >= first:
            yield Record((outer, pos), bytes(buf[pos:block_end]))
        pos = block_end  # the loop skips the line ends after it


def _block_ends_at(buf, block_end: int) -> bool:
    """Is ``block_end`` a record's end: followed by line ends only, up to the next
    ``WARC/1.`` line or the end of ``buf`` (the format's CRLF CRLF, or fewer)?"""
    if buf[block_end:block_end + 4] == _END:
        return True
    at, length = block_end, len(buf)
    while at < length and buf[at:at + 1] in _LINE_ENDS:
        at += 1
    return at >= length or (buf[at:at + 7] == b"WARC/1." and (at == block_end or buf[at - 1:at] == b"\n"))


def _content_length(header: bytes) -> int | None:
    for line in header.split(b"\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            try:
                n = int(value.strip())
            except ValueError:
                return None
            return n if n >= 0 else None
    return None


def _next_record_start(buf, pos: int) -> int | None:
    """Offset of the first ``WARC/1.`` at a line start at or after ``pos``."""
    at = pos
    while True:
        i = buf.find(b"WARC/1.", at)
        if i < 0:
            return None
        if i == 0 or buf[i - 1:i] == b"\n":
            return i
        at = i + 1


# -- gzip members ------------------------------------------------------------------------------


def _gzip_members(raw, start: Position | None) -> Iterator[Record | Damage]:
    pos = 0
    length = len(raw)
    if start is not None:
        pos = start[0]
    while pos < length:
        if raw[pos:pos + 3] != _GZIP_MAGIC:
            nxt = _next_member(raw, pos + 1)
            yield Damage((pos, 0), f"{(nxt if nxt is not None else length) - pos} bytes that are not a gzip member skipped")
            if nxt is None:
                return
            pos = nxt
            continue
        member = _inflate(raw, pos)
        if isinstance(member, str):
            nxt = _next_member(raw, pos + 1)
            yield Damage((pos, 0), member)
            if nxt is None:
                return
            pos = nxt
            continue
        data, end = member
        try:
            first = start[1] if start is not None and start[0] == pos else 0
            yield from _records(data, pos, first)
        finally:
            if hasattr(data, "close"):
                data.close()
        pos = end


def _inflate(raw, pos: int):
    """(decompressed bytes or mmap, end offset) of the member at ``pos``, or an error text."""
    d = zlib.decompressobj(wbits=31)
    out = bytearray()
    spool = None
    at = pos
    length = len(raw)
    try:
        while not d.eof:
            if at >= length:
                return f"gzip member at {pos} is truncated (the file ends inside it)"
            piece = d.decompress(raw[at:at + _CHUNK])
            at += min(_CHUNK, length - at)
            if spool is None and len(out) + len(piece) > _SPOOL_BYTES:
                spool = tempfile.TemporaryFile()
                spool.write(out)
                out = bytearray()
            if spool is not None:
                spool.write(piece)
            else:
                out += piece
    except zlib.error as exc:
        if spool is not None:
            spool.close()
        return f"gzip member at {pos} does not decompress ({exc})"
    end = at - len(d.unused_data)
    if spool is not None:
        spool.flush()
        data = mmap.mmap(spool.fileno(), 0, access=mmap.ACCESS_READ)
        spool.close()
        return data, end
    return bytes(out), end


def _next_member(raw, pos: int) -> int | None:
    """The next offset from ``pos`` where a gzip member holding a WARC record starts."""
    at = pos
    while True:
        i = raw.find(_GZIP_MAGIC, at)
        if i < 0:
            return None
        d = zlib.decompressobj(wbits=31)
        try:
            head = d.decompress(raw[i:i + 65536], 16)
        except zlib.error:
            head = b""
        if head.startswith(b"WARC/1.") and _member_completes(raw, i):
            return i
        at = i + 1


def _member_completes(raw, pos: int) -> bool:
    member = _inflate(raw, pos)
    if isinstance(member, str):
        return False
    data = member[0]
    if hasattr(data, "close"):
        data.close()
    return True
