"""The crawler cannot be turned against its own network: non-global addresses are refused where
the connection is made, and redirects and sitemaps obey the crawl's scope.

Every site here is served on 127.0.0.1. The addresses a page, a redirect or a sitemap points
the crawler at (169.254.169.254, 10.0.0.5, ...) are never reached: the crawler's connection
hooks are the recording stubs of ``network_stub`` (a name resolves only as the test maps it;
a connection to anything but loopback is recorded and fails), and the socket layer is guarded
besides, so what a test asserts about ``attempts`` and ``escaped`` is the whole traffic story.
Crawls record into the in-memory store and real HBase (the ``cluster`` fixture).
"""

from __future__ import annotations

import io
import ipaddress
import json
import uuid

import pytest
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from caffeine.index import normalize_url
from crawler.addresses import ADDRESS_KINDS, AddressPolicy, address_kind
from crawler.crawl import crawl
from crawler.fetch import Fetcher
from support.network_stub import NOT_FOUND, html, network, redirect, serve  # noqa: F401 (network: a fixture)

FAST = dict(delay=0, timeout=3.0, workers=4)


@pytest.fixture
def tables():
    suffix = uuid.uuid4().hex[:8]
    return dict(repository=f"repo_{suffix}", frontier=f"front_{suffix}")


def recorded(cluster, table) -> dict[str, dict]:
    """URL -> its latest outcome (page:error when the last one was a failure kept there)."""
    with cluster.begin() as txn:
        return {key.decode(): json.loads(cols.get("page:error") or cols["page:meta"])
                for key, cols in txn.scan(table, columns=["page:meta", "page:error"])}


def routes(table: dict):
    return lambda site, path: table.get(path, NOT_FOUND)


# URL on a non-global address (or a name the stub resolves to one) -> the kind named in its refusal
REFUSED = {
    "http://169.254.169.254/latest/meta-data/": "metadata",
    "http://10.0.0.5/admin": "private",
    "http://192.168.1.1/": "private",
    "http://100.64.0.1/": "shared",
    "http://[fe80::1]/": "link-local",
    "http://[fd00::5]/": "private",
    "http://[::ffff:10.0.0.5]/": "private",
    "http://224.0.0.1/": "multicast",
    "http://192.0.2.7/": "documentation",
    "http://0.0.0.0/": "unspecified",
    "http://metadata.test/latest/meta-data/": "metadata",
    "http://intranet.test/admin": "private",
}


def map_names(network) -> None:
    network.names["metadata.test"] = ["169.254.169.254"]
    network.names["intranet.test"] = ["10.0.0.5"]


# -- classification and the seeds' policy (pure) ---------------------------------------------


@pytest.mark.parametrize("address, kind", [
    ("127.0.0.1", "loopback"), ("127.8.9.10", "loopback"), ("::1", "loopback"),
    ("10.0.0.5", "private"), ("172.16.3.4", "private"), ("192.168.1.1", "private"), ("fd00::5", "private"),
    ("169.254.169.254", "link-local"), ("fe80::1", "link-local"), ("fe80::1%eth0", "link-local"),
    ("100.64.0.1", "shared"), ("224.0.0.1", "multicast"), ("ff02::1", "multicast"),
    ("0.0.0.0", "unspecified"), ("::", "unspecified"), ("192.0.2.7", "documentation"),
    ("2001:db8::1", "documentation"), ("198.18.0.1", "reserved"), ("255.255.255.255", "reserved"),
    ("::ffff:10.0.0.5", "private"), ("::ffff:127.0.0.1", "loopback"), ("2002:a00:5::", "private"),
    ("64:ff9b::a9fe:a9fe", "link-local"), ("not an address", "reserved"),
    ("93.184.216.34", None), ("2606:4700::1", None), ("::ffff:93.184.216.34", None),
])
def test_address_kinds(address, kind):
    assert address_kind(address) == kind


