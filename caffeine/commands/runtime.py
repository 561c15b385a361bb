"""``caffeine up``, ``caffeine down``, ``caffeine status``: the local runtime from the shell;
``caffeine spark up|down|status``: its Spark standalone cluster (``caffeine.runtime.spark``).

Layer: commands. ``register(subparsers)`` adds the three sub-commands; each
builds ``Settings`` from the ``CAFFEINE_*`` environment and drives ``LocalHBase`` (HBase,
Thrift1, Thrift2, the timestamp oracle and its standby). Progress goes to stderr, the final report to
stdout. Exit codes: ``up``/``down`` 0 on success and 1 on failure (a ``LocalHBaseError``,
printed by ``caffeine.commands.cli`` without a trace); ``status`` 0 when every piece is
healthy (an external oracle that answers counts), 3 when anything is stopped or unhealthy
(like ``systemctl status``).
"""

from __future__ import annotations

import argparse
import sys

from caffeine.commands import DEFAULT_APP
from caffeine.config import load_settings

EXIT_NOT_HEALTHY = 3


def _local(args: argparse.Namespace):
    # Imported here so `caffeine --help` and other commands do not load the runtime.
    from caffeine.runtime.local import LocalHBase

    overrides = {}
    if getattr(args, "timeout", None) is not None:
        overrides["startup_timeout_s"] = args.timeout
    if getattr(args, "regionservers", None) is not None:
        overrides["regionservers"] = args.regionservers
    return LocalHBase(load_settings(**overrides))


def cmd_up(args: argparse.Namespace) -> int:
    status = _local(args).up()
    print(status.render())
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    local = _local(args)
    local.down()
    print(f"Local HBase and timestamp oracle in {local.layout.home}: stopped "
          f"(data kept in {local.layout.hbase_root_dir})")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    status = _local(args).status()
    print(status.render())
    if status.healthy:
        _print_engine_status(args)
    return 0 if status.healthy else EXIT_NOT_HEALTHY


def _print_engine_status(args: argparse.Namespace) -> None:
    """The observer engine's part of the status (workers, metrics, backlog, failures).

    Imported here, not at the top: ``up`` and ``down`` need only the runtime, and only this
    report loads the transaction layer.
    """
    try:
        from caffeine.percolator import connect
        from caffeine.percolator.observer import load_application
        from caffeine.percolator.engine_status import engine_report, format_engine_report

        app = load_application(DEFAULT_APP)
        with connect(load_settings()) as cluster:
            print()
            print(format_engine_report(engine_report(cluster, app.observed_tables)))
    except Exception as exc:  # the runtime's own status above is the main answer
        print(f"\nobserver engine: status unavailable ({type(exc).__name__}: {exc})")


# Examples shown under each command's --help.
EXAMPLES = {
    "up": "examples:\n  caffeine up                      # start what is missing; harmless when all runs\n  caffeine up --timeout 300        # a slow first start (Maven, meta assignment)\n  caffeine up --regionservers 3    # HBase distributed: ZooKeeper, a master, 3 region servers\n",
    "down": "examples:\n  caffeine down                    # stop cleanly; data under CAFFEINE_HOME is kept\n  caffeine down && caffeine up     # restart\n",
    "spark": "examples:\n  caffeine spark up --workers 2\n  caffeine spark status\n  caffeine spark down\n",
    "spark up": "examples:\n  caffeine spark up --workers 2\n"
                "  caffeine batch --master spark://127.0.0.1:7077    # the batch job on it\n",
    "spark down": "examples:\n  caffeine spark down\n",
    "spark status": "examples:\n  caffeine spark status\n",
    "status": "examples:\n  caffeine status                  # pids, ports, health, log files\n  caffeine status || caffeine up   # start it when something is down\n",
}


