"""Helpers shared by the tests: importable as ``support.<module>`` (``pythonpath = ["tests"]``
in pyproject.toml's pytest settings), never collected as tests.

- ``session``: the test session's table prefix, settings and oracle, and clusters over HBase
  with a table prefix of their own (what ``tests/conftest.py``'s fixtures are built from);
- ``child_helpers``, ``bank``: client processes for crash and fault tests (start, follow
  their lines, SIGKILL them) and the bank they transfer money in; ``workers``: ``caffeine
  worker`` processes;
- scripts run as processes, by path: ``bank_child.py``, ``ledger_child.py``, ``txn_child.py``
  (``python3 tests/support/<script>.py``) and the observer applications of worker processes
  ``observer_apps.py``, ``fault_apps.py``, ``ledger_observer.py``
  (``caffeine worker --app tests/support/<module>.py:<attr>``);
- ``fault_proxy``: the TCP proxy that injects network and server faults;
- ``cli_helpers``: the ``caffeine`` command line as a child process;
- ``oracles``: ``caffeine oracle`` processes (active or ``--standby``), followed and signalled;
- ``network_stub``: the loopback guard and the crawler's connection stubs;
- ``percolator_helpers``: protocol steps as given / when / then;
- ``reference_index``, ``reference_scoring``, ``parse_reference``: independent computations
  the library is compared with;
- ``search_web``, ``served_site``: the small web the search tests index, and the recording
  site the directive and near-duplicate tests crawl.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository's root (the checkout the tests run from)."""
