"""``python -m caffeine.runtime.oracle_main -Dcaffeine.home=<home> -Dcaffeine.piece=<oracle|standby> [ARGS]``.

Layer: runtime. A process entry point only: nothing in ``caffeine.runtime`` imports it
(the runtime itself stays below the oracle). It is how ``caffeine up`` runs the timestamp
oracle and its standby, and does exactly what ``python -m caffeine.oracle ARGS`` does, plus two things:

- it accepts (and drops) the marker arguments ``-Dcaffeine.home=<home>`` and
  ``-Dcaffeine.piece=oracle`` (or ``standby``), the ones every JVM of the local runtime carries, so
  ``caffeine.runtime.process.find_pieces`` finds the oracle by its command line like the JVMs,
  and ``ps`` shows which home it belongs to;
- it configures logging with time and level (INFO and up) into the log file that ``spawn``
  redirects stdout/stderr to; ``python -m caffeine.oracle`` leaves logging to Python's
  last-resort handler, which prints warnings without either.

Its settings come from the ``CAFFEINE_*`` environment, which ``LocalHBase`` fills with the
exact ``Settings`` it runs with (``catalogue.oracle_env``).
"""

from __future__ import annotations

import logging
import sys

from caffeine.runtime.process import strip_markers


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    from caffeine.oracle.__main__ import main as oracle_main

    return oracle_main(strip_markers(list(sys.argv[1:] if argv is None else argv)))


if __name__ == "__main__":
    sys.exit(main())
