"""Real-world charsets (WHATWG Encoding Standard) and hosts/paths (UTS46, RFC 3986) — pure tests.

Charsets: the labels real servers send name encodings by the WHATWG table, not by Python's
codec registry: ``x-sjis`` is Shift_JIS, ``gb2312`` is decoded as GBK, ``iso-8859-9`` as
windows-1254. A page that declares nothing and is not UTF-8 goes to a detector.

URLs: one resource is one row: hosts map by UTS46/IDNA2008 (``faß.de`` is
``xn--fa-hia.de``, not IDNA2003's ``fass.de``), and percent-escapes of unreserved characters
are decoded (``%7Euser`` is ``~user``).
"""

from __future__ import annotations

import pytest

from caffeine.index import normalize_url, parse_html, tokenize

PAGE = "http://example.com/dir/page.html"

JAPANESE = "日本語のページです。検索エンジンのテストをしています。東京都の天気は晴れです。"
CHINESE_GBK_ONLY = "堃喆镕"  # in GBK, not in GB2312: pages labelled gb2312 use them
CHINESE = "中文网页的测试内容，搜索引擎。今天北京的天气很好，我们去公园散步吧。"
TURKISH_1254 = "€ “ağaç” ışık şeker"  # €, curly quotes: windows-1254 bytes 0x80, 0x93, 0x94


def html(text: str, head: str = "") -> str:
    return f"<html><head>{head}<title>t</title></head><body><p>{text}</p></body></html>"


def test_x_sjis_label_is_shift_jis():
    body = html(JAPANESE).encode("shift_jis")
    doc = parse_html(body, PAGE, "text/html; charset=x-sjis")
    assert JAPANESE in doc.text


def test_x_sjis_label_in_a_meta_tag():
    body = html(JAPANESE, '<meta http-equiv="Content-Type" content="text/html; charset=x-sjis">').encode("shift_jis")
    assert JAPANESE in parse_html(body, PAGE, "text/html").text


def test_gb2312_label_is_decoded_as_gbk():
    text = CHINESE + CHINESE_GBK_ONLY
    body = html(text, '<meta charset="gb2312">').encode("gbk")
    doc = parse_html(body, PAGE, "text/html")
    assert text in doc.text and "\ufffd" not in doc.text


def test_iso_8859_9_label_is_windows_1254():
    body = html(TURKISH_1254).encode("cp1254")
    doc = parse_html(body, PAGE, "text/html; charset=iso-8859-9")
    assert TURKISH_1254 in doc.text
    assert "ağaç" in tokenize(doc.text)


def test_a_meta_utf16_label_means_utf8_and_the_bom_wins():
    body = html("café", '<meta charset="utf-16">').encode("utf-8")
    assert "café" in parse_html(body, PAGE, None).text
    assert "café" in parse_html(b"\xef\xbb\xbf" + body, PAGE, "text/html; charset=x-sjis").text


@pytest.mark.parametrize("text, codec", [(JAPANESE, "shift_jis"), (CHINESE, "gbk"),
                                         ("Привет, мир! Это тестовая страница на русском языке.", "cp1251")])
def test_an_undeclared_legacy_page_goes_to_the_detector(text, codec):
    doc = parse_html(html(text).encode(codec), PAGE, "text/html")
    assert text in doc.text


def test_an_undeclared_short_latin_page_reads_as_windows_1252():
    doc = parse_html("<p>smörgåsbord crème</p>".encode("latin-1"), PAGE, "text/html")
    assert doc.text == "smörgåsbord crème"


def test_undeclared_utf8_stays_utf8():
    doc = parse_html(html(JAPANESE).encode("utf-8"), PAGE, None)
    assert JAPANESE in doc.text and doc.encoding == "utf-8"


# -- URLs ----------------------------------------------------------------------------------


@pytest.mark.parametrize("url, want", [
    ("http://faß.de/", "http://xn--fa-hia.de/"),                  # IDNA2008: ß is kept, not mapped to ss
    ("http://FAß.de/a", "http://xn--fa-hia.de/a"),                # UTS46 maps case first
    ("http://ＥＸＡＭＰＬＥ.com/", "http://example.com/"),          # full-width letters map to ASCII
    ("http://bücher.de/", "http://xn--bcher-kva.de/"),
    ("http://xn--fa-hia.de/", "http://xn--fa-hia.de/"),
    ("http://example.com/%7Euser/", "http://example.com/~user/"),
    ("http://example.com/%7euser/", "http://example.com/~user/"),
    ("http://example.com/%41%2D%5F%2E%30", "http://example.com/A-_.0"),
    ("http://example.com/a%2Fb%20c%3F", "http://example.com/a%2Fb%20c%3F"),  # reserved and space stay escaped
    ("http://example.com/s?q=%7Ex&r=%26", "http://example.com/s?q=~x&r=%26"),
])
def test_normalize_url_uts46_and_unreserved_escapes(url, want):
    assert normalize_url(url) == want


def test_one_resource_is_one_url():
    assert normalize_url("http://example.com/~user") == normalize_url("http://example.com/%7Euser")
    assert normalize_url("http://faß.de/") != normalize_url("http://fass.de/")


@pytest.mark.parametrize("url", ["http://a..b/", "http://-bad-.com/", "http://xn--/"])
def test_hosts_uts46_rejects_are_not_urls(url):
    assert normalize_url(url) is None
