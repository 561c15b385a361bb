"""The crawler: fetches pages into the ``repository`` table, one transaction per URL.

Layer: crawler. Imports the public ``caffeine.percolator`` API, the pure
``caffeine.index`` core with its ``caffeine.index.schema`` names and codecs; never percolator
internals.

    fetch.py      one URL: redirects (limit, loops), timeouts, size cap, content type
    addresses.py  which IP addresses a crawl may connect to, checked where it connects
    scope.py      which URLs a crawl follows: links, redirect hops, sitemaps (one rule)
    traps.py      crawler-trap limits (URL shape, links per page, URLs per site) and counts
    robots.py     robots.txt per origin (RFC 9309, with protego), Crawl-delay, Sitemap lines
    sitemaps.py   sitemap files -> page URLs (``crawl --sitemaps``)
    schedule.py   in-memory per-origin queues and politeness
    frontier.py   the durable frontier (Percolator table ``frontier``): resumable runs
    crawl.py      ``Crawler``/``crawl()``: workers, the per-URL transaction
    report.py     a crawl's outcomes and summary
    record.py     the repository write a crawl's fetch and an ingested record share
    archive.py    ``crawl --warc``: every exchange as WARC request/response records
    warcframe.py  finding records in (possibly damaged) WARC files
    ingest.py     ``caffeine ingest``: WARC records into ``repository``, resumable
    migrate.py    ``caffeine migrate-urls``: rows keyed under earlier URL rules re-keyed
    commands.py   ``caffeine crawl``, ``ingest``, ``migrate-urls``, ``testweb`` (the last
                  serves the top-level ``testweb`` package: the local web tests crawl)
"""
