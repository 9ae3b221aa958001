"""Jobs (SPEC 7.16): the job record, and the payloads of the host's reserved job actions.

A host may serve an action as a **job**: work journaled by the host that outlives the request and the session that
started it. The peer reaches jobs through four reserved actions, ``$job.start``, ``$job.attach``, ``$job.cancel`` and
``$job.list``; :class:`~zerobridge.peer.Peer` wraps them (``start_job``, ``attach_job``, ``cancel_job``,
``list_jobs``). This module holds the pure parts: what those requests carry, and :class:`JobRecord`, what the host
answers about a job (``schema/job.schema.json``), read strictly. Nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypeGuard, cast, get_args

from . import wire
from .errors import BridgeError, error_from_code
from .link import check_name

JobState = Literal["running", "suspended", "succeeded", "failed", "cancelled", "interrupted"]
"""``job.state`` (SPEC 7.16): ``running`` (or ``suspended``: a graceful stop cut it and the host's next start resumes
it), then one of the four final states."""
JOB_STATES: frozenset[str] = frozenset(get_args(JobState))
# The states that carry an error (and, like succeeded, a finished_ms); the others are not final.
_FAILED_STATES = frozenset({"failed", "cancelled", "interrupted"})
_UNFINISHED_STATES = frozenset({"running", "suspended"})

START = "$job.start"
ATTACH = "$job.attach"
CANCEL = "$job.cancel"
LIST = "$job.list"

DEFAULT_LIST_LIMIT = 100
MAX_LIST_LIMIT = 1000


@dataclass(frozen=True, slots=True)
class JobRecord:
    """What the host says about one job (SPEC 7.16, ``schema/job.schema.json``): ``$job.start``, ``$job.cancel`` and
    ``$job.list`` answer with records. A record never carries the job's result: attaching does.

    For example::

        record = await peer.start_job("importFile", {"path": "/data"}, key="import-2026-11-24")
        record.job, record.state, record.created    # 'a3f0...', 'running', True

    - ``job``: its id, chosen by the host, never reused. ``action``: the action it runs. ``key``: its idempotency key,
      when it was started with one.
    - ``state``: ``running``, ``suspended`` (a graceful stop cut it; it resumes from its checkpoint at the host's next
      start), or one of the final ``succeeded``, ``failed``, ``cancelled``, ``interrupted``.
    - ``last_seq``: the ``seq`` of its latest progress (0: none yet). ``runs``: how many times its handler was
      started (more than 1 only for a job resumed from a checkpoint after a host restart).
    - ``created_ms``, ``finished_ms`` (final states only): Unix time in milliseconds.
    - ``error``: in ``failed``, ``cancelled`` and ``interrupted``, why, as the :class:`BridgeError` subclass of its code
      (``Interrupted``, ``BridgeCancelled``, ...). Records compare equal without looking at it.
    - ``created``: from ``start_job`` only: True when this call started the job, False when its key named an existing
      one; None on records from ``cancel_job`` and ``list_jobs``.
    """

    job: str
    action: str
    state: JobState
    last_seq: int
    runs: int
    created_ms: int
    key: str | None = None
    finished_ms: int | None = None
    error: BridgeError | None = field(default=None, compare=False)  # exceptions compare by identity
    created: bool | None = None

    @property
    def finished(self) -> bool:
        """Whether the job is in a final state (it will not run again)."""
        return self.state not in _UNFINISHED_STATES

    @classmethod
    def from_json(cls, value: Any) -> JobRecord:
        """A record from its JSON object (unknown members ignored); ValueError naming the first member that is not as
        the schema says."""
        if not isinstance(value, dict):
            raise ValueError(f"a job record is an object, not {_kind(value)}")
        state = value.get("state")
        if state not in JOB_STATES:
            raise ValueError(f'"state" must be one of {", ".join(sorted(JOB_STATES))}, not {_short(state)}')
        finished_ms = _optional(value, "finished_ms", _is_count, "an integer >= 0")
        if (state in _UNFINISHED_STATES) != (finished_ms is None):
            raise ValueError(f'a {state} job {"must not have" if state in _UNFINISHED_STATES else "needs"} "finished_ms"')
        if (state in _FAILED_STATES) != ("error" in value):
            raise ValueError(f'a {state} job {"needs" if state in _FAILED_STATES else "must not have"} "error"')
        return cls(
            job=_required(value, "job", _is_name, "a string of 1..128 characters"),
            action=_required(value, "action", _is_name, "a string of 1..128 characters"),
            state=cast(JobState, state),
            last_seq=_required(value, "last_seq", _is_count, "an integer >= 0"),
            runs=_required(value, "runs", _is_positive, "an integer >= 1"),
            created_ms=_required(value, "created_ms", _is_count, "an integer >= 0"),
            key=_optional(value, "key", _is_name, "a string of 1..128 characters"),
            finished_ms=finished_ms,
            error=_error(value["error"]) if "error" in value else None,
            created=_optional(value, "created", _is_bool, "a boolean"),
        )


def start_payload(action: str, payload: Any, key: str | None) -> dict[str, Any]:
    """The payload of ``$job.start``: ``{"action", "payload"?, "key"?}``."""
    body: dict[str, Any] = {"action": check_name(action, "action")}
    if payload is not None:  # absent and null are the same to the host
        body["payload"] = payload
    if key is not None:
        body["key"] = check_name(key, "key")
    return body


def job_reference(job: str | JobRecord | None, action: str | None, key: str | None) -> dict[str, Any]:
    """How ``$job.attach`` and ``$job.cancel`` name a job: ``{"job": id}`` or ``{"action": name, "key": key}``.
    ValueError unless exactly one of the two forms is given."""
    if job is not None:
        if action is not None or key is not None:
            raise ValueError("name a job by its id (job=) or by action= and key=, not both")
        job_id = job.job if isinstance(job, JobRecord) else job
        return {"job": check_name(job_id, "job")}
    if action is None or key is None:
        raise ValueError("name a job by its id (job=), or by both action= and key= (its idempotency key)")
    return {"action": check_name(action, "action"), "key": check_name(key, "key")}


def attach_payload(reference: dict[str, Any], after_seq: int) -> dict[str, Any]:
    """The payload of ``$job.attach``: a :func:`job_reference` and ``after_seq``."""
    if not _is_count(after_seq):
        raise ValueError(f"after_seq must be an integer >= 0, not {after_seq!r}")
    return {**reference, "after_seq": after_seq}


def list_payload(action: str | None, state: str | None, job: str | JobRecord | None, limit: int) -> dict[str, Any]:
    """The payload of ``$job.list``: the filters given, and ``limit`` (1..1000)."""
    body: dict[str, Any] = {}
    if action is not None:
        body["action"] = check_name(action, "action")
    if state is not None:
        if state not in JOB_STATES:
            raise ValueError(f"state must be one of {', '.join(sorted(JOB_STATES))}, not {state!r}")
        body["state"] = state
    if job is not None:
        body["job"] = check_name(job.job if isinstance(job, JobRecord) else job, "job")
    if not (_is_positive(limit) and limit <= MAX_LIST_LIMIT):
        raise ValueError(f"limit must be an integer in 1..{MAX_LIST_LIMIT}, not {limit!r}")
    body["limit"] = limit
    return body


def records_of_list(result: Any) -> list[JobRecord]:
    """The records of a ``$job.list`` result ``{"jobs": [record, ...]}``, in the host's order (newest first);
    ValueError naming the first one that is not a record."""
    if not isinstance(result, dict) or not isinstance(result.get("jobs"), list):
        raise ValueError(f'the result is {{"jobs": [record, ...]}}, not {_short(result)}')
    records = []
    for index, item in enumerate(result["jobs"]):
        try:
            records.append(JobRecord.from_json(item))
        except ValueError as error:
            raise ValueError(f"jobs[{index}]: {error}") from None
    return records


def _required(value: dict[str, Any], name: str, valid: Any, what: str) -> Any:
    if name not in value:
        raise ValueError(f'"{name}" is missing')
    return _optional(value, name, valid, what)


def _optional(value: dict[str, Any], name: str, valid: Any, what: str) -> Any:
    if name not in value:
        return None
    item = value[name]
    if not valid(item):
        raise ValueError(f'"{name}" must be {what}, not {_short(item)}')
    return item


def _error(value: Any) -> BridgeError:
    if not isinstance(value, dict):
        raise ValueError(f'"error" must be an object, not {_short(value)}')
    code, message = value.get("code"), value.get("message")
    if not _is_name(code):
        raise ValueError(f'"error.code" must be a string of 1..128 characters, not {_short(code)}')
    if not isinstance(message, str):
        raise ValueError(f'"error.message" must be a string, not {_short(message)}')
    return error_from_code(code, message, value.get("data"))


def _is_name(value: Any) -> TypeGuard[str]:
    return isinstance(value, str) and 1 <= len(value) <= wire.MAX_ID_LENGTH


def _is_count(value: Any) -> TypeGuard[int]:
    return type(value) is int and value >= 0  # bool is an int subclass but not a protocol integer


def _is_positive(value: Any) -> TypeGuard[int]:
    return type(value) is int and value >= 1


def _is_bool(value: Any) -> TypeGuard[bool]:
    return isinstance(value, bool)


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


__all__ = [
    "DEFAULT_LIST_LIMIT",
    "JOB_STATES",
    "JobRecord",
    "JobState",
    "MAX_LIST_LIMIT",
    "attach_payload",
    "job_reference",
    "list_payload",
    "records_of_list",
    "start_payload",
]