# The IANA special-purpose registries, whatever Python's ipaddress believes (3.11.7 calls
# several of these global: its tables predate the CVE-2024-4032 fix and later registrations).
IANA_CASES = [
    # IPv4-compatible ::/96 and IPv4-translated ::ffff:0:0:0/96: judged by the IPv4 they carry
    ("::7f00:1", "loopback"), ("::a00:5", "private"), ("::a9fe:a9fe", "link-local"),
    ("::ffff:0:7f00:1", "loopback"), ("::ffff:0:a00:5", "private"), ("::5db8:d822", None),
    ("::2", "reserved"),
    # IPv6 registry entries that are not globally reachable
    ("64:ff9b:1::1", "reserved"), ("100::1", "reserved"), ("2001::1", "reserved"), ("2001:2::1", "reserved"),
    ("2001:10::1", "reserved"), ("3fff::1", "documentation"), ("3fff:fff:ffff::1", "documentation"),
    ("5f00::1", "reserved"), ("fec0::1", "reserved"), ("4000::1", "reserved"), ("e000::1", "reserved"),
    # ... and those that are (more specific entries inside a non-global block)
    ("2001:1::1", None), ("2001:1::2", None), ("2001:3::1", None), ("2001:4:112::1", None), ("2001:20::1", None),
    ("2001:30::1", None), ("2620:4f:8000::1", None), ("2001:4860::8888", None), ("2a00:1450::1", None),
    # IPv4
    ("192.0.0.1", "reserved"), ("192.0.0.8", "reserved"), ("192.0.0.170", "reserved"), ("192.0.0.9", None),
    ("192.0.0.10", None), ("192.31.196.1", None), ("192.52.193.1", None), ("192.175.48.1", None),
    ("192.88.99.1", "reserved"), ("0.1.2.3", "reserved"), ("198.19.255.255", "reserved"), ("240.0.0.1", "reserved"),
    ("203.0.113.9", "documentation"), ("198.51.100.1", "documentation"), ("100.127.255.255", "shared"),
    ("100.128.0.1", None), ("172.32.0.1", None), ("8.8.8.8", None),
]


@pytest.mark.parametrize("address, kind", IANA_CASES)
def test_address_kinds_follow_the_iana_registries_not_the_python_release(address, kind, monkeypatch):
    for cls in (ipaddress.IPv4Address, ipaddress.IPv6Address):
        for prop in ("is_global", "is_private", "is_reserved", "is_site_local"):
            if hasattr(cls, prop):
                monkeypatch.setattr(cls, prop, property(lambda self: pytest.fail("classified by ipaddress's tables")))
    assert address_kind(address) == kind


def test_the_seeds_own_addresses_are_allowed_not_their_kinds():
    """Without --allow-private-addresses a crawl may connect to global addresses and to the
    seeds' own IP addresses (IP literal seeds; ``localhost``: its loopback addresses), on any
    port: never to another address of the same kind, never because of what DNS answered, and
    never to a cloud metadata endpoint."""
    def allowed(policy, address):
        return policy.refusal(address) is None

    loop = AddressPolicy.for_seeds(["127.0.0.1"])
    assert allowed(loop, "127.0.0.1") and allowed(loop, "93.184.216.34")
    assert not allowed(loop, "127.0.0.2") and not allowed(loop, "::1") and not allowed(loop, "10.0.0.5")
    intranet = AddressPolicy.for_seeds(["10.0.0.5"])
    assert allowed(intranet, "10.0.0.5") and allowed(intranet, "::ffff:10.0.0.5")
    for other in ("10.0.0.6", "172.16.0.1", "fd00::5", "fd00:ec2::254", "127.0.0.1"):
        assert not allowed(intranet, other), other
    assert not allowed(AddressPolicy.for_seeds(["100.64.0.1"]), "100.100.100.200")
    local = AddressPolicy.for_seeds(["localhost"])
    assert allowed(local, "127.0.0.1") and allowed(local, "::1") and not allowed(local, "127.0.0.2")
    # A host name is not an address: whatever it resolves to, it unlocks nothing.
    assert AddressPolicy.for_seeds(["intranet.test", "public.test"]).describe() == "global addresses only"
    # Cloud metadata endpoints: refused even when seeded, and even when global (Azure's 168.63.129.16).
    for metadata in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200", "169.254.170.2", "168.63.129.16"):
        policy = AddressPolicy.for_seeds([metadata.join("[]") if ":" in metadata else metadata])
        assert policy.refusal(metadata) == "metadata", metadata
        assert allowed(AddressPolicy.for_seeds([], allow_private=True), metadata)
    for carried in ("::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe", "::ffff:168.63.129.16"):
        assert AddressPolicy.for_seeds(["169.254.169.254"]).refusal(carried) == "metadata", carried
    everything = AddressPolicy.for_seeds(["public.test"], allow_private=True)
    assert all(allowed(everything, a) for a in ("127.0.0.2", "10.0.0.6", "fd00::5", "100.64.0.1"))


