"""Text normalization, tokenization and the content fingerprint.

Layer: index. Pure; imports the standard library and ``mmh3``. The search API
tokenizes queries with the same ``tokenize``, so a query term and an indexed term are spelled
alike by construction.

Contracts:

* ``normalize_text(s)``: Unicode NFC; every run of whitespace (Unicode whitespace, including
  no-break space) and of C0/C1 control characters becomes one space; no leading or trailing
  space. Idempotent.
* ``tokenize(text)``: the maximal runs of word characters (Python's ``\\w``: Unicode letters,
  digits, marks of those and ``_``) of the NFC form of ``text``, each lowercased with
  ``str.lower``, in order; tokens longer than ``MAX_TOKEN_CHARS`` (64) code points after
  lowercasing are dropped (base64 blobs, hashes, binary junk), not cut. No stemming, no
  stopwords: positions stay exact and every word can be searched.
* ``fingerprint(text)``: MurmurHash3 x64 128-bit (seed 0) of the UTF-8 bytes of
  ``normalize_text(text)``, as 32 lowercase hex digits (the unsigned 128-bit value,
  big-endian). Texts that normalize alike (exact duplicates, or differing only in
  whitespace) share it; anything else differs with overwhelming probability. The empty text
  has a fingerprint too, so all empty pages form one cluster. ``normalized=True`` says the
  text is ``normalize_text``'s output already (a ``ParsedDocument``'s is): the same
  fingerprint, without normalizing twice (the whitespace pass costs as much as hashing
  forty times over).
"""

from __future__ import annotations

import re
import unicodedata

import mmh3

__all__ = ["MAX_TOKEN_CHARS", "normalize_text", "tokenize", "fingerprint"]

MAX_TOKEN_CHARS = 64

# \s covers Unicode whitespace; the explicit ranges add the control characters that are not
# whitespace (NUL, DEL, C1), which binary junk decoded as text is full of.
_SPACE_OR_CONTROL = re.compile(r"[\s\x00-\x1f\x7f-\x9f]+")
# Those control characters alone: the ones of the ranges above that are not whitespace, taken
# from str.isspace (\t-\r, \x1c-\x1f and \x85 are whitespace; the other 55 are not).
_CONTROL = re.compile("[%s]" % "".join(
    f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0)) if not chr(c).isspace()))
_WORD = re.compile(r"\w+")
_CAPITAL_SIGMA = "\u03a3"


def normalize_text(s: str) -> str:
    """NFC, whitespace and control runs collapsed to one space, stripped."""
    nfc = unicodedata.normalize("NFC", s)
    # Fast path (nearly every text, in under half the substitution's time): str.split() splits at
    # exactly the characters \s matches (str.isspace; tests check every code point), so when
    # nfc has no control character that is not whitespace, the split words joined by one space
    # are what the substitution and strip give. Splitting keeps those controls (they are not
    # whitespace) and joining adds only spaces, so the joined text has one exactly when nfc has;
    # isprintable() is false for every one of them and, where it holds, is cheaper to ask than
    # the search.
    joined = " ".join(nfc.split())
    if joined.isprintable() or _CONTROL.search(joined) is None:
        return joined
    return _SPACE_OR_CONTROL.sub(" ", nfc).strip()


def tokenize(text: str) -> list[str]:
    """Lowercased ``\\w+`` tokens of ``text`` in order, tokens over 64 characters dropped."""
    nfc = unicodedata.normalize("NFC", text)
    # Fast path (nearly every text): lowercase the whole text and match once. str.lower maps
    # each character on its own except U+03A3, whose lowercase (final sigma or not) depends on
    # the characters around it, which may lie outside the token. No character lowercases to
    # nothing, so an unchanged length means each lowercased to one code point; for every such
    # character the lowercase is a word character exactly when the character is (tests check
    # every code point). So the lowered text's \w+ runs lie where the text's do, and each is
    # its token lowercased as the loop below does, of the same length; a text of at most
    # MAX_TOKEN_CHARS characters has no token too long.
    if _CAPITAL_SIGMA not in nfc:
        lowered = nfc.lower()
        if len(lowered) == len(nfc):
            tokens = _WORD.findall(lowered)
            if len(lowered) > MAX_TOKEN_CHARS:
                tokens = [token for token in tokens if len(token) <= MAX_TOKEN_CHARS]
            return tokens
    # Lowercase each token after matching, not the text before: lowercasing can introduce
    # combining marks (U+0130 -> "i" + U+0307) that would split a word in two.
    tokens = []
    for match in _WORD.finditer(nfc):
        token = match.group().lower()
        if len(token) <= MAX_TOKEN_CHARS:
            tokens.append(token)
    return tokens


def fingerprint(text: str, *, normalized: bool = False) -> str:
    """32 hex digits of MurmurHash3 x64-128 over the normalized text's UTF-8 (``normalized``:
    ``text`` is ``normalize_text``'s output already)."""
    data = (text if normalized else normalize_text(text)).encode("utf-8", errors="surrogatepass")
    return format(mmh3.hash128(data, 0, True, signed=False), "032x")
