"""The fast paths of ``normalize_text`` and ``tokenize`` (caffeine.index.text) return what the
plain implementations return, for every text.

The fast paths rest on facts about Python's Unicode tables, checked here over every code point
(a Python with other tables fails these first): ``str.split()``, ``\\s`` and ``str.isspace``
agree; ``str.lower`` maps each character on its own except U+03A3; no character lowercases to
nothing and only U+0130 to several code points; lowercasing keeps each character's word class.
Then the new functions are compared with the plain implementations, kept here as they were, on
generated text, on edge cases and on the text of real pages.
"""

from __future__ import annotations

import glob
import os
import re
import string
import sys
import unicodedata

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from caffeine.index import MAX_TOKEN_CHARS, normalize_text, parse_html, tokenize
from caffeine.index import text as text_module

# --- The plain implementations, as they were before the fast paths ------------------------

_SPACE_OR_CONTROL = re.compile(r"[\s\x00-\x1f\x7f-\x9f]+")
_WORD = re.compile(r"\w+")


def reference_normalize_text(s: str) -> str:
    """NFC, whitespace and control runs collapsed to one space, stripped."""
    return _SPACE_OR_CONTROL.sub(" ", unicodedata.normalize("NFC", s)).strip()


def reference_tokenize(text: str) -> list[str]:
    """Lowercased ``\\w+`` tokens of ``text`` in order, tokens over 64 characters dropped."""
    # Lowercase each token after matching, not the text before: lowercasing can introduce
    # combining marks (U+0130 -> "i" + U+0307) that would split a word in two.
    tokens = []
    for match in _WORD.finditer(unicodedata.normalize("NFC", text)):
        token = match.group().lower()
        if len(token) <= MAX_TOKEN_CHARS:
            tokens.append(token)
    return tokens


# --- The facts, over every code point --------------------------------------------------------

ALL = [chr(c) for c in range(sys.maxunicode + 1)]
C0_C1 = [chr(c) for c in (*range(0x20), *range(0x7F, 0xA0))]
SPACE = re.compile(r"\s")
WORD = re.compile(r"\w")
SIGMA = "\u03a3"


def test_split_and_backslash_s_and_isspace_agree_on_every_code_point():
    differ = [
        hex(ord(c)) for c in ALL
        if not (c.isspace() == bool(SPACE.fullmatch(c)) == (("a" + c + "b").split() == ["a", "b"]))
    ]
    assert differ == []
    # Splitting keeps every other character inside a word.
    assert all(("a" + c + "b").split() == ["a" + c + "b"] for c in ALL if not c.isspace())


def test_the_control_pattern_is_the_controls_that_are_not_whitespace():
    controls = [c for c in ALL if text_module._CONTROL.search(c)]
    assert controls == [c for c in C0_C1 if not c.isspace()]
    assert len(controls) == 55 and "\x85" not in controls and "\x1c" not in controls
    assert not any(c.isprintable() for c in C0_C1)  # isprintable() rules out all of them


def test_lowercase_is_per_character_but_for_capital_sigma():
    others = [c for c in ALL if c != SIGMA]
    per_character = [c.lower() for c in others]
    # Next to each other, next to cased letters, next to case-ignorable ones (an apostrophe, a
    # combining mark): lowering the text is lowering each character.
    for separator in ("", "A", "a", "'", "\u0301", "I\u0307", " "):
        assert (separator.join(others)).lower() == separator.lower().join(per_character)
    # U+03A3 is the exception: its lowercase depends on what surrounds it.
    assert "ΟΔΟΣ".lower() == "οδος" and "ΟΔΟΣ'Α".lower() == "οδοσ'α"


def test_which_characters_lowercase_to_several_code_points():
    lengths = {c: len(c.lower()) for c in ALL}
    assert min(lengths.values()) == 1  # none lowercases to nothing
    assert [c for c, n in lengths.items() if n != 1] == ["\u0130"]
    assert "\u0130".lower() == "i\u0307" and unicodedata.category("\u0307") == "Mn"