def test_a_host_name_seed_on_a_non_global_address_is_refused(cluster, tables, network):
    """A seed's name that resolves to loopback (or any non-global address) unlocks nothing:
    its pages are recorded as refused, with the flag that would allow them."""
    with serve(routes({"/": html()})) as site:
        port = site.base.rsplit(":", 1)[1]
        network.names["loop.test"] = ["127.0.0.1"]
        report = crawl(cluster, [f"http://loop.test:{port}/"], **FAST, **tables, **network.hooks())
    outcome = report.outcomes[f"http://loop.test:{port}/"]
    assert outcome.label == "address refused" and "loop.test (127.0.0.1) is a loopback address" in outcome.error
    assert "--allow-private-addresses" in outcome.error
    assert site.requests == [] and network.attempts == [] and network.escaped == []


def test_a_loopback_seed_unlocks_its_own_address_only(cluster, tables, network):
    """Seeded on 127.0.0.1, a crawl following every site reaches other ports of 127.0.0.1
    (another local test site) but not 127.0.0.2, nor a metadata endpoint it is seeded on."""
    with serve(routes({"/there.html": html()})) as other:
        port = other.base.rsplit(":", 1)[1]
        links = [other.base + "/there.html", f"http://127.0.0.2:{port}/there.html"]
        with serve(routes({"/": html(*links)})) as site:
            report = crawl(cluster, [site.base + "/", "http://169.254.169.254/latest/meta-data/"], depth=1,
                           any_host=True, **FAST, **tables, **network.hooks())
    assert report.outcomes[other.base + "/there.html"].status == 200
    refused = report.outcomes[f"http://127.0.0.2:{port}/there.html"]
    assert refused.label == "address refused" and "127.0.0.2 is a loopback address" in refused.error
    metadata = report.outcomes["http://169.254.169.254/latest/meta-data/"]
    assert metadata.label == "address refused" and "cloud metadata endpoint" in metadata.error
    assert other.requests == ["/robots.txt", "/there.html"]
    assert network.attempts == [] and network.escaped == []


# -- links -------------------------------------------------------------------------------------


def test_links_to_non_global_addresses_are_recorded_as_refused_and_never_connected_to(cluster, tables, network):
    map_names(network)
    with serve(routes({"/other.html": html()})) as other, \
            serve(routes({"/": html(*REFUSED, other.base + "/other.html")})) as site:
        report = crawl(cluster, [site.base + "/"], depth=1, any_host=True, **FAST, **tables, **network.hooks())
    rows = recorded(cluster, tables["repository"])
    for url, kind in REFUSED.items():
        url = normalize_url(url)
        meta = rows[url]
        assert meta["status"] == 0 and meta["error"].startswith("address refused: "), (url, meta)
        what = "a cloud metadata endpoint" if kind == "metadata" else f"a {kind} address"
        assert f"is {what}" in meta["error"] and "--allow-private-addresses" in meta["error"]
        assert report.outcomes[url].label == "address refused"
    assert report.counts()["address refused"] == len(REFUSED)
    assert "(169.254.169.254) is a cloud metadata endpoint" in rows["http://metadata.test/latest/meta-data/"]["error"]
    # The names were resolved (once each: robots.txt is never asked of a refused origin) ...
    assert {"metadata.test", "intranet.test"} <= set(network.resolved)
    # ... and nothing connected anywhere but loopback; the other loopback site was crawled.
    assert network.attempts == [] and network.escaped == []
    assert other.requests == ["/robots.txt", "/other.html"]
    assert "connections allowed to global addresses and the seeds' own 127.0.0.1" in report.summary()


