"""Sub-commands of the transaction layer: ``tables``, ``inspect``, ``worker``, ``wait``, ``engine``, ``gc``.

Layer: commands. Output is for people; errors are CaffeineErrors with one-line
messages. ``worker``, ``wait`` and ``engine`` serve the indexing application unless ``--app``
names another (``caffeine.commands.DEFAULT_APP``).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter

from caffeine.commands import DEFAULT_APP, DEFAULT_WORKER_THREADS
from caffeine.config import load_settings


def _settings(args):
    return load_settings(table_prefix=getattr(args, "prefix", None))


def _add_prefix(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--prefix", help="HBase table-name prefix (default: CAFFEINE_TABLE_PREFIX or caffeine_)")


# Examples shown under each command's --help.
EXAMPLES = {
    "tables": "examples:\n  caffeine tables list\n  caffeine tables create accounts --prefix bank_\n",
    "list": "examples:\n  caffeine tables list                  # tables under CAFFEINE_TABLE_PREFIX\n  caffeine tables list --prefix demo_\n  caffeine tables list --regions        # each table's regions and their servers\n",
    "create": "examples:\n  caffeine tables create accounts ledger --prefix bank_\n",
    "drop": "examples:\n  caffeine tables drop accounts ledger --prefix bank_ --yes\n",
    "inspect": "examples:\n  caffeine inspect repository http://127.0.0.1:8800/site1/page3.html\n  caffeine inspect repository http://127.0.0.1:8800/ --column page:meta --column __ack__/document\n  caffeine inspect dups 0x00ff10   # a binary row key in hex\n",
    "worker": "examples:\n  caffeine worker &                                   # the indexing observers\n  caffeine worker --threads 32 --metrics-port 9300    # Prometheus at :9300/metrics\n  caffeine worker --app myapp.py:application          # your own observers\n",
    "wait": "examples:\n  caffeine crawl http://127.0.0.1:8800/ --depth 3 && caffeine wait\n  caffeine wait --timeout 600 || caffeine engine      # what is still failing\n",
    "engine": "examples:\n  caffeine engine\n  caffeine engine --json\n  caffeine engine --map                 # the observer chain, from the application's code\n",
    "gc": "examples:\n  caffeine gc --dry-run                 # count what would go\n  caffeine gc --table repository\n",
}


def register(subparsers) -> None:
    tables = subparsers.add_parser("tables", epilog=EXAMPLES["tables"], help="list, create or drop Percolator-managed tables")
    tsub = tables.add_subparsers(dest="tables_command", metavar="ACTION")
    tsub.required = True
    p = tsub.add_parser("list", epilog=EXAMPLES["list"], help="tables under the prefix")
    p.add_argument("--regions", action="store_true",
                   help="also each table's regions (first row of each, its server) and how many each server holds")
    _add_prefix(p)
    p.set_defaults(func=cmd_tables_list)
    p = tsub.add_parser("create", epilog=EXAMPLES["create"], help="create tables with the data/lock/write/notify/ack families")
    p.add_argument("names", nargs="+")
    _add_prefix(p)
    p.set_defaults(func=cmd_tables_create)
    p = tsub.add_parser("drop", epilog=EXAMPLES["drop"], help="drop tables and everything in them")
    p.add_argument("names", nargs="+")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    _add_prefix(p)
    p.set_defaults(func=cmd_tables_drop)

    p = subparsers.add_parser("inspect", epilog=EXAMPLES["inspect"], help="show a row's data, lock, write, notify and ack cells (paper's Figure 4)")
    p.add_argument("table")
    p.add_argument("row", help="row key (UTF-8; prefix with 0x for hex)")
    p.add_argument("--column", action="append", help="only these columns (repeatable)")
    _add_prefix(p)
    p.set_defaults(func=cmd_inspect)

    p = subparsers.add_parser("worker", epilog=EXAMPLES["worker"], help="run an application's observers until stopped (Ctrl-C)")
    p.add_argument("--app", default=DEFAULT_APP, help=f"MODULE:ATTR or file.py:ATTR (default {DEFAULT_APP})")
    p.add_argument("--threads", type=int, default=DEFAULT_WORKER_THREADS, help=f"observer threads (default {DEFAULT_WORKER_THREADS})")
    p.add_argument("--metrics-port", type=int, help="serve Prometheus metrics on http://HOST:PORT/metrics (default: off)")
    p.add_argument("--metrics-host", default="127.0.0.1",
                   help="address of the metrics endpoint (default 127.0.0.1; 0.0.0.0 for every address)")
    _add_prefix(p)
    p.set_defaults(func=cmd_worker)

    p = subparsers.add_parser("wait", epilog=EXAMPLES["wait"], help="return when no notification is left and no transaction ran during a full scan")
    p.add_argument("--app", default=DEFAULT_APP, help=f"MODULE:ATTR whose observed tables to watch (default {DEFAULT_APP})")
    p.add_argument("--timeout", type=float, default=None, help="give up after this many seconds (exit 1)")
    _add_prefix(p)
    p.set_defaults(func=cmd_wait)

    p = subparsers.add_parser("engine", epilog=EXAMPLES["engine"], help="observer engine status: workers, metrics, pending notifications, failures")
    p.add_argument("--app", default=DEFAULT_APP)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--map", action="store_true",
                   help="print the application's observer chain (which observer watches which column and "
                        "what it writes) and exit; needs no HBase")
    _add_prefix(p)
    p.set_defaults(func=cmd_engine, needs_servers=lambda args: not args.map)

    p = subparsers.add_parser("gc", epilog=EXAMPLES["gc"], help="delete versions no running or future transaction can read")
    p.add_argument("--table", action="append",
                   help="collect only these tables (repeatable; default: all); old locks are settled in every table")
    p.add_argument("--dry-run", action="store_true", help="count what would be deleted, delete nothing")
    _add_prefix(p)
    p.set_defaults(func=cmd_gc)


def cmd_worker(args) -> int:
    import signal
    import threading

    from caffeine.gc_policy import apply_long_running_policy
    from caffeine.percolator.cluster import connect
    from caffeine.percolator.observer import load_application
    from caffeine.percolator.worker import Worker

    app = load_application(args.app)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with connect(_settings(args)) as cluster:
        worker = Worker(cluster, app, threads=args.threads)
        # Start-up is done (the application, the connections, the installed tables): what it
        # made lives as long as the process, and the runs' own garbage is freed by reference
        # counting. Collections were 12% of a worker's CPU, two thirds of it in full ones
        # walking all of that again (caffeine.gc_policy).
        apply_long_running_policy()
        metrics_server = None
        if args.metrics_port is not None:
            from caffeine.metrics import serve
            from caffeine.metrics.worker import worker_registry

            metrics_server = serve(worker_registry(worker), args.metrics_port, args.metrics_host)
            print(f"metrics on http://{args.metrics_host}:{metrics_server.server_port}/metrics", file=sys.stderr)
        worker.start()
        print(f"worker {worker.worker_id}: running {len(app.observers)} observers of {app.name!r} "
              f"on {', '.join(app.observed_tables)} with {args.threads} threads (Ctrl-C stops)", file=sys.stderr)
        try:
            while not stop.wait(1.0):
                pass
        except KeyboardInterrupt:
            pass
        finally:
            worker.stop()
            if metrics_server is not None:
                metrics_server.shutdown()
    return 0


def cmd_wait(args) -> int:
    from caffeine.percolator.cluster import connect
    from caffeine.percolator.observer import load_application
    from caffeine.percolator.engine_status import NotQuiescent, pending_printer, wait_until_quiescent

    app = load_application(args.app)
    with connect(_settings(args)) as cluster:
        try:
            waited = wait_until_quiescent(cluster, app.observed_tables, timeout_s=args.timeout,
                                          progress=pending_printer(sys.stderr))
        except NotQuiescent as exc:
            print(f"caffeine wait: {exc}", file=sys.stderr)
            return 1
    print(f"quiescent after {waited:.1f}s")
    return 0


def cmd_engine(args) -> int:
    import json

    from caffeine.percolator.cluster import connect
    from caffeine.percolator.observer import load_application
    from caffeine.percolator.engine_status import engine_report, format_engine_report

    app = load_application(args.app)
    if args.map:
        chain = app.chain_map()
        print(json.dumps(chain, indent=2) if args.json else "\n".join(chain))
        return 0
    with connect(_settings(args)) as cluster:
        report = engine_report(cluster, app.observed_tables)
    print(json.dumps(report, indent=2) if args.json else format_engine_report(report))
    return 0


def _row_key(text: str) -> bytes:
    if text.startswith("0x"):
        return bytes.fromhex(text[2:])
    return text.encode("utf-8")


def cmd_tables_list(args) -> int:
    from caffeine.storage import open_store

    settings = _settings(args)
    with open_store(settings) as store:
        names = store.list_tables()
        regions = {name: store.regions(name) for name in names} if args.regions else {}
    for name in names:
        print(f"{name}\t(HBase table {settings.table_prefix}{name})" + (f": {len(regions[name])} region{'s' if len(regions[name]) != 1 else ''}" if regions else ""))
        for region in regions.get(name, ()):
            print(f"    {_key(region.start, '(first row)'):<32} .. {_key(region.end, '(last row)'):<32} {region.server}")
    if regions:
        per_server = Counter(r.server for rs in regions.values() for r in rs)
        print("regions per server: " + ", ".join(f"{server} {n}" for server, n in sorted(per_server.items())))
    if not names:
        print(f"no tables with prefix {settings.table_prefix!r}", file=sys.stderr)
    return 0


def _key(key: bytes, empty: str) -> str:
    """A region boundary for people: the row key as text, ``empty`` for the table's edge."""
    return key.decode("utf-8", "backslashreplace") if key else empty


