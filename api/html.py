"""Server-rendered HTML of the search page and its detail pages (no templates, no build step).

Layer: api. Pure (standard library only): functions from the dicts ``caffeine.search.reader`` returns to
HTML strings. Every value from the index passes through ``html.escape`` (``esc``) or
``urllib.parse.quote`` before it reaches the page; the one exception is a snippet, which
``caffeine.search.snippets`` already escaped and marked up with ``<mark>`` only. The pages work without
JavaScript: the search box is a plain GET form, so results have shareable URLs.
"""

from __future__ import annotations

import html
from urllib.parse import quote, urlencode

__all__ = ["search_page", "document_page", "cluster_page", "error_page"]

STYLE = """
:root { --fg:#1f2328; --muted:#59636e; --link:#0b57d0; --visited:#6a3ab2; --line:#d8dee4;
        --bg:#fff; --soft:#f6f8fa; --mark:#fff1a8; --accent:#6b4f2a; }
* { box-sizing: border-box; }
body { margin:0; font:16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", sans-serif;
       color:var(--fg); background:var(--bg); }
a { color:var(--link); } a:visited { color:var(--visited); }
a:focus-visible, button:focus-visible { outline:3px solid #f0a500; outline-offset:2px; }
form.search input:focus { outline:none; border-color:var(--accent); box-shadow:0 0 0 3px rgba(240,165,0,.55); }
.skip { position:absolute; left:-999px; } .skip:focus { left:8px; top:8px; background:#fff; padding:4px 8px; }
.visually-hidden { position:absolute; width:1px; height:1px; overflow:hidden; clip:rect(0 0 0 0); white-space:nowrap; }
header.top { border-bottom:1px solid var(--line); background:var(--soft); }
.bar { max-width:980px; margin:0 auto; padding:14px 20px; display:flex; gap:20px; align-items:center; flex-wrap:wrap; }
.brand { font-weight:700; font-size:1.35rem; color:var(--accent); text-decoration:none; letter-spacing:.01em; }
.brand:visited { color:var(--accent); }
.brand span { font-weight:400; color:var(--muted); font-size:1rem; margin-left:.35em; }
form.search { display:flex; flex:1; min-width:260px; max-width:640px; }
form.search input { flex:1; font:inherit; padding:9px 14px; border:1px solid #8c959f; border-right:0;
       border-radius:22px 0 0 22px; background:#fff; }
form.search button { font:inherit; padding:9px 18px; border:1px solid var(--accent); background:var(--accent);
       color:#fff; border-radius:0 22px 22px 0; cursor:pointer; }
main { max-width:980px; margin:0 auto; padding:8px 20px 40px; }
.summary { color:var(--muted); font-size:.9rem; margin:14px 0 6px; }
.error { border:1px solid #cf222e; background:#ffebe9; padding:10px 14px; border-radius:6px; }
ol.results { list-style:none; padding:0; margin:0; max-width:720px; }
.result { padding:14px 0; border-bottom:1px solid var(--line); }
.result h2 { font-size:1.12rem; font-weight:600; margin:0; line-height:1.35; }
.result h2 a { text-decoration:none; } .result h2 a:hover { text-decoration:underline; }
.result .url { color:#116329; font-size:.88rem; overflow-wrap:anywhere; }
.result .snippet { margin:4px 0 6px; overflow-wrap:anywhere; }
mark { background:var(--mark); color:inherit; padding:0 1px; border-radius:2px; font-weight:600; }
.meta { font-size:.84rem; color:var(--muted); display:flex; flex-wrap:wrap; gap:4px 14px; }
.meta a { color:var(--muted); } .partial { font-style:italic; } .badge { background:var(--soft); border:1px solid var(--line);
       border-radius:10px; padding:0 8px; }
nav.pager { display:flex; gap:12px; margin:22px 0; align-items:center; }
nav.pager a, nav.pager span { padding:6px 12px; border:1px solid var(--line); border-radius:6px; text-decoration:none; }
nav.pager span[aria-current] { background:var(--accent); color:#fff; border-color:var(--accent); }
.intro { max-width:720px; color:var(--muted); }
.intro code, td code { background:var(--soft); padding:1px 4px; border-radius:4px; font-size:.9em; }
h1 { font-size:1.4rem; margin:18px 0 6px; overflow-wrap:anywhere; }
h2.section { font-size:1.05rem; margin:26px 0 8px; }
table { border-collapse:collapse; width:100%; max-width:900px; font-size:.92rem; }
th, td { text-align:left; padding:6px 10px; border-bottom:1px solid var(--line); vertical-align:top; overflow-wrap:anywhere; }
th { background:var(--soft); font-weight:600; }
table.facts th { width:190px; }
ul.plain { padding-left:18px; }
footer { max-width:980px; margin:0 auto; padding:16px 20px 30px; color:var(--muted); font-size:.85rem;
         border-top:1px solid var(--line); }
footer a { color:var(--muted); }
"""