def test_the_crawlers_default_connection_path_refuses_before_it_connects(cluster, tables, network):
    """No hooks given: the system resolver (IP literals only here) and the real connector.
    The socket guard would record any connection past the policy."""
    with serve(routes({"/": html("http://10.0.0.5/admin", "http://169.254.169.254/latest/meta-data/")})) as site:
        report = crawl(cluster, [site.base + "/"], depth=1, any_host=True, **FAST, **tables)
    assert report.counts()["address refused"] == 2
    assert network.escaped == []
    fetcher = Fetcher(timeout=2, address_policy=AddressPolicy())
    result = fetcher.fetch("http://127.0.0.1:9/")  # loopback is not global: refused by the strict policy
    fetcher.close()
    assert result.status == 0 and result.error.startswith("address refused: 127.0.0.1 is a loopback address")


def test_allow_private_addresses_lets_the_crawl_ask_the_connection_layer(cluster, tables, network):
    with serve(routes({"/": html("http://10.0.0.5/admin")})) as site:
        report = crawl(cluster, [site.base + "/"], depth=1, any_host=True, allow_private_addresses=True,
                       **FAST, **tables, **network.hooks())
    # The stub was asked (robots.txt first), recorded the address and failed: no traffic.
    assert network.attempts == [("10.0.0.5", 80)]
    meta = recorded(cluster, tables["repository"])["http://10.0.0.5/admin"]
    assert meta["status"] == 0 and meta["error"].startswith("robots.txt unreachable (connection failed")
    assert report.counts().get("address refused", 0) == 0


def test_dns_rebinding_is_checked_on_the_address_connected_to(network):
    """A name that resolves to loopback once and to a private address next: each new
    connection resolves once and connects to the address it checked. The request carries the
    URL's host name (Host header) while the socket goes to the checked IP."""
    answers = iter([["127.0.0.1"], ["10.0.0.5"]])
    network.names["rebind.test"] = lambda: next(answers)
    with serve(routes({"/a": html(), "/b": html()}), keep_alive=False) as site:
        port = site.base.rsplit(":", 1)[1]
        fetcher = Fetcher(timeout=3, address_policy=AddressPolicy(["loopback"]), **network.hooks())
        first = fetcher.fetch(f"http://rebind.test:{port}/a")
        second = fetcher.fetch(f"http://rebind.test:{port}/b")
        fetcher.close()
    assert first.status == 200 and first.error is None
    assert second.status == 0 and second.error.startswith("address refused: rebind.test (10.0.0.5) is a private")
    assert site.requests == ["/a"] and site.hosts == [f"rebind.test:{port}"]
    assert network.resolved == ["rebind.test", "rebind.test"] and network.attempts == []


# -- redirects -----------------------------------------------------------------------------------


