"""What the Thrift servers' errors say: text for messages, a missing table, a row step's refusal.

Layer: storage. Used by ``hbase.py``; imports the storage model only.
"""

from __future__ import annotations

from caffeine.storage.model import Refusal, parse_refusals


def describe_error(exc: BaseException) -> str:
    """A Thrift exception as text. Thrift's exceptions carry ``message`` as bytes, and their
    ``str()`` then raises TypeError, so never format them with str()."""
    message = getattr(exc, "message", None)
    if isinstance(message, bytes):
        message = message.decode("utf-8", "replace")
    if message is None:
        try:
            message = str(exc)
        except Exception:
            message = repr(exc)
    return f"{type(exc).__name__}: {message}"


def names_missing_table(exc: BaseException) -> bool:
    """Whether the error says the table does not exist (as Thrift1 says it; Thrift2's writes
    to a missing table fail with a generic message instead)."""
    text = describe_error(exc)
    return "TableNotFoundException" in text or "TableNotFound" in type(exc).__name__


def step_answers(exc: BaseException) -> dict[bytes, Refusal]:
    """Every row step's refusal named in an error or in the errors it was raised from."""
    out: dict[bytes, Refusal] = {}
    seen: set[int] = set()
    error: BaseException | None = exc
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        out.update(parse_refusals(describe_error(error)))
        error = error.__cause__ or error.__context__
    return out
