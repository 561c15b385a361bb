"""The ranking formula has one home (``caffeine.index.scoring.SIMILARITY``).

Held here against an independent transcription of docs/RANKING.md (``reference_scoring``),
against that page's own table, and against the copies that inline it for speed: export's
impact levels and the search engine's posting loop. And a change of the formula must move the
impact levels' format on with it.
"""

from __future__ import annotations

import random
import re

import pytest

from support import reference_scoring
from caffeine.index import impacts
from caffeine.index.scoring import FIELDS, SIMILARITY, Similarity

from api.routers.search import RANKING_DOC
from support import ROOT

RANKING_MD = ROOT / "docs" / "RANKING.md"


def _random_document(rng: random.Random):
    counts = (rng.randint(0, 40), rng.randint(0, 5), rng.randint(0, 30), rng.randint(0, 4))
    lengths = (rng.randint(max(1, counts[0]), 20_000), rng.randint(counts[1], 40),
               rng.randint(counts[2], 200), rng.randint(counts[3], 12))
    averages = (rng.uniform(1, 30_000), rng.choice([0.0, rng.uniform(0.5, 60)]),
                rng.uniform(0.5, 300), rng.uniform(0.5, 15))
    return counts, lengths, averages


def test_the_similarity_is_the_documented_formula():
    rng = random.Random(11)
    for _ in range(5_000):
        counts, lengths, averages = _random_document(rng)
        n = rng.randint(1, 100_000)
        df = rng.randint(0, n)
        votes = rng.choice([-1, 0, 1, 3, 9, 40, 10_000])
        distance = rng.choice([None, 1, 2, 7, 40])
        got = SIMILARITY.term_score(counts, SIMILARITY.field_norms(lengths, averages), df, n)
        assert got == pytest.approx(reference_scoring.bm25f(counts, lengths, averages, df, n), rel=1e-12, abs=1e-15)
        assert SIMILARITY.idf(df, n) == pytest.approx(reference_scoring.idf(df, n), rel=1e-12)
        assert SIMILARITY.link_prior(votes) == pytest.approx(reference_scoring.prior(votes), rel=1e-15)
        assert SIMILARITY.proximity_bonus(distance) == pytest.approx(reference_scoring.proximity(distance), rel=1e-12)
        parts = [got, rng.uniform(0, 5)]
        want = reference_scoring.score(parts, votes) + reference_scoring.proximity(distance)
        assert SIMILARITY.score(parts, votes, distance) == pytest.approx(want, rel=1e-12)
    assert SIMILARITY.multiplier(True) == reference_scoring.multiplier(True)
    assert SIMILARITY.multiplier(False) == reference_scoring.multiplier(False) == 1.0
    assert SIMILARITY.prior_ceiling == 1 + reference_scoring.PRIOR_W
    assert all(SIMILARITY.link_prior(v) < SIMILARITY.prior_ceiling for v in (0, 10, 10**12))


def test_impact_levels_inline_the_same_formula():
    """Export's ``impacts.impact`` (its own floating-point order, part of the index format)
    is ``(sat(tf~) + β·sat(ttf)) × prior`` with the reference means in place of the corpus's."""
    rng = random.Random(12)
    for _ in range(5_000):
        counts, lengths, _ = _random_document(rng)
        votes = rng.choice([0, 2, 11, 500])
        norms = SIMILARITY.field_norms(lengths, impacts.REFERENCE_AVERAGES)
        pseudo = sum(c * norm for c, norm in zip(counts, norms))
        title = SIMILARITY.title_term(counts[1], norms[1] / SIMILARITY.field_weights[1])
        want = (SIMILARITY.saturation(pseudo) + title if pseudo > 0 else 0.0) \
            * SIMILARITY.link_prior(votes)
        assert impacts.impact(counts, lengths, votes) == pytest.approx(want, rel=1e-12)


def test_a_documents_impact_levels_are_each_postings_own():
    """``DocumentIndex.impact_levels`` (which computes each distinct set of field counts
    once) gives every term ``impact_level`` of its own posting, in the order asked."""
    from caffeine.index.documents import document_index

    words = [f"w{i % 37}" for i in range(400)] + [f"once{i}" for i in range(60)]
    doc = {"title": "w1 w2 title words", "text": " ".join(words), "length": len(words)}
    anchors = [["http://127.0.0.1:1/a", "w3 anchor words"], ["http://127.0.0.2:1/b", "w1 more"]]
    index = document_index("http://127.0.0.1:1/site/w4/page.html", doc, anchors)
    names = sorted(index.terms, reverse=True)
    want = [impacts.impact_level((p.tf, p.title, p.anchor, p.url), index.lengths, index.votes)
            for p in (index.terms[name] for name in names)]
    assert index.impact_levels(names) == want
    assert len(set(want)) > 1


def test_a_change_of_formula_needs_a_new_impact_format(monkeypatch):
    """Stored levels are bounds under the parameters of their format: today's must be the
    current format's, and any other ``Similarity`` is told apart."""
    assert impacts.level_definition() == impacts.LEVEL_DEFINITIONS[impacts.IMPACT_FORMAT]
    for changed in (Similarity(k1=1.3), Similarity(field_weights=(1.0, 4.0, 2.0, 2.0)),
                    Similarity(field_b=(0.75, 0.5, 0.6, 0.4)), Similarity(prior_weight=0.3), Similarity(prior_k=5.0),
                    Similarity(title_clause=0.5)):
        monkeypatch.setattr(impacts, "SIMILARITY", changed)
        assert impacts.level_definition() != impacts.LEVEL_DEFINITIONS[impacts.IMPACT_FORMAT], changed
    # The proximity bonus and a qualifier's weight are the query's, applied at query time,
    # never stored: they are not part of a level.
    for query_time in (Similarity(proximity_alpha=0.5), Similarity(qualifier_weight=3.0)):
        monkeypatch.setattr(impacts, "SIMILARITY", query_time)
        assert impacts.level_definition() == impacts.LEVEL_DEFINITIONS[impacts.IMPACT_FORMAT]