@pytest.mark.parametrize("any_host", [False, True])
def test_a_redirect_to_a_refused_address_or_another_site_obeys_scope_and_policy(cluster, tables, network, any_host):
    map_names(network)
    with serve(routes({"/robots.txt": NOT_FOUND, "/there.html": html()})) as other:
        table = {
            "/": html("/to-metadata", "/to-name", "/to-other", "/to-here"),
            "/to-metadata": redirect("http://169.254.169.254/latest/meta-data/"),
            "/to-name": redirect("http://intranet.test/admin"),
            "/to-other": redirect(other.base + "/there.html"),
            "/to-here": redirect("/here.html"),
            "/here.html": html(),
        }
        with serve(routes(table)) as site:
            report = crawl(cluster, [site.base + "/"], depth=1, any_host=any_host, **FAST, **tables, **network.hooks())
    rows = recorded(cluster, tables["repository"])
    to = {name: rows[site.base + "/to-" + name] for name in ("metadata", "name", "other", "here")}
    assert to["here"]["status"] == 200 and to["here"]["final_url"] == site.base + "/here.html"
    if not any_host:  # one scope rule: the hop is not followed, nothing is asked of the other site
        for name, target in [("metadata", "http://169.254.169.254/latest/meta-data/"),
                             ("name", "http://intranet.test/admin"), ("other", other.base + "/there.html")]:
            meta = to[name]
            assert meta["status"] == 302 and meta["final_url"] == site.base + "/to-" + name
            assert meta["error"].startswith(f"redirect to {target} not followed: outside the crawl's scope")
        assert other.requests == [] and "intranet.test" not in network.resolved
    else:  # followed where allowed; refused where the address is not, before any connection
        assert to["other"]["status"] == 200 and to["other"]["final_url"] == other.base + "/there.html"
        assert to["metadata"]["status"] == 302 and "not followed: address refused: 169.254.169.254 is a cloud metadata" \
            in to["metadata"]["error"]
        assert "not followed: address refused: intranet.test (10.0.0.5) is a private" in to["name"]["error"]
        assert report.outcomes[site.base + "/to-name"].label == "address refused"
        assert other.requests == ["/robots.txt", "/there.html"]
    assert site.requests.count("/robots.txt") == 1
    assert network.attempts == [] and network.escaped == []


@pytest.mark.parametrize("any_host", [False, True])
def test_a_robots_txt_redirect_obeys_the_crawls_scope(cluster, tables, network, any_host):
    """robots.txt is fetched by the crawl too: a redirect of it to another site (here another
    loopback port, a service the crawl's address policy cannot tell from a site) is a hop like
    any other, asked of the scope before it is requested."""
    deny_all = (200, {"Content-Type": "text/plain"}, b"User-agent: *\nDisallow: /\n")
    with serve(routes({"/robots.txt": deny_all})) as other:
        with serve(routes({"/robots.txt": redirect(other.base + "/robots.txt"), "/": html()})) as site:
            report = crawl(cluster, [site.base + "/"], any_host=any_host, **FAST, **tables, **network.hooks())
    outcome = report.outcomes[site.base + "/"]
    if any_host:  # followed: the other site's rules apply
        assert other.requests == ["/robots.txt"] and outcome.error == "disallowed by robots.txt"
    else:  # not followed: a robots.txt that cannot be had means no rules (RFC 9309, as a 4xx)
        assert other.requests == [] and outcome.status == 200 and outcome.error is None
    assert site.requests.count("/robots.txt") == 1
    assert network.attempts == [] and network.escaped == []


# -- sitemaps --------------------------------------------------------------------------------------


