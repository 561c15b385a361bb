"""``python -m caffeine.oracle [--host H] [--port P] [--block-ms MS]``: the same as ``caffeine oracle``.

Layer: oracle (CLI side). Runs only this package's command, so the oracle can start even when
another area's sub-commands fail to import.
"""

import argparse
import sys

from caffeine.errors import CaffeineError
from caffeine.commands.oracle import register


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m caffeine.oracle")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["oracle", *(sys.argv[1:] if argv is None else argv)])
    try:
        return int(args.func(args) or 0)
    except CaffeineError as exc:
        print(f"caffeine oracle: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