def _table_parameters(text: str) -> dict[str, float]:
    """docs/RANKING.md's parameter table (``| k1 | 1.2 | why |``, ``| w, b title | 3.0, 0.5 |``,
    ``| W, K (prior) | 0.25, 10 |``) and the proximity paragraph's α, by ``parameters()`` names."""
    named: dict[str, float] = {}
    for name, values in re.findall(r"^\| ([^|]+?) \| ([0-9., ]+) \|", text, flags=re.M):
        numbers = [float(v) for v in values.split(",")]
        if name == "k1":
            named["k1"] = numbers[0]
        elif name.startswith("w, b "):
            named[f"w {name[5:]}"], named[f"b {name[5:]}"] = numbers
        elif name.startswith("W, K"):
            named["W"], named["K"] = numbers
        elif name.startswith("β"):
            named["β"] = numbers[0]
        elif name.startswith("γ"):
            named["γ"] = numbers[0]
    alpha = re.search(r"with α = ([0-9.]+)", text)
    if alpha:
        named["α"] = float(alpha.group(1))
    return named


def test_the_documented_parameters_are_the_similarity_s():
    assert _table_parameters(RANKING_MD.read_text(encoding="utf-8")) == SIMILARITY.parameters()
    assert set(SIMILARITY.parameters()) == {"k1", "W", "K", "α", "β", "γ"} | {f"{p} {f}" for f in FIELDS for p in "wb"}


def test_the_table_check_sees_a_changed_value():
    text = RANKING_MD.read_text(encoding="utf-8").replace("| k1 | 1.2 |", "| k1 | 1.5 |")
    assert _table_parameters(text)["k1"] == 1.5 != SIMILARITY.k1


def test_the_api_describes_the_similarity_in_use():
    assert SIMILARITY.describe() in RANKING_DOC
    for value in ("k1 = 1.2", "1 + 0.5 · v / (v + 10)", "ln(0.3 + e^(−δ))", "w = 1, 3, 3, 2", "b = 0.5, 1, 0.6, 0.5",
                  "+ 1 · ttf / (ttf + k1)", "ttf      = tf_title / (1 − b_title + b_title · len_title / avg_len_title)",
                  "m(t)     = 2 for a qualified name's innermost qualifier"):
        assert value in RANKING_DOC
    other = Similarity(k1=2.0, prior_weight=0.5).describe()
    assert "k1 = 2" in other and "1 + 0.5 · v" in other


def test_without_the_title_clause_the_unread_bound_is_bm25f_s(monkeypatch):
    """``unread_bound`` with β = 0 is the bound of BM25F alone: ``max p · g(min(1, y/p))`` over
    the priors 1, P and the level itself (the form it had before the title clause)."""
    monkeypatch.setattr(impacts, "SIMILARITY", Similarity(title_clause=0.0))
    ceiling = impacts.SIMILARITY.prior_ceiling

    def bm25f_bound(weight, ratio, level):
        y = impacts.level_ceiling(level)

        def at(p):
            z = y / p
            return p if z >= 1.0 else p * ratio * z / (1.0 + (ratio - 1.0) * z)

        return weight * max(at(1.0), at(ceiling), at(min(max(y, 1.0), ceiling)))

    rng = random.Random(13)
    for _ in range(20_000):
        weight, ratio, level = rng.uniform(0.1, 20), rng.choice([0.3, 0.9, 1.0, 1.7, 6.0]), rng.randint(0, 99_999)
        assert impacts.unread_bound(weight, ratio, level) == pytest.approx(bm25f_bound(weight, ratio, level), rel=1e-12)


def test_the_unread_bound_is_reached_by_some_posting():
    """Tight, not only safe: for levels that a posting can sit at, some (z, u, p) allowed by
    the level comes within a grid step of the bound (a bound far above every possible
    contribution would make cold queries give up for nothing). A posting is (z, v, p): BM25F's
    saturation, the title clause's, the prior; the level allows p·(z + β·v) <= y."""
    rng = random.Random(14)
    ceiling, beta = SIMILARITY.prior_ceiling, SIMILARITY.title_clause

    def g(x, ratio):
        return ratio * x / (1.0 + (ratio - 1.0) * x)

    for _ in range(300):
        ratio = rng.choice([1.0, 1.3, 2.0, 5.0])
        level = rng.randint(1, int((1 + beta) * ceiling * impacts.SCALE) - 1)
        y = impacts.level_ceiling(level)
        best = 0.0
        for i in range(201):
            z = min(0.999999, i / 200)
            v = min(0.999999, max(0.0, (y / ceiling - z) / beta))
            if ceiling * (z + beta * v) <= y + 1e-12:
                best = max(best, ceiling * (g(z, ratio) + beta * g(v, ratio)))
        assert best <= impacts.unread_bound(1.0, ratio, level) * (1 + 1e-9)
        assert best >= impacts.unread_bound(1.0, ratio, level) - 0.02
