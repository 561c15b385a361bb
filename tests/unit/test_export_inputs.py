"""The export observer's skip rule (pure): a run whose inputs equal the last run's, whose
writes landed, has nothing to write. Both export observers (cluster state, anchor text) see
a new document, so without it every page would be exported twice."""

from caffeine.observers.export import inputs_digest, up_to_date

PARSED = b'{"text": "a b", "title": "t", "length": 2}'
ANCHORS = b'[["h", "a b"]]'


def test_the_digest_covers_what_the_writes_depend_on():
    base = inputs_digest(b"1 fp", PARSED, ANCHORS)
    assert inputs_digest(b"1 fp", PARSED, ANCHORS) == base
    assert inputs_digest(b"1 fp", PARSED, b"[]") != base                    # anchor text
    assert inputs_digest(b"1 fp", PARSED.replace(b'"t"', b'"u"'), ANCHORS) != base  # title, same text
    assert inputs_digest(b"0 fp", PARSED, ANCHORS) != base                  # no longer canonical
    assert inputs_digest(b"1 fp2", PARSED, ANCHORS) != base
    # A non-canonical page's document does not matter: nothing of it is written.
    assert inputs_digest(b"0 fp", PARSED, ANCHORS) == inputs_digest(b"0 fp", b"{}", ANCHORS)
    # Parts are length-prefixed: moving bytes between them changes the digest.
    assert inputs_digest(b"1 fp", b"ab", b"c") != inputs_digest(b"1 fp", b"a", b"bc")


def test_a_run_is_skipped_only_when_the_same_inputs_were_written_and_landed():
    digest = inputs_digest(b"1 fp", PARSED, ANCHORS)
    state = {"seq": 10, "terms": ["a", "b"], "removed": [], "inputs": digest}
    assert up_to_date(state, digest, done_seq=10)
    assert not up_to_date(state, digest, done_seq=9)          # its writes may not have landed
    assert not up_to_date(state, inputs_digest(b"1 fp", PARSED, b"[]"), done_seq=10)
    assert not up_to_date(None, digest, done_seq=0)
    assert not up_to_date({"seq": 10, "terms": [], "removed": []}, digest, done_seq=10)  # older state
