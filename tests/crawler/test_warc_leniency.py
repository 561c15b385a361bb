"""WARC records whose extent is unambiguous are read as warcio (the reference reader) reads them.

The format puts CRLF CRLF after each record's block, and CRLF at each header line's end;
archives in the wild (the sample archives pywb ships: real captures of iana.org and
example.com by several tools) have blocks followed by one CRLF or none, and line ends that a
tool rewrote. ``crawler.warcframe`` takes such a record whole when only line ends stand
between its Content-Length and the next record (or the end of the data), and still reports
a Content-Length that disagrees with the record's extent as damage.

The pywb samples come from PyPI's pywb source package (GPL-3.0, so it is downloaded here,
pinned by hash and cached in pytest's cache, not vendored).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import subprocess
import sys
import tarfile
import uuid
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from caffeine.index import normalize_url
from crawler.ingest import ingest
from crawler.warcframe import Damage, Record, frame

PYWB_SDIST = "pywb-2.10.0.tar.gz"
PYWB_SHA256 = "5ae43c9b2a5321e39b9c8e16538bfbc0146eeb6fe26713232e45378b774a1a96"
B = "http://lenient.example"


# -- crafted archives ------------------------------------------------------------------------


def record(uri: str, body: bytes, eol: bytes = b"\r\n", after: bytes = b"\r\n\r\n", wrong_by: int = 0) -> bytes:
    """A response record with header lines ended by ``eol`` and ``after`` after its block,
    its Content-Length ``wrong_by`` bytes off."""
    http = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    head = [b"WARC/1.0", b"WARC-Type: response", b"WARC-Record-ID: <urn:uuid:%s>" % str(uuid.uuid4()).encode(),
            b"WARC-Date: 2024-01-02T03:04:05Z", b"WARC-Target-URI: " + uri.encode(),
            b"Content-Type: application/http; msgtype=response", b"Content-Length: %d" % (len(http) + wrong_by)]
    return eol.join(head) + eol + eol + http + after


def ids_by_warcio(data: bytes) -> list[str]:
    return [r.rec_headers.get_header("WARC-Record-ID") for r in ArchiveIterator(io.BytesIO(data))]


def framed(tmp_path: Path, data: bytes, name: str = "a.warc") -> tuple[list[str], list[str]]:
    """(record ids, damage texts) that ``frame`` finds in ``data``."""
    path = tmp_path / name
    path.write_bytes(data)
    ids, damage = [], []
    for item in frame(path):
        if isinstance(item, Record):
            head = item.data.split(b"\n\r\n", 1)[0].split(b"\n\r\r\n", 1)[0]
            ids.append(next(line.split(b":", 1)[1].strip().decode() for line in head.split(b"\n")
                            if line.lower().startswith(b"warc-record-id:")))
        else:
            damage.append(item.error)
    return ids, damage


@pytest.mark.parametrize("after", [b"\r\n", b"", b"\n\n", b"\n"], ids=["one-crlf", "none", "lf-lf", "one-lf"])
@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_a_block_followed_by_fewer_line_ends_is_a_whole_record(tmp_path, after, compress):
    records = [record(f"{B}/{n}.html", b"<p>page %d</p>" % n, after=after) for n in range(3)]
    data = b"".join(gzip.compress(r) for r in records) if compress else b"".join(records)
    ids, damage = framed(tmp_path, data, "a.warc.gz" if compress else "a.warc")
    assert damage == []
    assert ids == [ids_by_warcio(r)[0] for r in records]
    if after or compress:
        assert ids == ids_by_warcio(data)
    # else warcio stops at the second record (it reads the line after a block as the line
    # ending it); the extent is still unambiguous, and framing reads on.


@pytest.mark.parametrize("eol", [b"\n", b"\r\r\n"], ids=["lf", "cr-cr-lf"])
def test_header_lines_with_rewritten_line_ends(tmp_path, eol):
    data = b"".join(record(f"{B}/{n}.html", b"<p>page %d</p>" % n, eol=eol) for n in range(3))
    ids, damage = framed(tmp_path, data)
    assert damage == []
    assert ids == ids_by_warcio(data) and len(ids) == 3


def test_a_content_length_that_disagrees_with_the_extent_is_still_damage(tmp_path):
    good = [record(f"{B}/{n}.html", b"<p>page %d</p>" % n) for n in range(3)]
    short = record(f"{B}/short.html", b"<p>two bytes more than it says</p>", wrong_by=-2)
    ids, damage = framed(tmp_path, good[0] + short + good[1] + good[2])
    assert ids == ids_by_warcio(good[0] + good[1] + good[2])
    assert len(damage) == 1 and "Content-Length" in damage[0], damage


# -- pywb's sample archives --------------------------------------------------------------------


@pytest.fixture(scope="module")
def pywb_samples(request) -> dict[str, bytes]:
    """File name -> bytes of every .warc and .warc.gz of pywb's ``sample_archive/warcs``."""
    cache = Path(request.config.cache.mkdir("pywb-sdist"))
    sdist = cache / PYWB_SDIST
    if not sdist.exists() or hashlib.sha256(sdist.read_bytes()).hexdigest() != PYWB_SHA256:
        got = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                              "-d", str(cache), "pywb==2.10.0"], capture_output=True, text=True)
        if got.returncode != 0 or not sdist.exists():
            message = f"could not download pywb's source package from PyPI: {got.stderr[-500:]}"
            if os.environ.get("CI") == "true":
                pytest.fail(message)
            pytest.skip(message)
    assert hashlib.sha256(sdist.read_bytes()).hexdigest() == PYWB_SHA256, "pywb's source package changed"
    out = {}
    with tarfile.open(sdist) as tar:
        for member in tar.getmembers():
            name = member.name.rsplit("/", 1)[-1]
            if "/sample_archive/warcs/" in member.name and name.endswith((".warc", ".warc.gz")):
                out[name] = tar.extractfile(member).read()
    assert len(out) >= 12, sorted(out)
    return out


