"""What a person sees when a command fails: what failed, where the log is, what to try.

Layer: shared. Top of the library, under the application layer (used by ``caffeine.commands.cli``
only; imports the error types of the layers below).

Contract: no stack trace, Python's or Java's, reaches a user's terminal unless they ask for it
(``--debug`` or ``CAFFEINE_DEBUG=1``). Every command logs to a file as well as to stderr; the
file gets everything (tracebacks included), stderr gets one line per record with Java frames
cut off. A failing command prints three things::

    caffeine gc: <what failed, one line>
      try: <what to do about it>
      log: <the file with the details> (--debug shows the traceback here)
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys
import tempfile
import threading
from pathlib import Path

from caffeine.errors import CaffeineError

LOG_NAME = "cli.log"
DEBUG_ENV = "CAFFEINE_DEBUG"
# One line of an error is enough on a terminal; HBase puts whole table descriptors in them.
MAX_MESSAGE_CHARS = 800

RUNTIME_HINT = "`caffeine status` shows what runs and where its logs are; `caffeine up` starts the local HBase and oracle"


def debug_requested(flag: bool = False) -> bool:
    return flag or os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no")


def first_line(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """The first line of ``text``, Java's stack frames and "Caused by" chains dropped, cut
    to ``limit`` characters."""
    line = next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _is_java_frame(line: str) -> bool:
    stripped = line.strip()
    return (line.startswith("\t") and (stripped.startswith("at ") or stripped.startswith("..."))) or stripped.startswith("Caused by: ")


def strip_java_frames(text: str) -> str:
    return "\n".join(ln for ln in text.splitlines() if not _is_java_frame(ln)).rstrip()


class TerminalFormatter(logging.Formatter):
    """A log record for a terminal: its message without tracebacks or Java frames."""

    def format(self, record: logging.LogRecord) -> str:
        record = logging.makeLogRecord(record.__dict__)
        record.exc_info = None
        record.exc_text = None
        record.stack_info = None
        return strip_java_frames(super().format(record))


def log_file(home: Path | None = None) -> Path:
    """Where this command's log goes: ``CAFFEINE_HOME/logs/cli.log``, or a file in the
    temporary directory when that cannot be written (a client machine without a runtime)."""
    candidates = []
    if home is None:
        try:
            from caffeine.config import load_settings

            settings = load_settings()
            home = settings.home
            if settings.cli_log is not None:
                candidates.append(Path(settings.cli_log))
        except Exception:
            home = None
    if home is not None:
        candidates.append(Path(home) / "logs" / LOG_NAME)
    candidates.append(Path(tempfile.gettempdir()) / f"caffeine-{os.getuid() if hasattr(os, 'getuid') else 'user'}" / LOG_NAME)
    for path in candidates:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a"):
                pass
            return path
        except OSError:
            continue
    return candidates[-1]


def setup_logging(*, verbose: bool, debug: bool, command: str) -> Path | None:
    """Log to stderr (warnings, or everything with ``verbose``) and to the log file (info
    and up, with tracebacks). Returns the log file's path (None if none could be opened)."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "_caffeine_cli", False)]:
        root.removeHandler(old)  # main() called again in one process (tests)
        old.close()
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    fmt = f"%(asctime)s %(levelname)s [{command} %(process)d] %(name)s: %(message)s"
    terminal = logging.StreamHandler()
    terminal.setLevel(logging.DEBUG if verbose else logging.WARNING)
    terminal.setFormatter(logging.Formatter(fmt) if debug else TerminalFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    terminal.addFilter(lambda record: not getattr(record, "file_only", False))
    terminal._caffeine_cli = True
    root.addHandler(terminal)
    path = log_file()
    try:
        # Several processes append to one file; rotation by size keeps it bounded (a rename
        # racing another process's write loses nothing that matters on a terminal's behalf).
        handler = logging.handlers.RotatingFileHandler(path, maxBytes=20_000_000, backupCount=2, delay=True)
    except OSError:
        return None
    handler.setLevel(logging.DEBUG if verbose else logging.INFO)
    handler.setFormatter(logging.Formatter(fmt))
    handler._caffeine_cli = True
    root.addHandler(handler)
    _quiet_thread_tracebacks()
    return path


def _quiet_thread_tracebacks() -> None:
    """An exception escaping a thread goes to the log (traceback in the file), not raw to stderr."""

    def hook(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is SystemExit:
            return
        name = args.thread.name if args.thread is not None else "?"
        logging.getLogger("caffeine").error(
            "thread %s failed: %s", name, first_line(describe(args.exc_value)),
            exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
        )

    threading.excepthook = hook


def describe(exc: BaseException) -> str:
    """An exception's message; Thrift's exceptions carry ``message`` as bytes."""
    message = getattr(exc, "message", None)
    if isinstance(message, bytes):
        message = message.decode("utf-8", "replace")
    if not message:
        try:
            message = str(exc)
        except Exception:
            message = repr(exc)
    return message or type(exc).__name__


def hint_for(exc: BaseException) -> str:
    """What to try, from the kind of failure."""
    from caffeine.oracle.errors import OracleUnavailable
    from caffeine.storage.errors import StorageUnavailable, TableNotFound

    text = describe(exc)
    if isinstance(exc, (StorageUnavailable, OracleUnavailable)) or getattr(exc, "unreachable", False):
        return f"is the runtime up? {RUNTIME_HINT} (or point CAFFEINE_THRIFT*/CAFFEINE_ORACLE_* at your cluster)"
    if isinstance(exc, TableNotFound):
        return "`caffeine tables list` shows the tables under this prefix; is --prefix (or CAFFEINE_TABLE_PREFIX) the one you meant?"
    if "NoSuchColumnFamilyException" in text:
        return ("the table does not have the column families this command reads: is it a Percolator table? "
                "`caffeine tables list` shows the tables")
    if "pip install" in text:
        return "install what the message names, then run the command again"
    if isinstance(exc, (ModuleNotFoundError, FileNotFoundError)):
        return "check the name or path given on the command line"
    if isinstance(exc, CaffeineError):
        return "see the log for details; `caffeine status` shows whether the runtime is healthy"
    return "this looks like a bug or an environment problem: the log has the traceback"


def report_failure(command: str, exc: BaseException, log_path: Path | None, *, stream=None) -> None:
    """Print what failed, what to try and where the log is; log the traceback to the file."""
    stream = stream or sys.stderr
    what = first_line(describe(exc))
    if not isinstance(exc, CaffeineError):
        what = f"{type(exc).__name__}: {what}"
    logging.getLogger("caffeine.commands.cli").error("caffeine %s failed: %s", command, describe(exc),
                                                     exc_info=exc, extra={"file_only": True})
    print(f"caffeine {command}: {what}", file=stream)
    print(f"  try: {hint_for(exc)}", file=stream)
    where = f"{log_path}" if log_path else "no log file could be opened"
    print(f"  log: {where} (run with --debug or {DEBUG_ENV}=1 to see the traceback here)", file=stream)


__all__ = ["DEBUG_ENV", "debug_requested", "first_line", "hint_for", "log_file", "report_failure",
           "setup_logging", "strip_java_frames"]
