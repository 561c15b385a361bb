"""The indexing application: every observer of the chain, wired in one place.

Layer: observers. ``caffeine worker`` runs ``application`` by default and installs it on
start, which records its observed columns in the deployment: every client that writes them
(the crawler, tests, tools) then sets their notifications without importing this module
(``caffeine.percolator.registry``).

Each observer says what it writes (``writes``): ``caffeine engine --map`` prints the chain from
them (``Application.chain_map``), and docs/INDEXING.md's "The chain" is checked against it.
"""

from caffeine.observers import document, dup_clusters, export
from caffeine.index.schema import (
    CLUSTER_STATE,
    DOC_ANCHORS,
    DOC_DIRECTIVES,
    DOC_FINGERPRINT,
    DOC_OUTLINKS,
    DOC_PARSED,
    DOC_SKETCH,
    DOCSTATS,
    DUPS,
    EXPORT_STATE,
    IMPACTS,
    INLINKS,
    INLINKS_NOTIFY,
    PAGE_META,
    PERCOLATOR_TABLES,
    POSTINGS,
    REPOSITORY,
    split_points,
)
from caffeine.percolator import Application, Observer

# Every page that links to a page notifies its inlinks: under a steady crawl a popular page is
# notified several times a second, and each run recounts its links, re-elects its cluster and,
# when its anchor text changed, has the export observer write the whole document again. The
# settle time makes each such burst one run. A new page's first export does not wait for it
# (its anchor text so far is written with its cluster state); link counts, canonical
# elections and anchor text from pages crawled later lag by up to this much.
INLINKS_SETTLE_S = 5.0

# The cluster and export observers could run inline (``Observer.inline``), a new page's
# chain then committing as one transaction. Measured against one transaction per observer
# (bench/README.md, "Inline observers"), it bought no throughput or CPU (the lockstep waves
# already combine each round's calls of many runs into one, and the longer, diverging inline
# runs combine worse), and the duplicates elected canonical later became searchable later, so
# the chain runs one transaction per observer. (``export.planned_here`` keeps the export
# correct when both export observers run inline in one transaction.)

application = Application(
    "indexing",
    [
        Observer("document", REPOSITORY, PAGE_META, document.observe, reads=document.READS,
                 writes=(f"{REPOSITORY}/{DOC_FINGERPRINT}", f"{REPOSITORY}/{DOC_DIRECTIVES}",
                         f"{REPOSITORY}/{DOC_PARSED}", f"{REPOSITORY}/{DOC_OUTLINKS}",
                         f"{REPOSITORY}/{DOC_SKETCH}", f"{INLINKS}/{INLINKS_NOTIFY} (weak)")),
        Observer("cluster", REPOSITORY, DOC_FINGERPRINT, dup_clusters.on_fingerprint, reads=dup_clusters.FINGERPRINT_READS,
                 writes=(f"{REPOSITORY}/{CLUSTER_STATE}", f"{REPOSITORY}/{DOC_ANCHORS}", f"{DUPS} (members, bands)")),
        Observer("cluster-declared", REPOSITORY, DOC_DIRECTIVES, dup_clusters.on_directives, reads=dup_clusters.DIRECTIVES_READS,
                 writes=(f"{REPOSITORY}/{CLUSTER_STATE}", f"{DUPS} (declares:<url>, re-election)")),
        Observer("inlinks", INLINKS, INLINKS_NOTIFY, dup_clusters.on_inlinks, notification="weak",
                 settle_s=INLINKS_SETTLE_S,
                 writes=(f"{REPOSITORY}/{DOC_ANCHORS}", f"{REPOSITORY}/{CLUSTER_STATE}", f"{DUPS} (member counts)",
                         f"{DOCSTATS} (s:inlinks)")),
        Observer("export", REPOSITORY, CLUSTER_STATE, export.observe, redo=export.redo, reads=export.READS,
                 writes=(f"{REPOSITORY}/{EXPORT_STATE}", POSTINGS, IMPACTS, f"{DOCSTATS} (serving tables)")),
        Observer("export-anchors", REPOSITORY, DOC_ANCHORS, export.observe, redo=export.redo, reads=export.READS,
                 writes=(f"{REPOSITORY}/{EXPORT_STATE}", POSTINGS, IMPACTS, f"{DOCSTATS} (serving tables)")),
    ],
    tables=PERCOLATOR_TABLES,
    # In the cluster mode the tables start split over the region servers (schema.SPLIT_POLICIES).
    split_policy=split_points,
)