def test_every_record_warcio_reads_in_pywbs_samples_is_framed_but_one_truly_damaged(tmp_path, pywb_samples):
    missing = {}
    for name, data in sorted(pywb_samples.items()):
        ids, damage = framed(tmp_path, data, name)
        expected = ids_by_warcio(data)
        assert set(ids) <= set(expected), name
        missing[name] = ([i for i in expected if i not in ids], damage)
    # The one record framing drops: in example.warc, a request record whose Content-Length
    # (320) stops two bytes before its block does ("...Host: example.co" | "m\r\n"); warcio
    # reads it by that length and warns that the record is not followed by a newline.
    dropped = {name: m for name, m in missing.items() if m != ([], [])}
    assert list(dropped) == ["example.warc"], dropped
    ids, damage = dropped["example.warc"]
    assert len(ids) == 1 and len(damage) == 1 and "Content-Length 320" in damage[0]
    assert sum(len(ids_by_warcio(d)) for d in pywb_samples.values()) >= 400


@pytest.mark.parametrize("cluster", ["hbase"], indirect=True)
def test_ingesting_pywbs_samples_writes_every_url_warcio_finds(cluster, tmp_path, pywb_samples):
    paths = []
    for name, data in sorted(pywb_samples.items()):
        (tmp_path / name).write_bytes(data)
        paths.append(str(tmp_path / name))
    expected = set()
    for data in pywb_samples.values():
        for r in ArchiveIterator(io.BytesIO(data)):
            if r.rec_type in ("response", "revisit"):
                expected.add(normalize_url(r.rec_headers.get_header("WARC-Target-URI")))
    suffix = uuid.uuid4().hex[:8]
    tables = dict(repository=f"repo_{suffix}", state_table=f"ingest_{suffix}")
    report = ingest(cluster, paths, **tables)
    with cluster.begin() as txn:
        written = {key.decode() for key, _ in txn.scan(tables["repository"], columns=["page:meta", "page:error"])}
        bad = {key.decode(): cols for key, cols in txn.scan(tables["state_table"], columns=["error", "url"])
               if key.startswith(b"bad:")}
    assert written == expected - {None}
    # Two outcomes, one each: example.warc's request record with a Content-Length two bytes
    # short (framing), and example-extra.warc's response whose status line reads "HTTPX/1.1"
    # (whole, but its HTTP block does not parse: its URL's row says so, as a crawl's would).
    assert report.counts["damaged"] == 2 == len(bad), bad
    reasons = {key.split(".warc:")[0].rsplit("/", 1)[1]: cols["error"].decode() for key, cols in bad.items()}
    assert set(reasons) == {"example", "example-extra"}, reasons
    assert "Content-Length 320" in reasons["example"] and "unparsable" in reasons["example-extra"], reasons


@pytest.mark.parametrize("eol", [b"\n", b"\r\r\n"], ids=["lf", "cr-cr-lf"])
@pytest.mark.parametrize("cluster", ["hbase"], indirect=True)
def test_ingesting_records_with_rewritten_line_ends(cluster, tmp_path, eol):
    path = tmp_path / "rewritten.warc"
    path.write_bytes(b"".join(record(f"{B}/{n}.html", b"<p>page %d</p>" % n, eol=eol, after=b"\n")
                              for n in range(3)))
    suffix = uuid.uuid4().hex[:8]
    tables = dict(repository=f"repo_{suffix}", state_table=f"ingest_{suffix}")
    report = ingest(cluster, [str(path)], **tables)
    with cluster.begin() as txn:
        written = {key.decode(): cols for key, cols in txn.scan(tables["repository"], columns=["page:content"])}
    assert report.counts["damaged"] == 0
    assert written == {f"{B}/{n}.html": {"page:content": b"<p>page %d</p>" % n} for n in range(3)}
