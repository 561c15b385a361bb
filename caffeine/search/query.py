"""Query parsing: the text a user typed -> what to look up and what to require.

Layer: search. Pure (imports only ``caffeine.index``; no I/O). The search endpoint, the search
page and the tests share it.

The query language (docs/RANKING.md has the semantics)::

    word              a word the results must contain (in any field), all words by default
    "two words"       a phrase: its words consecutive in the page's text
    -word             results must not contain the word (in any field)
    site:docs.python.org   only pages on that host or its subdomains
    Type::member      a qualified name (``::`` or ``.`` between names): its words are words,
    Type.member       and the innermost qualifier's (``Type``) weigh more (``qualifiers``)

Contract of ``parse_query(text, max_chars=MAX_QUERY_CHARS, max_terms=MAX_QUERY_TERMS)``:

* ``text`` longer than ``max_chars`` code points, empty, or only whitespace raises
  ``QueryError``;
* words are ``caffeine.index.tokenize`` of the text between operators (the tokenizer the
  export observer indexes documents with: NFC, ``\\w+`` runs, lowercased, tokens over 64
  characters dropped), so a query term and an index term are spelled alike by construction;
  punctuation separates words and is otherwise ignored (``"C++ / GC"`` -> ``c``, ``gc``);
  ``-x-y`` excludes both ``x`` and ``y``;
* ``terms``: the distinct words to score, free words and phrases' words, in the order typed
  (a repeated word does not weigh more); ``qualifiers``: the terms of each qualified name's
  innermost qualifier, the part before the last ``::`` or ``.`` of a plain chunk whose parts
  all start with a letter or ``_`` (``TypeId::fmt`` -> ``typeid``; ``std::vector::push_back``
  and ``std::vector<T>::push_back`` -> ``vector``; ``java.util.ArrayList.add`` ->
  ``arraylist``; ``3.11`` -> none): the page that documents a member is its container's
  (outer parts are namespaces), so ranking weighs them more
  (``caffeine.index.scoring.Similarity.qualifier_weight``); ``excluded``: distinct excluded words; ``phrases``: each quoted phrase of two or more words, as its word tuple (a
  one-word quote is just a word); ``sites``: the hosts of ``site:`` operators, lowercased;
* a ``QueryError`` for: an unbalanced ``"``; a quote or a ``-`` with no word in it; ``-"..."``
  (exclude single words); a word both searched for and excluded; a ``site:`` without a valid
  host; no word to search (only
  exclusions or sites, or only punctuation); more than ``max_terms`` distinct words, excluded
  ones included (each is one postings row to read);
* ``QueryError`` is the only exception it raises, for any ``str``; its message is written
  for the person who typed the query.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from caffeine.index import tokenize

__all__ = ["MAX_QUERY_CHARS", "MAX_QUERY_TERMS", "ParsedQuery", "QueryError", "parse_query"]

MAX_QUERY_CHARS = 256
MAX_QUERY_TERMS = 16

# One operator or plain chunk at a time, left to right. A "-" or "site:" is an operator only
# at the start of a whitespace-separated chunk ("e-mail" is two words, not an exclusion).
_PART = re.compile(r'(?P<neg>-)?"(?P<phrase>[^"]*)"|(?<!\S)site:(?P<site>\S*)|(?<!\S)-(?P<excl>[^\s"]+)|(?P<plain>[^\s"]+)|(?P<quote>")')
# A qualified name inside a plain chunk: names joined by "::" or ".", each starting with a
# letter or "_" (so "3.11" or "v1.2" is no qualified name), the first not inside a word.
_QUALIFIED = re.compile(r"(?<!\w)[^\W\d]\w*(?:(?:::|\.)[^\W\d]\w*)+")
_QUALIFIER_SPLIT = re.compile(r"::|\.")
_GENERICS = re.compile(r"<[^<>]*>")  # std::vector<T>::push_back names std::vector::push_back
_HOST = re.compile(r"^(?=.{1,253}$)[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?)*(?::\d{1,5})?$")


class QueryError(ValueError):
    """The query cannot be searched; the message says why, for the user."""


@dataclass(frozen=True)
class ParsedQuery:
    text: str                                 # what the user typed, stripped
    terms: tuple[str, ...]                    # distinct words to score, in the order typed
    phrases: tuple[tuple[str, ...], ...] = () # quoted phrases of 2+ words
    excluded: tuple[str, ...] = ()            # distinct words results must not contain
    sites: tuple[str, ...] = ()               # hosts results must be on (any of them)
    qualifiers: tuple[str, ...] = ()          # qualified names' innermost qualifiers (Type in Type::member)

    @property
    def lookups(self) -> tuple[str, ...]:
        """Every term whose postings the query reads: the scored ones, then the excluded."""
        return self.terms + self.excluded


def parse_query(text: str, max_chars: int = MAX_QUERY_CHARS, max_terms: int = MAX_QUERY_TERMS) -> ParsedQuery:
    if not isinstance(text, str):
        raise QueryError("the query must be text")
    if len(text) > max_chars:
        raise QueryError(f"the query is too long ({len(text)} characters; at most {max_chars})")
    stripped = text.strip()
    if not stripped:
        raise QueryError("the query is empty")
    words: list[str] = []
    phrases: list[tuple[str, ...]] = []
    excluded: list[str] = []
    sites: list[str] = []
    qualifiers: list[str] = []
    for match in _PART.finditer(stripped):
        if match.group("quote") is not None:
            raise QueryError('the query has an unbalanced quote ("): close the phrase or remove the quote')
        if match.group("phrase") is not None:
            tokens = tokenize(match.group("phrase"))
            if match.group("neg"):
                raise QueryError('-"…" is not supported: exclude single words (-word)')
            if not tokens:
                raise QueryError('a quoted phrase has no searchable words (letters or digits)')
            words += tokens
            if len(tokens) > 1:
                phrases.append(tuple(tokens))
        elif match.group("site") is not None:
            host = match.group("site").strip().lower().rstrip(".").removeprefix("http://").removeprefix("https://").rstrip("/")
            if not _HOST.match(host):
                raise QueryError(f"site: needs a host name, e.g. site:docs.python.org (got {match.group('site')!r})")
            sites.append(host)
        elif match.group("excl") is not None:
            tokens = tokenize(match.group("excl"))
            if not tokens:
                raise QueryError("a - has no word after it: write -word to exclude a word")
            excluded += tokens
        else:
            words += tokenize(match.group("plain"))
            for name in _QUALIFIED.findall(_GENERICS.sub("", match.group("plain"))):
                qualifiers += tokenize(_QUALIFIER_SPLIT.split(name)[-2])
    terms = tuple(dict.fromkeys(words))
    if not terms:
        if excluded or sites:
            raise QueryError("the query has nothing to search for: add a word besides -exclusions and site:")
        raise QueryError("the query has no searchable words (letters or digits)")
    excluded_terms = tuple(dict.fromkeys(excluded))
    both = [t for t in excluded_terms if t in terms]
    if both:
        raise QueryError(f"{both[0]!r} is both searched for and excluded (-{both[0]})")
    if len(terms) + len(excluded_terms) > max_terms:
        raise QueryError(f"the query has too many distinct words ({len(terms) + len(excluded_terms)}; at most {max_terms})")
    return ParsedQuery(stripped, terms, tuple(dict.fromkeys(phrases)), excluded_terms, tuple(dict.fromkeys(sites)),
                       tuple(dict.fromkeys(qualifiers)))
