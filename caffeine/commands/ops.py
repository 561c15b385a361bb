"""Sub-commands ``notify`` (backfill: run a column's observers again) and ``scan``.

Layer: commands. Output is for people on stdout, progress on stderr; ``--json``
for machines.
"""

from __future__ import annotations

import argparse
import sys
import time

from caffeine.commands import DEFAULT_APP
from caffeine.config import load_settings

PROGRESS_EVERY_S = 2.0

NOTIFY_EXAMPLES = """\
examples:
  caffeine notify repository page:meta                  # re-parse every page after a parser change
  caffeine notify repository page:meta --row-prefix http://127.0.0.1:8800/site1/
  caffeine notify repository cluster:state --batch-size 500 && caffeine wait

An interrupted run continues where it stopped when run again with the same arguments
(--restart starts over). `caffeine wait` returns once the observers have run.
"""

SCAN_EXAMPLES = """\
examples:
  caffeine scan repository --row-prefix http://127.0.0.1:8800/site1/ --column doc:fingerprint
  caffeine scan dups --limit 5 --json                   # JSON Lines, one row per line
  caffeine scan repository --ts 470613297790713870      # the snapshot another run read
  caffeine scan repository --start http://a --stop http://b --raw   # locks, writes, notifications
"""


def _add_prefix(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--prefix", help="HBase table-name prefix (default: CAFFEINE_TABLE_PREFIX or caffeine_)")


def _add_range(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--start", help="first row key (UTF-8, or 0x + hex)")
    parser.add_argument("--stop", help="row key to stop before (not included)")
    parser.add_argument("--row-prefix", help="only rows whose key starts with this")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "notify", help="backfill: run a column's observers again over every row that has it",
        description="Set the notification of every row that has TABLE/COLUMN (or of a range), in "
                    "batches, clearing the acks of the column's observers so that the workers run "
                    "them again over the current values.",
        epilog=NOTIFY_EXAMPLES)
    p.add_argument("table")
    p.add_argument("column", help="an observed column, e.g. page:meta")
    _add_range(p)
    p.add_argument("--batch-size", type=int, default=100, help="rows per transaction (default 100)")
    p.add_argument("--app", default=DEFAULT_APP, help=f"application whose observers to re-run (default {DEFAULT_APP})")
    p.add_argument("--checkpoint", help="checkpoint file (default: under CAFFEINE_HOME/state/)")
    p.add_argument("--restart", action="store_true", help="ignore a checkpoint left by an interrupted run")
    _add_prefix(p)
    p.set_defaults(func=cmd_notify)

    p = subparsers.add_parser(
        "scan", help="committed values at a snapshot over a row range (--raw: protocol cells)",
        description="Rows of TABLE in key order as a transaction reads them at one snapshot.",
        epilog=SCAN_EXAMPLES)
    p.add_argument("table")
    _add_range(p)
    p.add_argument("--column", action="append", help="only these columns (repeatable; default: all)")
    p.add_argument("--limit", type=int, help="at most this many rows")
    p.add_argument("--ts", type=int, help="snapshot timestamp (default: a fresh one)")
    p.add_argument("--raw", action="store_true", help="the protocol cells as stored: data, lock, write, notify, ack")
    p.add_argument("--json", action="store_true", help="JSON Lines, complete values")
    p.add_argument("--width", type=int, default=120, help="cut text values to this many characters (0: never)")
    _add_prefix(p)
    p.set_defaults(func=cmd_scan)


def _settings(args):
    return load_settings(table_prefix=args.prefix)


def _range(args):
    from caffeine.ops.rows import RowRange

    return RowRange.of(args.start, args.stop, args.row_prefix)


def cmd_notify(args) -> int:
    from pathlib import Path

    from caffeine.ops.backfill import Checkpoint, backfill
    from caffeine.ops.rows import show_key
    from caffeine.percolator import connect
    from caffeine.percolator.observer import load_application

    app = load_application(args.app)
    observers = app.observers_of(args.table, args.column)
    if not observers:
        watched = ", ".join(f"{t}/{c}" for t, c in sorted(app.observed)) or "nothing"
        print(f"caffeine notify: no observer of application {app.name!r} watches {args.table}/{args.column} "
              f"(it watches {watched}); nothing to run again", file=sys.stderr)
        return 2
    rows = _range(args)
    settings = _settings(args)
    checkpoint = (Checkpoint(Path(args.checkpoint)) if args.checkpoint else
                  Checkpoint.for_backfill(settings.home / "state", settings.table_prefix, args.table, args.column, rows))
    if args.restart:
        checkpoint.clear()
    saved = checkpoint.load()
    names = ", ".join(o.name for o in observers)
    if saved:
        print(f"resuming after row {show_key(saved[0])!r} ({saved[1]} rows done; checkpoint {checkpoint.path}; "
              f"--restart starts over)", file=sys.stderr)
    print(f"notifying {args.table}/{args.column} on {rows.describe()} for {names}, "
          f"{args.batch_size} rows per transaction", file=sys.stderr)

    last_report = [float("-inf")]

    def report(progress):
        # The first batch, then one line every few seconds: a big table has many batches.
        if time.monotonic() - last_report[0] < PROGRESS_EVERY_S:
            return
        last_report[0] = time.monotonic()
        print(f"  {progress.rows} rows notified, {progress.rows_per_s:.0f} rows/s, "
              f"last {show_key(progress.last_row)!r}", file=sys.stderr, flush=True)

    with connect(settings) as cluster:
        progress = backfill(cluster, observers, args.table, args.column, rows,
                            batch_size=args.batch_size, checkpoint=checkpoint, on_batch=report)
    print(f"notified {progress.rows} rows of {args.table}/{args.column} ({progress.acks_cleared} acks cleared "
          f"in this run) in {progress.elapsed_s:.1f}s; workers run {names} on them "
          f"(`caffeine wait` returns when they are done)")
    return 0


def cmd_scan(args) -> int:
    from caffeine.ops import scan
    from caffeine.percolator import connect

    rows = _range(args)
    width = args.width or None
    shown = 0
    with connect(_settings(args)) as cluster:
        if args.raw:
            for row in scan.raw_rows(cluster, args.table, rows, limit=args.limit):
                print(scan.raw_row_json(args.table, row) if args.json else scan.format_raw_row(args.table, row))
                shown += 1
        else:
            snapshot_ts, items = scan.committed_rows(cluster, args.table, rows, args.column,
                                                     snapshot_ts=args.ts, limit=args.limit)
            print(f"snapshot {snapshot_ts}: {args.table}, {rows.describe()}", file=sys.stderr)
            for key, values in items:
                print(scan.row_json(key, values, snapshot_ts) if args.json else scan.format_row(key, values, width))
                shown += 1
    print(f"{shown} rows", file=sys.stderr)
    return 0