def esc(value) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def page_url(**params) -> str:
    return "/?" + urlencode({k: v for k, v in params.items() if v is not None})


def doc_page_url(url: str) -> str:
    return "/page/document?url=" + quote(url, safe="")


def cluster_page_url(fingerprint: str) -> str:
    return "/page/dups/" + quote(fingerprint, safe="")


def layout(title: str, body: str, query: str = "", footer: str = "", autofocus: bool = False) -> str:
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(title)}</title>
<style>{STYLE}</style>
</head>
<body>
<a class="skip" href="#main">Skip to results</a>
<header class="top"><div class="bar">
<a class="brand" href="/">Caffeine<span>search</span></a>
<form class="search" role="search" action="/" method="get">
<label class="visually-hidden" for="q">Search the crawled pages</label>
<input id="q" name="q" type="search" value="{esc(query)}" maxlength="256" autocomplete="off"
 placeholder="Search the crawled pages"{" autofocus" if autofocus else ""}>
<button type="submit">Search</button>
</form>
</div></header>
<main id="main">
{body}
</main>
<footer>{footer}<a href="/docs">API documentation</a> · <a href="/stats">statistics (JSON)</a> · <a href="/healthz">health</a></footer>
</body>
</html>
"""


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def search_page(query: str, result: dict | None, error: str | None, documents: int) -> str:
    footer = f"{_count(documents, 'document')} indexed · "
    if error:
        body = f'<p class="error" role="alert">{esc(error)}</p>'
        return layout("Caffeine search", body, query, footer)
    if result is None:
        body = (
            '<div class="intro"><h1>Search the crawled web</h1>'
            "<p>Type words to find pages that contain all of them (pages with only some follow, "
            "marked). <code>\"two words\"</code> finds a phrase, <code>-word</code> leaves out pages "
            "with the word, <code>site:host</code> keeps one site; in <code>Type::member</code> or "
            "<code>Type.member</code> the type's words weigh more. Results are ranked with BM25F over "
            "title, text, the anchor text of links to the page and its URL, nearer query words first, "
            "and a small, capped boost for pages many sites link to; pages with identical content are "
            "shown once, as their canonical page.</p></div>"
        )
        return layout("Caffeine search", body, query, footer, autofocus=True)
    total, page, size = result["total"], result["page"], result["size"]
    pages = max(1, min(100, -(-total // size)))
    items = []
    for hit in result["results"]:
        dups = hit["cluster_size"]
        cluster = (
            f'<a href="{esc(cluster_page_url(hit["fingerprint"]))}">'
            + (f"{_count(dups - 1, 'similar page')}" if dups > 1 else "no similar pages") + "</a>"
            if hit["fingerprint"] else "no similar pages"
        )
        items.append(f"""<li class="result">
