"""Near-duplicate clusters on a served site, end to end on HBase: crawled, clustered by the
cluster observer, collapsed in search with "N similar pages", split when a copy moves away,
and equal to the from-scratch reference and to the Spark baseline (``caffeine verify``).

The site holds the cases docs/INDEXING.md names: two copies of an article that differ only in
their "updated on" line; a chain of three pages whose ends are near-duplicates of the middle
one only (one cluster, until the middle page goes); a page published in British and American spelling, with two exact
copies of the American one; templated pages that differ in the one name they document (not
near-duplicates: their titles differ); short pages that differ in one word of five (too
different to be near-duplicates).
"""

from __future__ import annotations

import json

from fastapi.testclient import TestClient

from api.dependencies import get_cluster
from api.main import create_app
from caffeine.search.settings import SearchSettings
from caffeine.index.schema import CLUSTER_STATE, REPOSITORY, decode_cluster_state
from caffeine.observers.app import application
from caffeine.observers.dups import largest_clusters
from caffeine.percolator.worker import Worker
from support.cli_helpers import cli_env, run_cli
from support.reference_index import incremental, reference
from spark.verify import verify
from support.served_site import crawl_and_settle, indexed, served, spark_session, truth  # noqa: F401 (spark_session: a fixture)

WORDS = ("river stone bridge lantern harbor meadow orchard quarry summit valley willow anchor beacon canyon "
         "delta ember falcon glacier hollow island jasper kestrel lagoon marble nectar oasis pebble quill "
         "raven saddle thistle umber velvet walnut yonder zephyr acorn bramble cedar dune").split()


def prose(seed: int, n: int) -> str:
    """``n`` words of deterministic filler, different for each ``seed``."""
    return " ".join(WORDS[(seed * 7 + i * (seed + 3)) % len(WORDS)] + str((i * 13 + seed) % 17) for i in range(n))


def html(title: str, body: str, links: dict[str, str] | None = None) -> bytes:
    anchors = " ".join(f'<a href="{href}">{text}</a>' for href, text in (links or {}).items())
    return (f"<html><head><title>{title}</title></head><body><nav>Home Index Search</nav>"
            f"<main><h1>{title}</h1><p>{body}</p></main>{anchors}</body></html>").encode()


ARTICLE = "articleword " + prose(1, 80)
BRITISH = ("The colour dialogue sets the foreground colour of the centre of the selection; "
           "the colour is kept in the dialogue until another colour is chosen. " + prose(2, 40))
AMERICAN = BRITISH.replace("colour", "color").replace("dialogue", "dialog").replace("centre", "center")
CHAIN = prose(5, 100).split()


def chain_text(changed: list[int], tag: str) -> str:
    """The chain's shared text with the words at ``changed`` replaced: A and C each differ
    from B in two words (near-duplicates of B: 84 and 81 of 93 distinct shingles shared),
    from each other in four (78 of 99: 0.79, no near-duplicates), so B alone holds the three
    together."""
    return "chainword " + " ".join(f"{tag}{i}" if i in changed else w for i, w in enumerate(CHAIN))


def near_site(version: int) -> dict[str, tuple[bytes, dict[str, str], list[str]]]:
    pages = {
        "/article.html": html("Release notes", f"{ARTICLE} Updated on 2026-11-01"),
        "/article-copy.html": html("Release notes", f"{ARTICLE} Updated on 2026-11-20") if version == 0
        else html("Release notes", "articleword " + prose(9, 80)),
        "/colour.html": html("Colour dialogue", BRITISH),
        "/color.html": html("Color dialog", AMERICAN),
        "/copy-one.html": html("Color dialog", AMERICAN),
        "/copy-two.html": html("Color dialog", AMERICAN),
        "/rotate-90.html": html("Rotate 90 degrees clockwise", "Rotate the layer by 90 degrees clockwise. " + prose(3, 30)),
        "/rotate-270.html": html("Rotate 90 degrees counter-clockwise",
                                 "Rotate the layer by 90 degrees counter-clockwise. " + prose(3, 30)),
        "/chain-a.html": html("Chain", chain_text([10, 60], "alt")),
        "/chain-c.html": html("Chain", chain_text([30, 80], "oth")),
        "/short-a.html": html("Short", "alpha beta gamma delta epsilon"),
        "/short-b.html": html("Short", "alpha beta gamma delta zeta"),
    }
    if version == 0:
        pages["/chain-b.html"] = html("Chain", chain_text([], ""))
    out = {path: (body, {}, []) for path, body in pages.items()}
    links = {path: path for path in [*pages, "/chain-b.html"]}  # still linked when it is gone (404)
    out["/"] = (html("Home", "home", links), {}, [])
    return out


def states(cluster) -> dict[str, tuple[str | None, bool]]:
    with cluster.begin() as txn:
        return {row.decode(): (s.fingerprint, s.canonical) for row, cols in txn.scan(REPOSITORY, columns=[CLUSTER_STATE])
                for s in [decode_cluster_state(cols.get(CLUSTER_STATE))] if s.fingerprint}


