"""Ranking's one home: ``Similarity`` owns the formula, and ``SIMILARITY`` is the one in use.

Layer: index. Pure; standard library only. Everything that scores a document or
bounds a score calls ``SIMILARITY``: the search engine's rankings (``caffeine.search.ranking``), its cold
reads' proofs (``caffeine.search.cold``, ``caffeine.search.cold_proof``), its proximity re-ranking (``caffeine.search.matching``)
and export's impact levels (``caffeine.index.impacts``). The fast paths that inline a step
for speed are tested against these methods. ``docs/RANKING.md``'s formula and parameter table
and the search API's description are generated from (``describe``) or checked against
(``tests/unit/test_ranking_home.py``) this object, so a change made here reaches them or fails.

For a query with terms t1..tn and a document d (``describe`` prints it with the values)::

    score(d)    = (Σ over terms t in d of m(t) · term(t, d)) × prior(d)  [+ proximity(d)]
    m(t)        = γ if t is a qualified name's innermost qualifier in the query (``Type`` of ``Type::member``), else 1
    term(t, d)  = idf(t) · (k1 + 1) · (tf~ / (tf~ + k1) + β · ttf / (ttf + k1))
    tf~         = Σ over fields f of w_f · tf_f(t, d) / (1 − b_f + b_f · len_f(d) / avg_len_f)
    ttf         = tf_title(t, d) / (1 − b_title + b_title · len_title(d) / avg_len_title)
    idf(t)      = ln(1 + (N − df + 0.5) / (df + 0.5))                    (never negative)
    prior(d)    = 1 + W · votes / (votes + K)
    proximity   = ln(α + e^(−δ)) − ln α

Fields (``FIELDS``): the body (the page's visible text), its title, the anchor text of links
to it (``caffeine.index.anchor_record``: a link every page of a site carries counts once) and
the words of its URL path. ``N`` = indexed documents, ``df`` = documents with the term in any
field, ``len_f`` the field's length in tokens, ``avg_len_f`` its mean over the index (a field
whose mean is 0 is taken at length ratio 1; an empty field is normalised as one of one token:
it holds no term, so its norm never counts, and with b = 1 the ratio 0 would divide by zero). ``votes`` = distinct (linking site, anchor text)
pairs: boilerplate navigation is one vote per site, however many pages carry it, and the
prior saturates (at most ``prior_ceiling`` = 1 + W), so a page many others link to wins a
tie, never a match. ``δ`` = the least distance in body tokens between two different query
words; the bonus is added to all-words matches of a query of two or more words. The title
clause scores a title match on its own, as a multi-field BM25 does, beside the BM25F sum that
already counts the title's occurrences: a page named by the query wins over pages whose bodies
repeat its words, and a short title the query names wins over a long one that also holds the
word (``ttf``: the title's count normalised by its length like the title field's,
docs/RANKING.md, "The title clause"). A qualified name's qualifier weighs γ
(``qualifier_weight``): the page that documents ``TypeId::fmt`` is ``TypeId``'s, while
``fmt`` is a member of many (docs/RANKING.md, "Qualified names"); the weight is the query's,
not the document's, so it is applied to a term's score, never stored in an impact level.
With one field (body), no votes, β = 0 and γ = 1 this is exactly BM25 with k1 = 1.2 and the
body's b.

Export bakes the formula into the impact levels it stores (``caffeine.index.impacts``): a
change of any parameter here changes the index format, and ``tests/unit/test_ranking_home.py``
fails until ``impacts.IMPACT_FORMAT`` (which readers check per document, reading whole lists
for documents of another format) is moved on with it (see ``impacts.LEVEL_DEFINITIONS``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

__all__ = ["Similarity", "SIMILARITY", "FIELDS"]

FIELDS = ("body", "title", "anchor", "url")


@dataclass(frozen=True)
class Similarity:
    """BM25F over ``FIELDS``, times a saturating link prior, plus a proximity bonus.

    Parameters (docs/RANKING.md says where each value comes from): ``k1`` (saturation of the
    weighted frequency), ``field_weights`` and ``field_b`` (per field of ``FIELDS``: weight
    and length normalisation), ``prior_weight`` W and ``prior_k`` K (the link prior
    1 + W·v/(v + K)), ``proximity_alpha`` α (the proximity bonus ln(α + e^(−δ)) − ln α),
    ``title_clause`` β (the title clause β · ttf / (ttf + k1) beside BM25F's saturated
    frequency, ``ttf`` the title's count under the title field's length normalisation),
    ``qualifier_weight`` γ (the multiplier of a qualified name's innermost qualifier's terms).
    Immutable: a ``Similarity`` is a value, compared and hashed by its parameters. The title's
    weight must be positive: the title clause reads the title's normalisation back from its
    field norm (``contribution``).
    """

    k1: float = 1.2
    field_weights: tuple[float, float, float, float] = (1.0, 3.0, 3.0, 2.0)
    field_b: tuple[float, float, float, float] = (0.5, 1.0, 0.6, 0.5)
    prior_weight: float = 0.5
    prior_k: float = 10.0
    proximity_alpha: float = 0.3
    title_clause: float = 1.0
    qualifier_weight: float = 2.0

    def __post_init__(self) -> None:
        if not self.field_weights[1] > 0:
            raise ValueError(f"the title's field weight must be positive, not {self.field_weights[1]}")
        if not self.qualifier_weight >= 1:
            raise ValueError(f"the qualifier weight must be at least 1, not {self.qualifier_weight}")

    # -- term weights ----------------------------------------------------------------------
    def idf(self, doc_freq: int, num_docs: int) -> float:
        """Lucene's BM25 idf: positive even for a term in every document (df is clamped to
        [0, N])."""
        doc_freq = max(0, min(doc_freq, num_docs))
        return math.log(1.0 + (num_docs - doc_freq + 0.5) / (doc_freq + 0.5))

    def term_weight(self, doc_freq: int, num_docs: int) -> float:
        """``idf · (k1 + 1)``: the most one term can add to a score before the prior."""
        return self.idf(doc_freq, num_docs) * (self.k1 + 1)

    # -- length normalisation and saturation -----------------------------------------------
    def field_norms(self, lengths: Sequence[int], averages: Sequence[float]) -> tuple[float, ...]:
        """Per field, ``w_f / (1 − b_f + b_f · len_f / avg_len_f)``: what one occurrence of a
        term in that field adds to ``tf~`` in a document of field ``lengths``, under the
        corpus means ``averages`` (a mean of 0 counts as length ratio 1, an empty field as one
        of one token)."""
        return tuple(
            w / (1 - b + b * (max(length, 1) / avg if avg > 0 else 1.0))
            for w, b, length, avg in zip(self.field_weights, self.field_b, lengths, averages)
        )

    def saturation(self, pseudo: float) -> float:
        """``sat(tf~) = tf~ / (tf~ + k1)``, 0 for a term absent from the document."""
        return pseudo / (pseudo + self.k1) if pseudo > 0 else 0.0

    def title_norm(self, length: int, average: float) -> float:
        """``1 / (1 − b_title + b_title · len_title / avg_len_title)``: what one occurrence in a
        title of ``length`` tokens counts for in the title clause under the mean ``average``
        (a mean of 0 counts as length ratio 1, an empty title as one of one token): the title
        field's norm without its weight."""
        b = self.field_b[1]
        return 1.0 / (1 - b + b * (max(length, 1) / average if average > 0 else 1.0))

    def title_term(self, title_count: int, title_norm: float = 1.0) -> float:
        """The title clause per unit of term weight: ``β · ttf / (ttf + k1)`` with
        ``ttf = title_count · title_norm`` (``title_norm``), saturated on its own; 0 without
        a title occurrence."""
        if title_count <= 0:
            return 0.0
        ttf = title_count * title_norm
        return self.title_clause * ttf / (ttf + self.k1)

    def contribution(self, weight: float, counts: Sequence[int], norms: Sequence[float]) -> float:
        """One term's term(t, d) (BM25F's saturated frequency and the title clause) in one
        document: ``weight`` = its ``term_weight``, ``counts`` =
        its (body, title, anchor, url) frequencies there, ``norms`` = the document's
        ``field_norms``. The reference every inlined copy is tested against."""
        pseudo = counts[0] * norms[0] + counts[1] * norms[1] + counts[2] * norms[2] + counts[3] * norms[3]
        if pseudo <= 0:
            return 0.0
        title = counts[1]
        if title <= 0:
            return weight * pseudo / (pseudo + self.k1)  # the inlined body-only copies' order
        # norms[1] is w_title · title_norm: the clause takes the norm without the weight.
        return weight * (pseudo / (pseudo + self.k1) + self.title_term(title, norms[1] / self.field_weights[1]))

    def term_score(self, counts: Sequence[int], norms: Sequence[float], doc_freq: int, num_docs: int) -> float:
        """term(t, d) (bm25f and the title clause) of a term of document frequency ``doc_freq``
        among ``num_docs``."""
        return self.contribution(self.term_weight(doc_freq, num_docs), counts, norms)

    def reference_pseudo(self, counts: Sequence[int], lengths: Sequence[int], references: Sequence[float]) -> float:
        """``tf~`` of a posting under fixed positive field means ``references`` (export's
        impact levels, which cannot know the corpus's): the same sum as ``field_norms``',
        with fields of count 0 skipped. Its floating-point steps are part of the index
        format (they decide stored levels): do not reorder them."""
        pseudo = 0.0
        for count, weight, b, length, reference in zip(counts, self.field_weights, self.field_b, lengths, references):
            if count:
                pseudo += count * weight / (1 - b + b * max(length, 1) / reference)
        return pseudo

    def multiplier(self, qualifies: bool) -> float:
        """``m(t)``: γ for a term of a qualified name's innermost qualifier in the query, else 1."""
        return self.qualifier_weight if qualifies else 1.0

    # -- the document's own factors ---------------------------------------------------------
    def link_prior(self, votes: int) -> float:
        """1 + W · votes / (votes + K); 1.0 for no (or an unknown, negative) count."""
        votes = max(0, votes)
        return 1.0 + self.prior_weight * votes / (votes + self.prior_k)

    @property
    def prior_ceiling(self) -> float:
        """1 + W: what no document's prior reaches (the bound of every unread posting's)."""
        return 1.0 + self.prior_weight

    def proximity_bonus(self, distance: int | None) -> float:
        """``ln(α + e^(−δ)) − ln α`` for the least distance δ between two different query
        words in the body; 0 when they never both occur there (``None``)."""
        if distance is None:
            return 0.0
        return math.log(self.proximity_alpha + math.exp(-distance)) - math.log(self.proximity_alpha)

    # -- the whole score --------------------------------------------------------------------
    def score(self, term_scores: Iterable[float], votes: int, distance: int | None = None) -> float:
        """A document's score: the sum of its terms' ``term_score`` times its link prior, plus
        the proximity bonus at ``distance`` (given only for an all-words match of two or more
        words)."""
        return math.fsum(term_scores) * self.link_prior(votes) + self.proximity_bonus(distance)

    # -- what people read ---------------------------------------------------------------------
    def describe(self) -> str:
        """The formula with this object's values, as the search API's description shows it
        (plain text, indented as a Markdown code block, then the weights)."""
        w, b = self.field_weights, self.field_b
        return (
            f"    score(d) = Σ_t m(t) · idf(t) · (k1+1) · (tf~ / (tf~ + k1) + {_num(self.title_clause)} · ttf / (ttf + k1)) "
            f"× (1 + {_num(self.prior_weight)} · v / "
            f"(v + {_num(self.prior_k)})) [+ ln({_num(self.proximity_alpha)} + e^(−δ)) − ln {_num(self.proximity_alpha)}]\n"
            f"    tf~      = Σ_f w_f · tf_f / (1 − b_f + b_f · len_f / avg_len_f)     f ∈ {', '.join(FIELDS)}\n"
            f"    ttf      = tf_title / (1 − b_title + b_title · len_title / avg_len_title)\n"
            f"    idf(t)   = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))                k1 = {_num(self.k1)}\n"
            f"    m(t)     = {_num(self.qualifier_weight)} for a qualified name's innermost qualifier (Type in Type::member), else 1\n"
            f"\n"
            f"with weights w = {', '.join(_num(x) for x in w)} and b = {', '.join(_num(x) for x in b)} "
            f"({', '.join(FIELDS)})"
        )

    def parameters(self) -> dict[str, float]:
        """Every parameter by the name docs/RANKING.md's table gives it (``k1``, ``w body``,
        ``b body``, ..., ``W``, ``K``, ``α``, ``β``)."""
        named = {"k1": self.k1}
        for field, w, b in zip(FIELDS, self.field_weights, self.field_b):
            named[f"w {field}"], named[f"b {field}"] = w, b
        named.update({"W": self.prior_weight, "K": self.prior_k, "α": self.proximity_alpha, "β": self.title_clause,
                      "γ": self.qualifier_weight})
        return named


def _num(x: float) -> str:
    """``1.2``, ``10``, ``0.25``: a parameter as written in prose (no trailing ``.0``)."""
    return f"{x:g}"


SIMILARITY = Similarity()
