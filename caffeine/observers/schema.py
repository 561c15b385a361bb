"""Names of the indexing application's tables and columns (docs/INDEXING.md is the contract).

Layer: application (imports nothing). The crawler, the observers, the Spark job and the
search API all take their names from here.
"""

REPOSITORY = "repository"
INLINKS = "inlinks"
DUPS = "dups"
POSTINGS = "postings"      # serving table, family "p"
DOCSTATS = "docstats"      # serving table, family "s"
IMPACTS = "impacts"        # serving table, family "i": postings in impact order

PAGE_META = "page:meta"
PAGE_CONTENT = "page:content"
PAGE_ERROR = "page:error"     # the last transient fetch failure (not observed)
DOC_PARSED = "doc:parsed"
DOC_OUTLINKS = "doc:outlinks"
DOC_FINGERPRINT = "doc:fingerprint"
DOC_ANCHORS = "doc:anchors"   # the anchor text of links to the page (inlinks observer)
CLUSTER_STATE = "cluster:state"
EXPORT_STATE = "export:state"

INLINK_PREFIX = "in:"       # inlinks[target] in:<source-url> = anchor text
INLINKS_NOTIFY = "in"       # weak notification column on inlinks[target]
MEMBER_PREFIX = "member:"   # dups[fingerprint] member:<url> = inlink count
CANONICAL_URL = "canonical-url"

POSTINGS_FAMILY = "p"
DOCSTATS_FAMILY = "s"
IMPACTS_FAMILY = "i"

PERCOLATOR_TABLES = (REPOSITORY, INLINKS, DUPS)
