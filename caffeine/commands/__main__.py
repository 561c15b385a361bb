"""``python3 -m caffeine.commands ARGS``: the ``caffeine`` program, for a checkout that was never
installed and for child processes that must run this interpreter's copy.

Layer: commands.
"""

import sys

from caffeine.commands.cli import main

if __name__ == "__main__":
    sys.exit(main())
