"""Snippets: a short, HTML-safe excerpt of a document with the query terms marked.

Layer: search. Pure (imports only ``caffeine.index`` and the standard library).

``token_spans(text)`` returns ``(start, end, token)`` for every token of ``text`` in order:
exactly the tokens ``caffeine.index.tokenize`` yields for NFC text (the stored ``doc:parsed``
text is NFC already, ``normalize_text`` made it so), with their character offsets, so a
term found by the index is found again here at the right place.

``make_snippet(text, terms, max_tokens, max_chars)`` picks the window of at most
``max_tokens`` consecutive tokens that contains the most distinct query terms (then the
most occurrences, then the earliest), starts it a few tokens before its first match for
context, and renders it:

* every character of the document is HTML-escaped (``html.escape`` with quotes); the only
  markup in the result is ``<mark>`` around occurrences of query terms, so the result can be
  inserted into a page as is;
* ``…`` at either end says the excerpt is cut there; at most ``max_chars`` characters of the
  document are shown (cut at a token boundary when possible);
* a document without any query term gives its beginning (never an error; an empty text
  gives ``""``).

``prepare(text)`` does the per-document half of that work (NFC and ``token_spans``) once;
``make_snippet`` accepts its result in place of the text, so a caller that shows the same
document for many queries (the search service's details cache) tokenizes it once.
"""

from __future__ import annotations

import html
import re
import unicodedata
from dataclasses import dataclass
from typing import Iterable

from caffeine.index import MAX_TOKEN_CHARS

__all__ = ["token_spans", "prepare", "PreparedText", "make_snippet", "ELLIPSIS"]

ELLIPSIS = "…"
_WORD = re.compile(r"\w+")  # caffeine.index.text's token pattern; tests pin the equivalence
_CONTEXT_TOKENS = 4         # tokens shown before the first match of the window
_MAX_HITS = 512             # match positions considered (a long page repeating a term)


def token_spans(text: str) -> list[tuple[int, int, str]]:
    lowered = text.lower()
    if len(lowered) == len(text) and all(
        (a.isalnum() or a == "_") == (b.isalnum() or b == "_") for a, b in _changed(text, lowered)
    ):
        # Fast path (nearly every text): lowercasing kept every offset and every character's
        # word-ness, so the lowered text's tokens are the tokens, lowered, at the same places.
        return [
            (m.start(), m.end(), m.group())
            for m in _WORD.finditer(lowered) if m.end() - m.start() <= MAX_TOKEN_CHARS
        ]
    spans = []
    for match in _WORD.finditer(text):
        token = match.group().lower()
        if len(token) <= MAX_TOKEN_CHARS:
            spans.append((match.start(), match.end(), token))
    return spans


def _changed(text: str, lowered: str):
    """(original, lowered) for the characters lowercasing changed."""
    if text == lowered:
        return ()
    return ((a, b) for a, b in zip(text, lowered) if a != b)


def _best_window(hits: list[tuple[int, str]], max_tokens: int) -> int:
    """Token index where the best window starts (hits: (token index, term), ascending)."""
    best_key, best_start = None, 0
    right = 0
    counts: dict[str, int] = {}
    # Two pointers: the window starting at hit ``left`` spans hits[left:right].
    for left in range(len(hits)):
        start = hits[left][0]
        while right < len(hits) and hits[right][0] < start + max_tokens:
            counts[hits[right][1]] = counts.get(hits[right][1], 0) + 1
            right += 1
        key = (sum(1 for c in counts.values() if c), right - left)
        if best_key is None or key > best_key:
            best_key, best_start = key, start
        term = hits[left][1]
        counts[term] -= 1
    return best_start


@dataclass(frozen=True)
class PreparedText:
    """A document's NFC text and its token spans: what every snippet of it starts from."""

    text: str
    # Tuples: the service caches thousands of these, and the garbage collector stops
    # tracking tuples of untracked objects but traverses every list on each full collection.
    spans: tuple[tuple[int, int, str], ...]
    tokens: tuple[str, ...]  # spans' tokens alone, searched with tuple.index (C speed)


def prepare(text: str | None) -> PreparedText:
    text = unicodedata.normalize("NFC", text or "")
    spans = tuple(token_spans(text))
    return PreparedText(text, spans, tuple(s[2] for s in spans))


def _hits(tokens: tuple[str, ...], wanted: set[str]) -> list[tuple[int, str]]:
    """(token index, term) of every occurrence of a wanted term, ascending; the first
    ``_MAX_HITS``. One ``tuple.index`` sweep per term: a query has a few terms, a page
    hundreds of tokens."""
    hits = []
    for term in wanted:
        i = -1
        try:
            while True:
                i = tokens.index(term, i + 1)
                hits.append((i, term))
        except ValueError:
            pass
    hits.sort()
    return hits[:_MAX_HITS]


def make_snippet(text: str | PreparedText, terms: Iterable[str], max_tokens: int = 32, max_chars: int = 280) -> str:
    prepared = text if isinstance(text, PreparedText) else prepare(text)
    text, spans = prepared.text, prepared.spans
    if not spans:
        shown = text[:max_chars]
        return html.escape(shown) + (ELLIPSIS if len(text) > len(shown) else "")
    wanted = set(terms)
    hits = _hits(prepared.tokens, wanted)
    first = _best_window(hits, max_tokens) if hits else 0
    first = max(0, first - _CONTEXT_TOKENS) if hits else 0
    last = min(len(spans), first + max_tokens + (_CONTEXT_TOKENS if hits else 0)) - 1
    begin = 0 if first == 0 else spans[first][0]
    end = len(text) if last == len(spans) - 1 else spans[last][1]
    # Shorten to max_chars, preferring a token boundary.
    if end - begin > max_chars:
        limit = begin + max_chars
        cut = max((s[1] for s in spans[first:last + 1] if s[1] <= limit), default=limit)
        end = cut if cut > begin else limit
    out = [ELLIPSIS if begin > 0 else ""]
    pos = begin
    for start, stop, token in spans[first:last + 1]:
        if start < begin or stop > end:
            continue
        if token in wanted:
            out.append(html.escape(text[pos:start]))
            out.append("<mark>" + html.escape(text[start:stop]) + "</mark>")
            pos = stop
    out.append(html.escape(text[pos:end]))
    if end < len(text):
        out.append(ELLIPSIS)
    return "".join(out).strip()