def cmd_tables_create(args) -> int:
    from caffeine.percolator.layout import create_table
    from caffeine.storage import open_store

    with open_store(_settings(args)) as store:
        for name in args.names:
            created = create_table(store, name, exist_ok=True)
            print(f"{name}: {'created' if created else 'exists already'}")
    return 0


def cmd_tables_drop(args) -> int:
    from caffeine.storage import open_store

    if not args.yes:
        if not sys.stdin.isatty():
            print("refusing to drop tables without --yes (no terminal to ask)", file=sys.stderr)
            return 2
        answer = input(f"drop {', '.join(args.names)} and all their data? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("nothing dropped")
            return 1
    with open_store(_settings(args)) as store:
        for name in args.names:
            store.drop_table(name)
            print(f"{name}: dropped")
    return 0


def cmd_inspect(args) -> int:
    from caffeine.percolator.inspect import read_all_versions, render
    from caffeine.storage import open_store

    key = _row_key(args.row)
    with open_store(_settings(args)) as store:
        snapshot = read_all_versions(store, args.table, key)
    print(render(args.table, key, snapshot, args.column), end="")
    return 0


def cmd_gc(args) -> int:
    from caffeine.percolator.cluster import connect
    from caffeine.percolator.gc import collect_garbage, gc_horizon

    with connect(_settings(args)) as cluster:
        horizon = gc_horizon(cluster)
        print(f"gc horizon: {horizon} (oldest open transaction, or now less a safety margin)", file=sys.stderr)
        report = collect_garbage(
            cluster, horizon, args.table, dry_run=args.dry_run,
            progress=lambda table, n: print(f"  {table}: {n} rows scanned", file=sys.stderr),
        )
    print(("dry run: " if args.dry_run else "") + report.summary())
    return 0