def check_the_dups_command(cluster, b: str, british: str, american: str) -> None:
    """``caffeine dups`` (a child process, as a user runs it) shows the near cluster, its two
    contents and their similarity."""
    env = cli_env(table_prefix=cluster.settings.table_prefix)
    shown = run_cli("dups", "--url", b + "/colour.html", env=env)
    assert shown.returncode == 0, shown.stderr
    assert f"4 pages, canonical {b}/color.html, 2 near-duplicate contents" in shown.stdout, shown.stdout
    assert f"content {british}  (near: {american[:12]} 1.00)" in shown.stdout, shown.stdout  # alike once folded
    listed = json.loads(run_cli("dups", "--hash", british, "--json", env=env).stdout)
    assert {part["fingerprint"] for part in listed["exact"]} == {british, american}
    assert set(listed["members"]) == {b + p for p in ("/colour.html", "/color.html", "/copy-one.html", "/copy-two.html")}
    top = run_cli("dups", "--top", "1", env=env)
    assert "4 pages" in top.stdout and "(2 near-duplicate contents)" in top.stdout, top.stdout


def test_near_duplicates_cluster_collapse_and_split(fresh_cluster, spark_session, request):  # noqa: F811
    cluster = fresh_cluster
    application.install(cluster)
    app = create_app(SearchSettings(stats_refresh_s=3600, details_cache_s=0))
    app.dependency_overrides[get_cluster] = lambda: cluster
    with served(near_site) as site, Worker(cluster, application, threads=4), TestClient(app) as client:
        b = site.base
        asked = crawl_and_settle(cluster, site)
        got = incremental(cluster)
        want = reference(truth(site, asked))
        assert got["dups"] == want["dups"] and got["docs"] == want["docs"] and got["postings"] == want["postings"]

        canonical = {url: c for _, (c, members) in got["dups"].items() for url in members}
        assert canonical[b + "/article-copy.html"] == canonical[b + "/article.html"], "a date line apart"
        spelling = {b + p for p in ("/colour.html", "/color.html", "/copy-one.html", "/copy-two.html")}
        assert {canonical[u] for u in spelling} == {b + "/color.html"}, "spelling variants and exact copies: one cluster"
        assert {canonical[b + p] for p in ("/chain-a.html", "/chain-b.html", "/chain-c.html")} == {b + "/chain-a.html"}
        for apart in ("/rotate-90.html", "/rotate-270.html", "/short-a.html", "/short-b.html"):
            assert canonical[b + apart] == b + apart, f"{apart} is no near-duplicate of anything"
        shown = indexed(cluster)
        assert b + "/colour.html" not in shown and b + "/color.html" in shown
        assert len({b + "/article.html", b + "/article-copy.html"} & shown) == 1
        states_now = states(cluster)
        assert states_now[b + "/colour.html"][0] != states_now[b + "/color.html"][0], "two contents, one cluster"

        # Search shows each cluster once, with how many similar pages it stands for.
        hits = client.get("/search", params={"q": "articleword"}).json()["results"]
        assert len(hits) == 1 and hits[0]["cluster_size"] == 2
        hits = client.get("/search", params={"q": "foreground"}).json()["results"]
        assert [h["url"] for h in hits] == [b + "/color.html"] and hits[0]["cluster_size"] == 4
        assert "3 similar pages" in client.get("/", params={"q": "foreground"}).text
        assert "near-duplicate contents" in client.get(f"/page/dups/{hits[0]['fingerprint']}").text.lower()
        listed = client.get(f"/dups/{hits[0]['fingerprint']}").json()
        assert {m["url"] for m in listed["members"]} == spelling and listed["size"] == 4
        contents = {c["fingerprint"]: c for c in listed["contents"]}
        british = states_now[b + "/colour.html"][0]
        assert contents[hits[0]["fingerprint"]]["size"] == 3 and contents[british]["size"] == 1
        assert [e["fingerprint"] for e in contents[british]["near"]] == [hits[0]["fingerprint"]]
        assert 0.8 <= contents[british]["near"][0]["similarity"] <= 1.0
        doc = client.get("/documents", params={"url": b + "/colour.html"}).json()
        assert doc["cluster_size"] == 4 and not doc["indexed"]
        assert {(d["url"], d["exact"]) for d in doc["duplicates"]} == {
            (b + "/color.html", False), (b + "/copy-one.html", False), (b + "/copy-two.html", False)}
        assert len(client.get("/search", params={"q": "clockwise"}).json()["results"]) == 2
        with cluster.begin() as txn:
            top, _, _ = largest_clusters(txn, 2)
        assert top[0]["size"] == 4 and top[0]["exact"] == 2 and top[0]["canonical"] == b + "/color.html"
        if request.node.callspec.params["fresh_cluster"] == "hbase":  # the command reads HBase
            check_the_dups_command(cluster, b, british, hits[0]["fingerprint"])

        # The copy's text changes completely: it leaves the cluster, which splits in two; the
        # chain's middle page is gone (404): its ends are no near-duplicates of each other.
        site.version = 1
        asked = crawl_and_settle(cluster, site)
        got = incremental(cluster)
        want = reference(truth(site, asked))
        assert got["dups"] == want["dups"] and got["docs"] == want["docs"] and got["postings"] == want["postings"]
        canonical = {url: c for _, (c, members) in got["dups"].items() for url in members}
        assert canonical[b + "/article.html"] == b + "/article.html"
        assert canonical[b + "/article-copy.html"] == b + "/article-copy.html"
        assert {b + "/article.html", b + "/article-copy.html"} <= indexed(cluster)
        assert canonical[b + "/chain-a.html"] == b + "/chain-a.html" and canonical[b + "/chain-c.html"] == b + "/chain-c.html"
        assert b + "/chain-b.html" not in canonical
        assert len(client.get("/search", params={"q": "articleword"}).json()["results"]) == 2

    report = verify(cluster.settings, spark=spark_session, partitions=2, timeout_s=300)
    assert report.clean, report.format()
