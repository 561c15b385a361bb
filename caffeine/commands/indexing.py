"""Sub-commands of the indexing application: ``dups``.

Layer: commands. Reads through snapshot transactions of the public API; what a
cluster is, and how the ``dups`` table is read, is ``caffeine.observers.dups``'s.
"""

from __future__ import annotations

import json
import sys

from caffeine.config import load_settings
from caffeine.index.schema import DOC_FINGERPRINT, REPOSITORY
from caffeine.observers.dups import largest_clusters, read_cluster


# Examples shown under each command's --help.
EXAMPLES = {
    "dups": "examples:\n  caffeine dups --top 20\n  caffeine dups --url http://127.0.0.1:8800/site1/page3.html\n  caffeine dups --hash FINGERPRINT --json\n",
}


def register(subparsers) -> None:
    p = subparsers.add_parser("dups", epilog=EXAMPLES["dups"], help="inspect the dups table: largest clusters, a cluster, a URL's cluster")
    target = p.add_mutually_exclusive_group()
    target.add_argument("--hash", help="show the cluster with this content fingerprint")
    target.add_argument("--url", help="show the cluster this URL belongs to")
    p.add_argument("--top", type=int, default=10, help="how many of the largest clusters to list (default 10)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--prefix", help="HBase table-name prefix (default: CAFFEINE_TABLE_PREFIX or caffeine_)")
    p.set_defaults(func=cmd_dups)


def cmd_dups(args) -> int:
    from caffeine.percolator import connect

    settings = load_settings(table_prefix=args.prefix)
    with connect(settings) as cluster, cluster.begin() as txn:
        if args.url or args.hash:
            fp = args.hash
            if args.url:
                fp_bytes = txn.get(REPOSITORY, args.url, DOC_FINGERPRINT)
                if fp_bytes is None:
                    print(f"{args.url}: not an indexed document (never crawled, gone, or not HTML)", file=sys.stderr)
                    return 1
                fp = fp_bytes.decode()
            found = read_cluster(txn, fp)
            if found is None:
                print(f"no cluster with fingerprint {fp}", file=sys.stderr)
                return 1
            if args.json:
                print(json.dumps(found, indent=2))
                return 0
            exact = found["exact"]
            print(f"cluster {found['fingerprint']}: {len(found['members'])} pages, canonical {found['canonical']}"
                  + (f", {len(exact)} near-duplicate contents" if len(exact) > 1 else ""))
            for part in exact:
                if len(exact) > 1:
                    near = ", ".join(f"{fp[:12]} {s:.2f}" for fp, s in part["near"].items())
                    print(f"  content {part['fingerprint']}  (near: {near})")
                for url, inlinks in part["members"].items():
                    mark = "*" if url == found["canonical"] else " "
                    print(f" {mark} {inlinks:6d} inlinks  {url}")
            return 0
        top, clusters, members = largest_clusters(txn, args.top)
    if args.json:
        print(json.dumps({"clusters": clusters, "pages": members, "largest": top}, indent=2))
        return 0
    print(f"{clusters} clusters over {members} pages; {sum(1 for c in top if c['size'] > 1)} of the top {len(top)} have duplicates")
    for c in top:
        near = f"  ({c['exact']} near-duplicate contents)" if c["exact"] > 1 else ""
        print(f"  {c['size']:5d} pages  {c['fingerprint']}  canonical {c['canonical']}{near}")
    if top:
        print(f"\nmembers of one: caffeine dups --hash {top[0]['fingerprint']}")
    return 0


__all__ = ["register"]
