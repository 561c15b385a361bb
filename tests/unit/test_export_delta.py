"""Export writes only what changed (pure): a posting the index holds with the same value is not
written again, nor its impacts cell at the same level, once the previous run's writes landed.
Whatever runs land or are lost, the index's live cells end up those of a full export of the
page as it is now."""

from __future__ import annotations

import random

import caffeine.index.impacts as impacts

from caffeine.index import tokenize
from caffeine.index.impacts import VOTE_STEPS, impact, impact_level, optimistic_statistics
from caffeine.index.scoring import SIMILARITY
from caffeine.observers.export import inputs_digest, plan_export, planned_here, redo_writes
from caffeine.percolator.serving import TOMBSTONE

URL = "http://web.test/popular"
WORDS = [f"w{i}" for i in range(300)]


def _doc(text: str) -> dict:
    return {"text": text, "title": "Popular page", "length": len(tokenize(text))}


def _anchors(n: int, rng: random.Random) -> list[list[str]]:
    return sorted([f"host{i}.test", " ".join(rng.sample(WORDS, 2))] for i in range(n))


def _apply(index: dict, rows: dict, impact_rows: dict, seq: int) -> None:
    """Timestamped puts into a model of the serving tables: the newest version of a cell wins."""
    for table, written in (("p", rows), ("i", impact_rows)):
        for term, cells in written.items():
            for column, value in cells.items():
                key = (table, term, column)
                if key not in index or index[key][0] <= seq:
                    index[key] = (seq, value)


def _live(index: dict) -> dict:
    return {key: value for key, (_, value) in index.items() if value != TOMBSTONE}


def test_one_more_inlink_rewrites_the_postings_its_anchor_text_changed():
    rng = random.Random(1)
    doc, anchors = _doc(" ".join(rng.choices(WORDS, k=400))), _anchors(2000, rng)
    first, rows, impact_rows, _ = plan_export(URL, doc, "fp", None, 0, 10, anchors)
    assert len(rows) == len(first["terms"]) and len(impact_rows) == len(first["terms"])
    more = sorted(anchors + [["newhost.test", "zebra quagga"]])
    second, rows, impact_rows, _ = plan_export(URL, doc, "fp", first, 10, 20, more)
    assert set(rows) == {"zebra", "quagga"}
    assert set(impact_rows) == {"zebra", "quagga"}
    # The same change after a run whose writes did not land (s:done behind it): all again.
    _, rows, impact_rows, _ = plan_export(URL, doc, "fp", first, 9, 20, more)
    assert len(rows) == len(second["terms"]) and len(impact_rows) == len(second["terms"])
    # A state recorded before digests existed: all again.
    old = {k: v for k, v in first.items() if k != "digests"}
    assert isinstance(first["digests"], str) and len(first["digests"]) == 8 * len(first["terms"])
    _, rows, _, _ = plan_export(URL, doc, "fp", old, 10, 20, more)
    assert len(rows) == len(second["terms"])


def test_an_inlink_to_a_page_with_few_moves_no_level_unless_its_votes_cross_a_grid_point():
    # Most pages have a few inlinks. Each new one used to move the link prior every level
    # includes, so all of a page's impacts cells were written again (and the old ones
    # tombstoned) for each inlink it gained: most of what a changed page cost the index.
    rng = random.Random(4)
    doc = _doc(" ".join(rng.choices(WORDS, k=300)))
    anchors = _anchors(8, rng)
    first, _, _, _ = plan_export(URL, doc, "fp", None, 0, 10, anchors)
    more = sorted(anchors + [["newhost.test", "zebra quagga"]])
    _, rows, impact_rows, _ = plan_export(URL, doc, "fp", first, 10, 20, more)
    assert set(rows) == {"zebra", "quagga"}
    # The anchor text's length moved too, and with it the levels of the words in it; the
    # body's words stay where they are.
    anchor_words = {word for _, text in more for word in text.split()}
    assert {"zebra", "quagga"} <= set(impact_rows) <= anchor_words
    # Over any number of votes, the levels move with them at a handful of counts.
    moves = [v for v in range(0, 100_000) if optimistic_statistics((9, 9, 9, 9), v)[1]
             != optimistic_statistics((9, 9, 9, 9), v + 1)[1]]
    assert len(moves) <= VOTE_STEPS


