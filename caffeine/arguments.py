"""Argument types the sub-commands of the library and of the applications share.

Layer: shared. Imports the standard library only. An application's command takes these
from here, not from another application's commands, so the applications stay apart.
"""

from __future__ import annotations

import argparse
import re


def parse_size(text: str) -> int:
    """``2M``, ``512K``, ``1000`` -> bytes (argparse ``type``)."""
    m = re.fullmatch(r"\s*(\d+)\s*([kKmMgG]?)i?[bB]?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (try 2M, 512K, 1000)")
    return int(m.group(1)) * {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[m.group(2).lower()]


__all__ = ["parse_size"]
