"""``python -m caffeine.oracle [--host H] [--port P] [--block-ms MS]``: the same as ``caffeine oracle``.

Layer: oracle. Process entry point. Loads only this package's options
(``caffeine.oracle.foreground``), not the command line's other areas, so the oracle starts
even when another area's sub-commands fail to import.
"""

import argparse
import sys

from caffeine.errors import CaffeineError
from caffeine.oracle.foreground import DESCRIPTION, add_arguments, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m caffeine.oracle", description=DESCRIPTION)
    add_arguments(parser)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return run(args)
    except CaffeineError as exc:
        print(f"caffeine oracle: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