def register(subparsers: argparse._SubParsersAction) -> None:
    up = subparsers.add_parser(
        "up", epilog=EXAMPLES["up"],
        help="start the local HBase, its Thrift1/Thrift2 servers and the timestamp oracle "
        "(downloads jars once)",
        description=(
            "Resolve HBase's jars with Maven (cached under CAFFEINE_HOME/lib), write "
            "CAFFEINE_HOME/conf, start standalone HBase (or, with --regionservers N, a ZooKeeper, "
            "a master and N region servers), a Thrift1 and a Thrift2 server on "
            "127.0.0.1, wait until a real call answers through both, then start the timestamp "
            "oracle (CAFFEINE_ORACLE_PORT) and wait until it answers, then its standby "
            "(CAFFEINE_ORACLE_STANDBY_PORT, 0 for none), which takes over if the oracle dies. "
            "Starts only what is missing; harmless when everything runs. An oracle already "
            "answering on its port (started by hand) is used, not duplicated."
        ),
    )
    up.add_argument("--timeout", type=float, metavar="SECONDS",
                    help="how long to wait for health (default: CAFFEINE_STARTUP_TIMEOUT_S)")
    up.add_argument("--regionservers", type=int, metavar="N",
                    help="0: standalone HBase, one JVM; N (1-9): HBase distributed on this machine, a "
                    "ZooKeeper, a master and N region servers, each a JVM with its own ports and log "
                    "(default: CAFFEINE_REGIONSERVERS, 0); the clients that create tables want "
                    "CAFFEINE_REGIONSERVERS=N too, to split them over the servers")
    up.set_defaults(func=cmd_up)

    down = subparsers.add_parser(
        "down", epilog=EXAMPLES["down"],
        help="stop the oracle, then the local HBase cleanly (Thrift2, Thrift1, HBase); data is kept",
        description="Stop the standby and the timestamp oracle (SIGTERM: it hands its lease back), the Thrift "
        "servers, then shut HBase down cleanly; SIGKILL after CAFFEINE_SHUTDOWN_TIMEOUT_S. "
        "Leaves an oracle it did not start alone. Idempotent.",
    )
    down.set_defaults(func=cmd_down)

    status = subparsers.add_parser(
        "status", epilog=EXAMPLES["status"],
        help="what runs, pids, ports, health, logs (exit 0 healthy, 3 otherwise)",
        description="Report each piece of the local runtime with a real call through each "
        "Thrift server and to each oracle (active or standby); in the cluster mode also ZooKeeper, the master and "
        "each region server with its regions and request counts. Exit code 0 when all "
        "healthy, 3 when stopped or partially running.",
    )
    status.set_defaults(func=cmd_status)

    register_spark(subparsers)


def register_spark(subparsers: argparse._SubParsersAction) -> None:
    """``caffeine spark up|down|status``: the local Spark standalone cluster (caffeine.runtime.spark)."""
    p = subparsers.add_parser(
        "spark", epilog=EXAMPLES["spark"],
        help="a Spark standalone cluster on this machine (master and workers) for `caffeine batch`",
        description="Start, stop or list a Spark standalone master and its workers, from the installed "
                    "PySpark, on 127.0.0.1, with logs and work directories under CAFFEINE_HOME "
                    "(spark/README.md, \"A cluster on this machine\").",
    )
    sub = p.add_subparsers(dest="spark_command", metavar="ACTION")
    sub.required = True
    up = sub.add_parser(
        "up", epilog=EXAMPLES["spark up"], help="start the master and the workers not running yet",
        description="Start the master (CAFFEINE_SPARK_MASTER_PORT, web UI CAFFEINE_SPARK_MASTER_WEBUI_PORT) "
                    "and the workers, and wait until the master lists every worker alive. Starts only "
                    "what is missing; a failed start stops what it started.")
    up.add_argument("--workers", type=int, default=None,
                    help="worker processes (default CAFFEINE_SPARK_WORKERS, 2)")
    up.set_defaults(func=cmd_spark_up)
    sub.add_parser("down", epilog=EXAMPLES["spark down"],
                   help="stop the workers, their executors and the master").set_defaults(func=cmd_spark_down)
    sub.add_parser("status", epilog=EXAMPLES["spark status"],
                   help="the processes, and the master's workers and applications "
                        "(exit 0 when the master runs, 3 otherwise)").set_defaults(func=cmd_spark_status)


def _spark_cluster():
    from caffeine.runtime.spark import StandaloneCluster

    return StandaloneCluster(load_settings())


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def cmd_spark_up(args: argparse.Namespace) -> int:
    status = _spark_cluster().up(workers=args.workers, progress=_say)
    print(status.render())
    return 0


def cmd_spark_down(args: argparse.Namespace) -> int:
    cluster = _spark_cluster()
    stopped = cluster.down(progress=_say)
    print(f"Spark cluster in {cluster.home}: stopped ({len(stopped)} processes)")
    return 0


def cmd_spark_status(args: argparse.Namespace) -> int:
    status = _spark_cluster().status()
    print(status.render())
    return 0 if status.running else EXIT_NOT_HEALTHY