<h2><a href="{esc(hit['url'])}">{esc(hit['title'])}</a></h2>
<div class="url">{esc(hit['url'])}</div>
<p class="snippet">{hit['snippet']}</p>
<div class="meta"><span class="badge" title="BM25F x link prior + proximity">score {hit['score']:.3f}</span>
{"" if hit.get('all_terms', True) else '<span class="partial">some words only: ' + esc(" ".join(hit['matched_terms'])) + "</span>"}
<span>{_count(hit['inlinks'], 'inlink')}</span>
<a href="{esc(doc_page_url(hit['url']))}">details</a>
{cluster}</div>
</li>""")
    shown = (
        f"Results {(page - 1) * size + 1:,}–{(page - 1) * size + len(result['results']):,} of "
        f"{'' if result.get('total_exact', True) else 'about '}{total:,}"
        if result["results"] else ("No results" if total == 0 else f"No results on page {page} ({total:,} in all)")
    )
    summary = f'<p class="summary" role="status">{shown} for <strong>{esc(query)}</strong> ({result["took_ms"]:.0f} ms)</p>'
    pager = []
    if page > 1:
        pager.append(f'<a href="{esc(page_url(q=query, page=page - 1, size=size if size != 10 else None))}" rel="prev">← Previous</a>')
    if pages > 1:
        pager.append(f'<span aria-current="page">Page {page} of {pages}</span>')
    if page < pages:
        pager.append(f'<a href="{esc(page_url(q=query, page=page + 1, size=size if size != 10 else None))}" rel="next">Next →</a>')
    body = (
        summary
        + (f'<ol class="results" start="{(page - 1) * size + 1}">' + "\n".join(items) + "</ol>" if items else "")
        + (f'<nav class="pager" aria-label="Result pages">{"".join(pager)}</nav>' if pager else "")
    )
    return layout(f"{query} – Caffeine search", body, query, footer)


def _links_table(rows: list[tuple[str, str]], head: tuple[str, str], total: int) -> str:
    if not rows:
        return "<p>None.</p>"
    body = "".join(
        f'<tr><td><a href="{esc(doc_page_url(u))}">{esc(u)}</a></td><td>{esc(a) or "<em>(no text)</em>"}</td></tr>'
        for u, a in rows
    )
    more = f"<p>… and {total - len(rows):,} more.</p>" if total > len(rows) else ""
    return f"<table><thead><tr><th>{head[0]}</th><th>{head[1]}</th></tr></thead><tbody>{body}</tbody></table>{more}"


def document_page(doc: dict) -> str:
    facts = [
        ("URL", f'<a href="{esc(doc["url"])}">{esc(doc["url"])}</a>'),
        ("Fetched", esc(doc["fetched_at_iso"] or "—") + (f' (HTTP {esc(doc["status"])})' if doc["status"] else "")),
        ("Content type", esc(doc["content_type"] or "—")),
        ("Content hash", f'<code>{esc(doc["content_hash"])}</code>' if doc["content_hash"] else "— (not a document)"),
        ("In the index", "yes" if doc["indexed"] else "no"),
        ("Canonical URL", f'<a href="{esc(doc_page_url(doc["canonical_url"]))}">{esc(doc["canonical_url"])}</a>'
         if doc["canonical_url"] else "—"),
        ("Length", f'{_count(doc["length"], "token")}' if doc["length"] is not None else "—"),
    ]
    if doc["fetch_error"]:
        facts.append(("Fetch error", esc(doc["fetch_error"])))
    if doc.get("robots"):
        facts.append(("Robots directives", esc(", ".join(doc["robots"]))
                      + (" (not a document of the index)" if "noindex" in doc["robots"] else "")))
    if doc.get("refresh_to"):
        facts.append(("Meta refresh to", f'<a href="{esc(doc_page_url(doc["refresh_to"]))}">{esc(doc["refresh_to"])}</a>'
                      + (" (a redirect: not a document of its own)" if doc.get("redirect_stub") else "")))
    rows = "".join(f"<tr><th scope=\"row\">{k}</th><td>{v}</td></tr>" for k, v in facts)
    dups = doc["duplicates"]
    dup_html = (
        "<ul class=\"plain\">" + "".join(
            f'<li><a href="{esc(doc_page_url(m["url"]))}">{esc(m["url"])}</a> — {_count(m["inlinks"], "inlink")}'
            f'{"" if m.get("exact", True) else " (near-duplicate)"}</li>'
            for m in dups) + "</ul>"
        if dups else "<p>None: no other page has this content or nearly this content.</p>"
    )
    cluster_link = (f' (<a href="{esc(cluster_page_url(doc["content_hash"]))}">cluster</a>)'
                    if doc["content_hash"] else "")
    body = f"""<h1>{esc(doc['title'] or doc['url'])}</h1>
