"""Progress of a running Spark job, for people: finished tasks of the active stages.

Layer: spark. PySpark's status tracker only. Spark's own console bar writes
carriage returns from the JVM; this prints plain lines through a callback (stderr in
``caffeine batch``), so it reads the same in a terminal, a log file or a CI job.
"""

from __future__ import annotations

import threading
from typing import Callable


class StageProgress:
    """While open, reports ``done/total tasks`` of the active stages every ``every_s`` seconds,
    when the figure changed."""

    def __init__(self, sc, report: Callable[[str], None], *, every_s: float = 2.0) -> None:
        self.sc = sc
        self.report = report
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="caffeine-spark-progress", daemon=True)
        self._last = None

    def __enter__(self) -> "StageProgress":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def snapshot(self) -> tuple[int, int, int] | None:
        """(finished tasks, tasks, active stages) over the active stages, or None when no
        stage is running."""
        tracker = self.sc.statusTracker()
        done = total = stages = 0
        for stage_id in tracker.getActiveStageIds():
            info = tracker.getStageInfo(stage_id)
            if info is None:
                continue
            done += info.numCompletedTasks
            total += info.numTasks
            stages += 1
        return (done, total, stages) if stages else None

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                now = self.snapshot()
            except Exception:  # the context is stopping; progress is best effort
                return
            if now is not None and now != self._last:
                done, total, stages = now
                self.report(f"  spark: {done}/{total} tasks done in {stages} running stage{'s' if stages > 1 else ''}")
                self._last = now
