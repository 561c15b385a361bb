"""Query parsing: the text a user typed -> the index terms to look up.

Layer: api, pure (imports only ``caffeine.index``; no I/O). The search endpoint, the search
page and the tests share it.

Contract of ``parse_query(text, max_chars=MAX_QUERY_CHARS, max_terms=MAX_QUERY_TERMS)``:

* ``text`` longer than ``max_chars`` code points, empty, or only whitespace raises
  ``QueryError``;
* the terms are ``caffeine.index.tokenize(text)`` (the tokenizer the export observer indexes
  documents with: NFC, ``\\w+`` runs, lowercased, tokens over 64 characters dropped), so a
  query term and an index term are spelled alike by construction; punctuation separates
  words and is otherwise ignored (``"C++ / GC"`` -> ``c``, ``gc``);
* duplicates are dropped, first occurrence wins (a repeated word does not weigh more);
* no term left (``"!!!"``) raises ``QueryError``; more than ``max_terms`` distinct terms
  raises ``QueryError`` (each term is one postings row to read and score);
* ``QueryError`` is the only exception it raises, for any ``str``; its message is written
  for the person who typed the query.

Semantics (what ``/search`` does with the terms): OR. A document matches when it contains at
least one term; its score sums the BM25 contributions of the terms it contains, so documents
with more (and rarer) query terms rank first. No stemming, no stopwords, no phrases: the
index has none either.
"""

from __future__ import annotations

from dataclasses import dataclass

from caffeine.index import tokenize

__all__ = ["MAX_QUERY_CHARS", "MAX_QUERY_TERMS", "ParsedQuery", "QueryError", "parse_query"]

MAX_QUERY_CHARS = 256
MAX_QUERY_TERMS = 16


class QueryError(ValueError):
    """The query cannot be searched; the message says why, for the user."""


@dataclass(frozen=True)
class ParsedQuery:
    text: str                 # what the user typed, stripped
    terms: tuple[str, ...]    # distinct index terms, in the order typed


def parse_query(text: str, max_chars: int = MAX_QUERY_CHARS, max_terms: int = MAX_QUERY_TERMS) -> ParsedQuery:
    if not isinstance(text, str):
        raise QueryError("the query must be text")
    if len(text) > max_chars:
        raise QueryError(f"the query is too long ({len(text)} characters; at most {max_chars})")
    stripped = text.strip()
    if not stripped:
        raise QueryError("the query is empty")
    terms = tuple(dict.fromkeys(tokenize(stripped)))
    if not terms:
        raise QueryError("the query has no searchable words (letters or digits)")
    if len(terms) > max_terms:
        raise QueryError(f"the query has too many distinct words ({len(terms)}; at most {max_terms})")
    return ParsedQuery(stripped, terms)