<table class="facts"><tbody>{rows}</tbody></table>
{f'<p class="intro">{doc["excerpt"]}</p>' if doc["excerpt"] else ''}
<h2 class="section">Duplicates{cluster_link}</h2>
{dup_html}
<h2 class="section">Inlinks ({doc['inlinks_total']:,})</h2>
{_links_table([(i['source'], i['anchor']) for i in doc['inlinks']], ('From', 'Anchor text'), doc['inlinks_total'])}
<h2 class="section">Outlinks ({doc['outlinks_total']:,})</h2>
{_links_table([(o['target'], o['anchor']) for o in doc['outlinks']], ('To', 'Anchor text'), doc['outlinks_total'])}
<p class="summary"><a href="/documents?url={esc(quote(doc['url'], safe=''))}">This document as JSON</a></p>"""
    return layout(f"{doc['title'] or doc['url']} – Caffeine", body)


def cluster_page(cluster: dict) -> str:
    contents = cluster.get("contents") or []
    rows = "".join(
        f'<tr><td><a href="{esc(doc_page_url(m["url"]))}">{esc(m["url"])}</a></td>'
        f'<td>{m["inlinks"]:,}</td><td>{"canonical" if m["canonical"] else ""}</td>'
        f'<td><code>{esc(m.get("fingerprint", "")[:12])}</code></td></tr>'
        for m in cluster["members"]
    )
    near = "".join(
        f'<li><code>{esc(c["fingerprint"][:12])}</code> ({_count(c["size"], "page")}): '
        + (", ".join(f'<code>{esc(n["fingerprint"][:12])}</code> {n["similarity"]:.0%} alike' for n in c["near"])
           or "exact duplicates only") + "</li>"
        for c in contents
    ) if len(contents) > 1 else ""
    body = f"""<h1>Duplicate cluster</h1>
<p class="summary">Fingerprint <code>{esc(cluster['fingerprint'])}</code> · {_count(cluster['size'], 'page')} with
this content{f" or nearly this content ({len(contents)} contents)" if len(contents) > 1 else ""} · canonical: {f'<a href="{esc(doc_page_url(cluster["canonical_url"]))}">{esc(cluster["canonical_url"])}</a>'
                            if cluster['canonical_url'] else '—'}</p>
<table><thead><tr><th>Page</th><th>Inlinks</th><th>Role</th><th>Content</th></tr></thead><tbody>{rows}</tbody></table>
{f'<h2 class="section">Near-duplicate contents</h2><ul class="plain">{near}</ul>' if near else ""}
<p class="summary">Pages are near-duplicates when they have the same title and at least 80% of the
word triples of their main text in common; the canonical is the member the members declare canonical (rel=canonical), else the one
with the most inlinks (then the shortest URL); only it is
searchable. <a href="/dups/{esc(cluster['fingerprint'])}">This cluster as JSON</a></p>"""
    return layout("Duplicate cluster – Caffeine", body)


def error_page(status: int, message: str) -> str:
    return layout(f"{status} – Caffeine", f'<h1>{status}</h1><p class="error" role="alert">{esc(message)}</p>')
