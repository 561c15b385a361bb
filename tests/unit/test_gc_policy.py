"""The long-running processes' garbage-collector policy (``caffeine.gc_policy``): applied, a
process runs full collections a tenth as often and leaves what start-up made out of them.
Run in a fresh interpreter: the policy is process-wide, and the test process keeps its own."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import gc, json
from caffeine.gc_policy import apply_long_running_policy
before = {"threshold": gc.get_threshold(), "frozen": gc.get_freeze_count()}
apply_long_running_policy()
print(json.dumps({"before": before, "after": {"threshold": gc.get_threshold(), "frozen": gc.get_freeze_count()}}))
"""


def test_the_policy_spaces_out_full_collections_and_freezes_what_start_up_made():
    out = json.loads(subprocess.run([sys.executable, "-c", PROBE], check=True, capture_output=True, text=True).stdout)
    before, after = out["before"], out["after"]
    assert before["frozen"] == 0
    assert after["threshold"][:2] == before["threshold"][:2]  # young collections as before
    assert after["threshold"][2] == 10 * before["threshold"][2] == 100
    assert after["frozen"] > 1000  # the modules and classes start-up imported


def test_the_search_service_applies_the_same_policy():
    from caffeine import gc_policy
    from caffeine.search import gc_policy as service

    assert service.fewer_full_collections is gc_policy.fewer_full_collections
    assert service.freeze_what_startup_made is gc_policy.freeze_what_startup_made