def test_the_level_is_a_bound_computed_on_the_grid():
    rng = random.Random(2)
    for _ in range(5000):
        counts = (rng.randint(0, 9), rng.randint(0, 2), rng.randint(0, 40), rng.randint(0, 2))
        lengths = (rng.randint(1, 50_000), rng.randint(2, 30), rng.randint(40, 9000), rng.randint(2, 9))
        votes = rng.randint(0, 50_000)
        assert impact_level(counts, lengths, votes) / impacts.SCALE >= impact(counts, lengths, votes)
        (body, title, anchor, url), grid_votes = optimistic_statistics(lengths, votes)
        assert 0.9 * lengths[0] <= body <= lengths[0] and 0.9 * lengths[2] <= anchor <= lengths[2]
        assert votes <= grid_votes
        assert SIMILARITY.link_prior(grid_votes) <= SIMILARITY.link_prior(votes) + SIMILARITY.prior_weight / VOTE_STEPS


def test_any_sequence_of_runs_landed_or_lost_leaves_a_full_exports_cells():
    rng = random.Random(3)
    for trial in range(40):
        text = rng.choices(WORDS, k=rng.randint(20, 200))
        anchors = _anchors(rng.randint(0, 300), rng)
        index, state, done = {}, None, 0
        for run in range(1, 12):
            change = rng.random()
            if change < 0.3:
                text = text[:-5] + rng.choices(WORDS, k=rng.randint(0, 10))
            elif change < 0.8:
                anchors = sorted(anchors[rng.randint(0, 3):] + _anchors(rng.randint(0, 4), rng))
            doc = _doc(" ".join(text)) if text else None
            seq = run * 10
            state, rows, impact_rows, _ = plan_export(URL, doc, "fp", state, done, seq, anchors)
            if rng.random() < 0.8:  # the post-commit writes landed, then s:done
                _apply(index, rows, impact_rows, seq)
                done = seq
            elif rng.random() < 0.5:  # some landed, s:done did not
                _apply(index, {k: v for k, v in rows.items() if rng.random() < 0.5}, {}, seq)
        if done < state["seq"]:  # the next run (after a lost one: every posting again)
            _, rows, impact_rows, _ = plan_export(URL, doc, "fp", state, done, state["seq"], anchors)
            _apply(index, rows, impact_rows, state["seq"])
        full = {}
        _, rows, impact_rows, _ = plan_export(URL, doc, "fp", None, 0, 1, anchors)
        _apply(full, rows, impact_rows, 1)
        assert _live(index) == _live(full), trial


def test_a_redo_after_the_page_changed_leaves_the_next_run_writing_every_posting():
    """A redo writes the page as it is when it runs (its inputs may have changed since the run
    it redoes recorded its digests). Had it claimed s:done, a later run whose posting for a
    word equals the recorded digest again would skip it, and the redo's value would stay."""
    rng = random.Random(4)
    doc = _doc(" ".join(rng.choices(WORDS, k=300)))
    anchors = _anchors(50, rng)
    digest = lambda a: inputs_digest(b"1 fp", b"doc", repr(a).encode())  # noqa: E731
    index = {}
    first, rows, impact_rows, _ = plan_export(URL, doc, "fp", None, 0, 10, anchors)
    first["inputs"] = digest(anchors)
    _apply(index, rows, impact_rows, 10)
    # Run 20 (for the cluster state) commits; its writes are lost.
    state20, _, _, _ = plan_export(URL, doc, "fp", first, 10, 20, anchors)
    state20["inputs"] = digest(anchors)
    # The anchor text changes (a word added), then the worker redoes run 20 with it.
    changed = sorted(anchors + [["x.test", "w1 w1"]])
    rows, impact_rows, stats = redo_writes(URL, doc, "fp", state20, 10, changed, digest(changed))
    _apply(index, rows, impact_rows, 20)
    done = 20 if "s:done" in stats else 10
    # Before the anchor run, the change is undone: the anchor text is run 20's again.
    state30, rows, impact_rows, _ = plan_export(URL, doc, "fp", state20, done, 30, anchors)
    _apply(index, rows, impact_rows, 30)
    full = {}
    _, rows, impact_rows, _ = plan_export(URL, doc, "fp", None, 0, 1, anchors)
    _apply(full, rows, impact_rows, 1)
    assert _live(index) == _live(full)


def test_a_second_export_in_one_transaction_finds_the_first_ones_plan_only_for_the_same_inputs():
    # Both export observers run inline after the cluster observer: the second finds the
    # first's export:state (seq = the shared start_ts) before s:done can show it.
    state = {"seq": 700, "inputs": "abc"}
    assert planned_here(state, "abc", 700)
    assert not planned_here(state, "abd", 700), "other inputs: the writes planned are not these"
    assert not planned_here(state, "abc", 701), "an earlier transaction's plan: s:done decides"
    assert not planned_here(None, "abc", 700)
