"""The indexing application: every observer of the chain, wired in one place.

Layer: observers. ``caffeine worker`` runs ``application`` by default and installs it on
start, which records its observed columns in the deployment: every client that writes them
(the crawler, tests, tools) then sets their notifications without importing this module
(``caffeine.percolator.registry``).

    repository/page:meta       --document-->  repository/doc:fingerprint, inlinks/in (weak)
    repository/doc:fingerprint --cluster--->  dups, repository/cluster:state
    repository/doc:directives  --cluster-declared-->  dups declares:<url> (rel=canonical), re-election
    inlinks/in (weak)          --inlinks--->  dups member counts, docstats s:inlinks
    inlinks/in (weak)          --inlinks--->  repository/doc:anchors (incoming anchor text)
    repository/cluster:state   --export---->  postings, docstats (serving tables)
    repository/doc:anchors     --export---->  the same (anchor text is an indexed field)
"""

from caffeine.observers import document, dup_clusters, export
from caffeine.index.schema import (
    CLUSTER_STATE,
    DOC_ANCHORS,
    DOC_DIRECTIVES,
    DOC_FINGERPRINT,
    INLINKS,
    INLINKS_NOTIFY,
    PAGE_META,
    PERCOLATOR_TABLES,
    REPOSITORY,
)
from caffeine.percolator import Application, Observer

# Every page that links to a page notifies its inlinks: under a steady crawl a popular page is
# notified several times a second, and each run recounts its links, re-elects its cluster and,
# when its anchor text changed, has the export observer write the whole document again. The
# settle time makes each such burst one run. A new page's first export does not wait for it
# (its anchor text so far is written with its cluster state); link counts, canonical
# elections and anchor text from pages crawled later lag by up to this much.
INLINKS_SETTLE_S = 5.0

application = Application(
    "indexing",
    [
        Observer("document", REPOSITORY, PAGE_META, document.observe, reads=document.READS),
        Observer("cluster", REPOSITORY, DOC_FINGERPRINT, dup_clusters.on_fingerprint, reads=dup_clusters.FINGERPRINT_READS),
        Observer("cluster-declared", REPOSITORY, DOC_DIRECTIVES, dup_clusters.on_directives, reads=dup_clusters.DIRECTIVES_READS),
        Observer("inlinks", INLINKS, INLINKS_NOTIFY, dup_clusters.on_inlinks, notification="weak",
                 settle_s=INLINKS_SETTLE_S),
        Observer("export", REPOSITORY, CLUSTER_STATE, export.observe, redo=export.redo, reads=export.READS),
        Observer("export-anchors", REPOSITORY, DOC_ANCHORS, export.observe, redo=export.redo, reads=export.READS),
    ],
    tables=PERCOLATOR_TABLES,
)