@pytest.mark.parametrize("any_host", [False, True])
def test_sitemaps_listed_by_robots_txt_obey_scope_and_policy(cluster, tables, network, any_host):
    def sitemap(*locs):
        body = "".join(f"<url><loc>{loc}</loc></url>" for loc in locs)
        return 200, {"Content-Type": "application/xml"}, (
            f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{body}</urlset>').encode()

    with serve(lambda s, p: sitemap(s.base + "/away.html") if p == "/sitemap.xml" else html()) as other:
        def respond(site, path):
            if path == "/robots.txt":
                return 200, {"Content-Type": "text/plain"}, (
                    f"User-agent: *\nAllow: /\nSitemap: http://10.0.0.5/sitemap.xml\n"
                    f"Sitemap: {other.base}/sitemap.xml\nSitemap: {site.base}/sitemap.xml\n").encode()
            if path == "/sitemap.xml":
                return sitemap(site.base + "/listed.html", "http://169.254.169.254/latest/meta-data/")
            return html()

        with serve(respond) as site:
            report = crawl(cluster, [site.base + "/"], depth=0, sitemaps=True, any_host=any_host,
                           **FAST, **tables, **network.hooks())
    assert site.base + "/listed.html" in report.outcomes
    assert "http://169.254.169.254/latest/meta-data/" not in report.outcomes  # not the sitemap's own site
    if any_host:
        assert sorted(other.requests) == ["/away.html", "/robots.txt", "/sitemap.xml"]
    else:
        assert other.requests == []
    assert network.attempts == [] and network.escaped == []


# -- ingest ------------------------------------------------------------------------------------------


def test_ingest_follows_redirects_within_its_archives_and_never_connects(cluster, tables, tmp_path, network):
    from crawler.ingest import ingest

    out = io.BytesIO()
    writer = WARCWriter(out, gzip=True)

    def response(url, status, body=b"", headers=()):
        http = StatusAndHeaders(f"{status} X", [("Content-Type", "text/html")] + list(headers), protocol="HTTP/1.1")
        writer.write_record(writer.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=http))

    response("http://archived.test/to-metadata", 302, headers=[("Location", "http://169.254.169.254/latest/meta-data/")])
    response("http://archived.test/to-intranet", 302, headers=[("Location", "http://10.0.0.5/admin")])
    response("http://10.0.0.5/admin", 200, b"<p>archived admin page</p>")
    path = tmp_path / "archive.warc.gz"
    path.write_bytes(out.getvalue())
    ingest(cluster, [str(path)], repository=tables["repository"], state_table="ingest_" + uuid.uuid4().hex[:8])
    rows = recorded(cluster, tables["repository"])
    assert rows["http://archived.test/to-metadata"]["error"].endswith("not followed: not in the archive")
    assert rows["http://archived.test/to-intranet"]["final_url"] == "http://10.0.0.5/admin"
    assert network.escaped == [] and network.resolved == [] and network.attempts == []


# -- the command ----------------------------------------------------------------------------------------


def test_crawl_help_documents_the_address_and_trap_flags_with_defaults():
    from caffeine.commands.cli import build_parser, subcommands

    parser = dict(subcommands(build_parser()))[("crawl",)]
    helps = {o: " ".join((a.help or "").split()) for a in parser._actions for o in a.option_strings}
    assert "non-global addresses (default: refused" in helps["--allow-private-addresses"]
    for flag, default in [("--max-url-length", 2048), ("--max-path-depth", 20), ("--max-path-repeats", 2),
                          ("--max-query-params", 16), ("--max-links-per-page", 5000), ("--max-host-pages", 100000)]:
        assert f"(default {default})" in helps[flag], flag
        # Not given: None, so --resume keeps the run's own limits (a new run gets the default).
        assert getattr(parser.parse_args([]), flag[2:].replace("-", "_")) is None, flag


def test_a_fetcher_built_without_a_policy_connects_to_global_addresses_only(network):
    """The safe default: a tool that builds a Fetcher and forgets the policy cannot be sent
    to loopback or an intranet; whoever needs them says so."""
    with serve(routes({"/": html()})) as site:
        fetcher = Fetcher(timeout=2, **network.hooks())
        refused = fetcher.fetch(site.base + "/")
        fetcher.close()
        fetcher = Fetcher(timeout=2, address_policy=AddressPolicy.for_seeds(["127.0.0.1"]), **network.hooks())
        allowed = fetcher.fetch(site.base + "/")
        fetcher.close()
    assert refused.status == 0 and refused.error.startswith("address refused: 127.0.0.1 is a loopback address")
    assert allowed.status == 200 and site.requests == ["/"]
    assert network.attempts == []