def test_lowercase_keeps_the_word_class_of_every_single_code_point_mapping():
    differ = [
        hex(ord(c)) for c in ALL
        if len(c.lower()) == 1 and bool(WORD.fullmatch(c)) != bool(WORD.fullmatch(c.lower()))
    ]
    assert differ == []


# --- The functions against the plain implementations -----------------------------------------

WHITESPACE = [c for c in ALL if c.isspace()]
INTERESTING = [
    "\u0130", SIGMA, "σ", "ς", "'", "\u2019", "\u00ad", "\u0307", "\u0301", "\u0345", "\u1e9e",
    "ß", "ﬁ", "İ", "Α", "α", "K", "\u212a", "Ω", "\u2126", "_", "é", "e\u0301", "\ud800",
]
pieces = st.one_of(
    st.text(st.sampled_from(string.ascii_letters + string.digits + string.punctuation), max_size=8),
    st.text(st.sampled_from(WHITESPACE), max_size=4),
    st.text(st.sampled_from(C0_C1), max_size=4),
    st.lists(st.sampled_from(INTERESTING), max_size=6).map("".join),  # "e\u0301": two code points
    st.text(st.characters(exclude_categories=()), max_size=8),  # any code point, surrogates too
    st.builds(lambda c, n: c * n, st.sampled_from(["a", "A", "\u0130", "é", "\u0307", "Σ"]), st.integers(28, 70)),
)
texts = st.lists(pieces, max_size=30).map("".join)

EDGE_CASES = [
    "", " ", "   ", " \t\n\r\x0b\x0c\x1c\x85\xa0\u2028\u3000 ", "\x00", "\x00\x01 \x7f\x9f",
    "a" * 64, "a" * 65, "A" * 64, "A" * 65, "x " + "a" * 64 + " y", "x " + "a" * 65 + " y",
    "\u0130" * 32, "\u0130" * 33, "a" * 63 + "\u0130", "a" * 62 + "\u0130", "\u0130" * 64, "\u0130" * 65,
    "İ", "İİİ", "İstanbul İZMİR", "xİy", "ΟΔΟΣ'Α", "ΟΔΟΣ", "ΟΔΟΣ Α", "'Σ'", "aΣ'", "Σ" * 65,
    "a\x00b", "a \x00 b", "\x00a\x00", "a\x85b", "a\xa0b", "\xa0a\x85", "e\u0301", "a\u0301" * 40,
    "\ud800 a\udfff",
]


@pytest.mark.parametrize("text", EDGE_CASES, ids=ascii)
def test_edge_cases(text):
    assert normalize_text(text) == reference_normalize_text(text)
    assert tokenize(text) == reference_tokenize(text)


def test_edge_cases_mean_what_they_say():
    assert tokenize("a" * 64) == ["a" * 64] and tokenize("a" * 65) == []
    assert tokenize("\u0130" * 32) == ["i\u0307" * 32] and tokenize("\u0130" * 33) == []
    assert tokenize("ΟΔΟΣ'Α") == ["οδος", "α"]
    assert normalize_text(" a\x00b\x85c\xa0 ") == "a b c"


@settings(max_examples=3000, deadline=None)
@given(texts)
@example("ΟΔΟΣ'Α")
def test_generated_text(text):
    assert normalize_text(text) == reference_normalize_text(text)
    assert tokenize(text) == reference_tokenize(text)


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(exclude_categories=()), max_size=200))
def test_arbitrary_unicode(text):
    assert normalize_text(text) == reference_normalize_text(text)
    assert tokenize(text) == reference_tokenize(text)


DOCS = "/usr/share/doc/python3.11/html"


@pytest.mark.skipif(not os.path.isdir(DOCS), reason=f"{DOCS} is not installed")
def test_real_pages_raw_and_parsed():
    files = sorted(glob.glob(f"{DOCS}/**/*.html", recursive=True))[:200]
    assert files
    for name in files:
        body = open(name, "rb").read()
        for text in (body.decode("latin-1"), parse_html(body, "http://x/" + name, "text/html").text):
            assert normalize_text(text) == reference_normalize_text(text), name
            assert tokenize(text) == reference_tokenize(text), name
