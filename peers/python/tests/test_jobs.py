"""Jobs (SPEC 7.16): request.idempotency_key on the wire; the peer's job API (start_job, attach_job, cancel_job,
list_jobs, idempotency_key= on call and stream, Stream.last_seq) against a scripted host, for what goes on the wire
and what a hostile host's answers do; and against the real Swift conformance host (countJob, --journal): the API end
to end, the blocking twin, 100 disconnect/reattach cycles that must deliver every progress exactly once in order, and
a host killed at random moments in 50 runs that must never lose a finished job's result nor run a job twice."""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

import zerobridge
from zerobridge import (
    BridgeCancelled,
    BridgeError,
    Interrupted,
    InvalidPayload,
    JobRecord,
    PeerLost,
    Suspended,
    UnknownJob,
    wire,
)
from zerobridge.errors import ERROR_CLASSES, ERROR_CODES

from conftest import JournaledHost

LONG = 10.0  # seconds: generous bounds for a loaded machine, never an assertion that something is fast


async def eventually(condition: Callable[[], bool], what: str, within: float = LONG) -> None:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within} s: {what}")
        await asyncio.sleep(0.01)


def frames_of(body: Any) -> list[bytes]:
    return [b"", json.dumps(body).encode()]


def refused(body: Any) -> wire.WireError:
    with pytest.raises(wire.WireError) as caught:
        wire.decode(frames_of(body))
    return caught.value


RECORD = {"job": "6f1c0a9e3b2d4c5e8f7a6b5c4d3e2f10", "action": "countJob", "state": "running", "last_seq": 0, "runs": 1,
          "created_ms": 1795430400000}


def response(request: dict[str, Any], result: Any) -> dict[str, Any]:
    return {"v": 1, "type": "response", "id": request["id"], "ok": True, "result": result}


def failure(request: dict[str, Any], code: str, message: str = "") -> dict[str, Any]:
    return {"v": 1, "type": "response", "id": request["id"], "ok": False, "error": {"code": code, "message": message}}


def progress(request: dict[str, Any], seq: int, payload: Any, **extra: Any) -> dict[str, Any]:
    return {"v": 1, "type": "progress", "id": request["id"], "seq": seq, "payload": payload, **extra}


# --- the wire ----------------------------------------------------------------------------------------------------


def test_request_idempotency_key_round_trips_and_is_absent_by_default() -> None:
    request = wire.Request("r1", "countJob", {"n": 3}, progress=True, idempotency_key="import-2026-11-24")
    body = json.loads(wire.encode(request)[1])
    assert body["idempotency_key"] == "import-2026-11-24"
    assert wire.decode(wire.encode(request)) == request
    plain = wire.Request("r2", "countJob")
    assert "idempotency_key" not in json.loads(wire.encode(plain)[1])
    assert wire.decode(frames_of({"v": 1, "type": "request", "id": "r2", "action": "countJob"})) == plain
    key = "\U0001F511" * 128  # 128 code points, 256 UTF-16 units (SPEC 1: characters are code points)
    decoded = wire.decode(frames_of({"v": 1, "type": "request", "id": "r3", "action": "a", "idempotency_key": key}))
    assert isinstance(decoded, wire.Request) and decoded.idempotency_key == key


@pytest.mark.parametrize("key", ["", "k" * 129, 7, None, True, ["k"], {"key": "k"}])
def test_an_idempotency_key_that_is_not_a_name_is_bad_message_with_the_id(key: Any) -> None:
    error = refused({"v": 1, "type": "request", "id": "r1", "action": "countJob", "idempotency_key": key})
    assert (error.code, error.id) == ("bad_message", "r1") and "idempotency_key" in error.message


def test_unknown_job_and_interrupted_are_error_codes_with_classes() -> None:
    assert {"unknown_job", "interrupted"} <= ERROR_CODES
    for code, cls in (("unknown_job", UnknownJob), ("interrupted", Interrupted)):
        error = zerobridge.error_from_code(code, "why", {"job": "j"})
        assert type(error) is cls and ERROR_CLASSES[code] is cls and isinstance(error, BridgeError)
        assert (error.code, error.message, error.data) == (code, "why", {"job": "j"})
        assert cls("m").to_wire() == {"code": code, "message": "m"}


# --- job records -------------------------------------------------------------------------------------------------


def test_a_job_record_mirrors_the_schema() -> None:
    record = JobRecord.from_json({**RECORD, "key": "k1", "created": True, "unknown": "ignored"})
    assert record == JobRecord(job=RECORD["job"], action="countJob", state="running", last_seq=0, runs=1,
                               created_ms=1795430400000, key="k1", created=True)
    assert not record.finished and record.finished_ms is None and record.error is None
    done = JobRecord.from_json({**RECORD, "state": "succeeded", "last_seq": 3, "finished_ms": 1795430400123})
    assert done.finished and done.finished_ms == 1795430400123 and done.created is None and done.key is None
    interrupted = JobRecord.from_json({**RECORD, "state": "interrupted", "runs": 1, "finished_ms": 1795430401000,
                                       "error": {"code": "interrupted", "message": "the host stopped", "data": [1]}})
    assert isinstance(interrupted.error, Interrupted) and interrupted.error.data == [1]
    with pytest.raises(AttributeError):
        record.state = "failed"  # type: ignore[misc]  # frozen


@pytest.mark.parametrize(
    ("record", "names"),
    [
        ("not a record", "an object"),
        ({**RECORD, "job": ""}, '"job"'),
        ({k: v for k, v in RECORD.items() if k != "job"}, '"job" is missing'),
        ({**RECORD, "action": 7}, '"action"'),
        ({**RECORD, "state": "sleeping"}, '"state"'),
        ({k: v for k, v in RECORD.items() if k != "state"}, '"state"'),
        ({**RECORD, "last_seq": -1}, '"last_seq"'),
        ({**RECORD, "last_seq": 1.5}, '"last_seq"'),
        ({**RECORD, "last_seq": True}, '"last_seq"'),
        ({**RECORD, "runs": 0}, '"runs"'),
        ({k: v for k, v in RECORD.items() if k != "created_ms"}, '"created_ms" is missing'),
        ({**RECORD, "key": "k" * 129}, '"key"'),
        ({**RECORD, "created": "yes"}, '"created"'),
        ({**RECORD, "finished_ms": 5}, 'a running job must not have "finished_ms"'),
        ({**RECORD, "error": {"code": "x", "message": ""}}, 'a running job must not have "error"'),
        ({**RECORD, "state": "succeeded"}, 'a succeeded job needs "finished_ms"'),
        ({**RECORD, "state": "succeeded", "finished_ms": 5, "error": {"code": "x", "message": ""}}, "must not have"),
        ({**RECORD, "state": "failed", "finished_ms": 5}, 'a failed job needs "error"'),
        ({**RECORD, "state": "failed", "finished_ms": 5, "error": None}, '"error" must be an object'),
        ({**RECORD, "state": "failed", "finished_ms": 5, "error": {"message": "m"}}, '"error.code"'),
        ({**RECORD, "state": "failed", "finished_ms": 5, "error": {"code": "x"}}, '"error.message"'),
        ({**RECORD, "state": "cancelled", "finished_ms": "5", "error": {"code": "cancelled", "message": ""}}, '"finished_ms"'),
    ],
)
def test_a_record_that_is_not_as_the_schema_says_is_refused_naming_the_field(record: Any, names: str) -> None:
    with pytest.raises(ValueError) as caught:
        JobRecord.from_json(record)
    assert names in str(caught.value)


# --- the API against a scripted host -----------------------------------------------------------------------------


async def test_call_and_stream_put_the_idempotency_key_on_the_request(fake_host: Any) -> None:
    async with fake_host() as host, zerobridge.connect(host.endpoint, name="p") as peer:
        pending = asyncio.ensure_future(peer.call("countJob", {"n": 2}, idempotency_key="nightly-import"))
        request = await host.next("request", action="countJob")
        assert request["idempotency_key"] == "nightly-import" and request["timeout_ms"] == 30000
        host.send(None, response(request, {"n": 2}))
        assert await pending == {"n": 2}

        async with peer.stream("countJob", {"n": 1}, idempotency_key="k2") as call:
            request = await host.next("request", action="countJob")
            assert request["idempotency_key"] == "k2" and request["progress"] is True
            host.send(None, progress(request, 1, {"i": 1, "n": 1}))
            host.send(None, response(request, {"n": 1}))
            assert [p async for p in call.progress] == [{"i": 1, "n": 1}] and call.last_seq == 1
            assert await call.result == {"n": 1}

        pending = asyncio.ensure_future(peer.call("echo", "no key"))
        request = await host.next("request", action="echo")
        assert "idempotency_key" not in request
        host.send(None, response(request, "no key"))
        assert await pending == "no key"


@pytest.mark.parametrize("key", ["", "k" * 129, 7, "lone \ud800"])
async def test_a_bad_idempotency_key_is_refused_before_anything_is_sent(fake_host: Any, key: Any) -> None:
    async with fake_host() as host, zerobridge.connect(host.endpoint, name="p") as peer:
        with pytest.raises(ValueError, match="idempotency_key"):
            await peer.call("countJob", None, idempotency_key=key)
        with pytest.raises(ValueError, match="idempotency_key"):
            async with peer.stream("countJob", None, idempotency_key=key):
                pass
        with pytest.raises(ValueError, match="key"):
            await peer.start_job("countJob", None, key=key)
        await peer.post("echo", "after")  # an event: what the host sees first after the hello
        await host.next("event", action="echo")
        assert host.bodies("request") == []


async def test_start_job_sends_job_start_and_returns_the_record(fake_host: Any) -> None:
    async with fake_host() as host, zerobridge.connect(host.endpoint, name="p") as peer:
        pending = asyncio.ensure_future(peer.start_job("countJob", {"n": 5}, key="k1"))
        request = await host.next("request", action="$job.start")
        assert request["payload"] == {"action": "countJob", "payload": {"n": 5}, "key": "k1"}
        assert request["timeout_ms"] == 30000 and "progress" not in request
        host.send(None, response(request, {**RECORD, "key": "k1", "created": True}))
        record = await pending
        assert record.job == RECORD["job"] and record.key == "k1" and record.created is True

        pending = asyncio.ensure_future(peer.start_job("countJob"))  # no payload, no key: neither member
        request = await host.next("request", action="$job.start")
        assert request["payload"] == {"action": "countJob"}
        host.send(None, failure(request, "invalid_payload", "countJob is not served as a job here"))
        with pytest.raises(InvalidPayload):
            await pending


@pytest.mark.parametrize("answer", [None, [], {"job": 7}, {**RECORD, "state": "done"}])
async def test_an_answer_that_is_not_a_job_record_is_bad_message(fake_host: Any, answer: Any) -> None:
    async with fake_host() as host, zerobridge.connect(host.endpoint, name="p") as peer:
        for start in (lambda: peer.start_job("countJob"), lambda: peer.cancel_job("j1")):
            pending = asyncio.ensure_future(start())
            request = await host.next("request")
            host.send(None, response(request, answer))
            with pytest.raises(BridgeError) as caught:
                await pending
            assert caught.value.code == "bad_message" and "not a job record" in caught.value.message


async def test_attach_job_streams_the_jobs_seq_after_after_seq_without_a_timeout(fake_host: Any) -> None:
    async with fake_host() as host, zerobridge.connect(host.endpoint, name="p") as peer:
        async with peer.attach_job("j1", after_seq=5) as call:
            request = await host.next("request", action="$job.attach")
            assert request["payload"] == {"job": "j1", "after_seq": 5} and request["progress"] is True
            # A job may run for hours: an attach waits for its end (SPEC 7.16), so it carries no deadline.
            assert "timeout_ms" not in request and "deadline" not in request
            assert call.last_seq == 5  # nothing read yet: attaching again after 5 loses nothing
            host.send(None, progress(request, 5, "already seen"))  # not above after_seq: dropped (SPEC 7.2)
            for seq in (6, 7, 8):
                host.send(None, progress(request, seq, {"i": seq}))
            reader = call.progress
            assert await reader.__anext__() == {"i": 6} and call.last_seq == 6
            # Progress that arrived but was not taken yet does not count: last_seq is what this reader has seen.
            await eventually(lambda: call._started()._arrived_seq == 8, "seq 8 arrives")
            assert call.last_seq == 6
            host.send(None, progress(request, 10, {"i": 10}, skipped=1))  # the journal no longer held seq 9
            host.send(None, response(request, {"n": 10}))
            assert [p async for p in reader] == [{"i": 7}, {"i": 8}, {"i": 10}]
            assert call.last_seq == 10 and call.skipped == 1
            assert await call.result == {"n": 10}

        record = JobRecord.from_json(RECORD)
        async with peer.attach_job(record) as by_record, peer.attach_job(action="countJob", key="k1") as by_key:
            assert (await host.next("request", action="$job.attach"))["payload"] == {"job": RECORD["job"], "after_seq": 0}
            assert (await host.next("request", action="$job.attach"))["payload"] == {
                "action": "countJob", "key": "k1", "after_seq": 0}
            assert by_record.last_seq == by_key.last_seq == 0
        # Left before their end: each is cancelled (detached), the first one, which ended, is not.
        await eventually(lambda: len(host.bodies("cancel")) == 2, "two cancels")
        assert {cancel["id"] for cancel in host.bodies("cancel")} == {by_record.id, by_key.id}


async def test_leaving_an_attach_early_only_detaches(fake_host: Any) -> None:
    async with fake_host() as host, zerobridge.connect(host.endpoint, name="p") as peer:
        async with peer.attach_job(action="countJob", key="k1", timeout=60) as call:
            request = await host.next("request", action="$job.attach")
            assert request["timeout_ms"] == 60000
            host.send(None, progress(request, 1, {"i": 1}))
            async for _ in call.progress:
                break
        # The attach request is cancelled (the host answers it and the job runs on); the job itself is not.
        assert (await host.next("cancel"))["id"] == request["id"]
        await peer.post("echo", "after")
        await host.next("event", action="echo")
        assert [r["action"] for r in host.bodies("request")] == ["$job.attach"]  # no $job.cancel
        with pytest.raises(BridgeCancelled):
            await call.result


async def test_unknown_job_and_interrupted_reach_the_caller_as_their_classes(fake_host: Any) -> None:
    async with fake_host() as host, zerobridge.connect(host.endpoint, name="p") as peer:
        async with peer.attach_job("gone") as call:
            request = await host.next("request", action="$job.attach")
            host.send(None, failure(request, "unknown_job", "no job 'gone'"))
            with pytest.raises(UnknownJob) as caught:
                await call.result
            assert caught.value.code == "unknown_job" and caught.value.message == "no job 'gone'"
        pending = asyncio.ensure_future(peer.call("countJob", {"n": 1}, idempotency_key="before-restart"))
        request = await host.next("request", action="countJob")
        host.send(None, failure(request, "interrupted", "the host stopped while the job ran"))
        with pytest.raises(Interrupted) as interrupted:
            await pending
        assert interrupted.value.code == "interrupted"
        pending = asyncio.ensure_future(peer.cancel_job("gone"))
        host.send(None, failure(await host.next("request", action="$job.cancel"), "unknown_job", "no job 'gone'"))
        with pytest.raises(UnknownJob):
            await pending


async def test_cancel_job_and_list_jobs_send_their_payloads_and_read_records(fake_host: Any) -> None:
    async with fake_host() as host, zerobridge.connect(host.endpoint, name="p") as peer:
        cancelled = {**RECORD, "state": "cancelled", "finished_ms": 1795430400500,
                     "error": {"code": "cancelled", "message": "the job was cancelled"}}
        pending = asyncio.ensure_future(peer.cancel_job(action="countJob", key="k1"))
        request = await host.next("request", action="$job.cancel")
        assert request["payload"] == {"action": "countJob", "key": "k1"}
        host.send(None, response(request, cancelled))
        record = await pending
        assert record.state == "cancelled" and isinstance(record.error, BridgeCancelled)

        pending_list = asyncio.ensure_future(peer.list_jobs(action="countJob", state="running", job=record, limit=7))
        request = await host.next("request", action="$job.list")
        assert request["payload"] == {"action": "countJob", "state": "running", "job": RECORD["job"], "limit": 7}
        host.send(None, response(request, {"jobs": [RECORD, cancelled], "more": "ignored"}))
        assert [r.state for r in await pending_list] == ["running", "cancelled"]

        pending_list = asyncio.ensure_future(peer.list_jobs())
        request = await host.next("request", action="$job.list")
        assert request["payload"] == {"limit": 100}
        host.send(None, response(request, {"jobs": [RECORD, {**RECORD, "runs": 0}]}))
        with pytest.raises(BridgeError) as caught:
            await pending_list
        assert caught.value.code == "bad_message" and 'jobs[1]: "runs"' in caught.value.message


async def test_bad_job_arguments_are_refused_before_anything_is_sent(fake_host: Any) -> None:
    async with fake_host() as host, zerobridge.connect(host.endpoint, name="p") as peer:
        for bad in (
            lambda: peer.attach_job(),
            lambda: peer.attach_job("j1", action="countJob", key="k"),
            lambda: peer.attach_job(action="countJob"),
            lambda: peer.attach_job(key="k"),
            lambda: peer.attach_job(""),
            lambda: peer.attach_job("j1", after_seq=-1),
            lambda: peer.attach_job("j1", after_seq=True),
            lambda: peer.attach_job("j1", after_seq="3"),  # type: ignore[arg-type]
        ):
            with pytest.raises(ValueError):
                bad()
        for bad_call in (
            lambda: peer.cancel_job(),
            lambda: peer.cancel_job("j1", key="k"),
            lambda: peer.list_jobs(state="sleeping"),  # type: ignore[arg-type]
            lambda: peer.list_jobs(limit=0),
            lambda: peer.list_jobs(limit=1001),
            lambda: peer.list_jobs(action=""),
            lambda: peer.start_job(""),
        ):
            with pytest.raises(ValueError):
                await bad_call()
        await peer.post("echo", "after")
        await host.next("event", action="echo")
        assert host.bodies("request") == []


async def test_a_lost_host_ends_an_attach_with_peer_lost(fake_host: Any) -> None:
    async with fake_host(heartbeat_ms=100) as host, zerobridge.connect(host.endpoint, name="p") as peer:
        async with peer.attach_job("j1") as call:
            request = await host.next("request", action="$job.attach")
            host.send(None, progress(request, 1, {"i": 1}))
            host.silent = True  # no pongs, no answers: lost after 3 x 100 ms
            with pytest.raises(PeerLost):
                async for _ in call.progress:
                    pass
            assert call.last_seq == 1  # where a new attach goes on from


# --- against the real conformance host ---------------------------------------------------------------------------


# One progress iterator per call, held for the whole test: an iterator dropped before its call ends (leaving an
# ``async for`` early) cancels the call, and take() stops after ``count`` on purpose.
_readers: dict[int, tuple[Any, AsyncIterator[Any]]] = {}


async def take(call: Any, count: int | None = None) -> list[tuple[int, Any]]:
    """(seq, payload) of the next ``count`` progress payloads of ``call`` (all of them when None)."""
    _, reader = _readers.setdefault(id(call), (call, call.progress))
    taken: list[tuple[int, Any]] = []
    async for payload in reader:
        taken.append((call.last_seq, payload))
        if count is not None and len(taken) == count:
            break
    return taken


def counted(n: int, first: int = 1) -> list[tuple[int, Any]]:
    """What countJob {n} reports from seq ``first`` on: seq k carries {"i": k, "n": n}."""
    return [(k, {"i": k, "n": n}) for k in range(first, n + 1)]


async def test_start_attach_list_and_records_end_to_end(host: Any) -> None:
    async with zerobridge.connect(host.endpoint, name="py-jobs") as peer:
        before = int(time.time() * 1000)
        record = await peer.start_job("countJob", {"n": 4, "delay_ms": 5})
        assert record.action == "countJob" and record.created is True and record.runs == 1 and record.key is None
        assert len(record.job) == 32 and record.state in ("running", "succeeded")
        assert before - 60_000 <= record.created_ms <= int(time.time() * 1000) + 60_000  # the host's clock is ours
        async with peer.attach_job(record) as call:
            assert await take(call) == counted(4)
            assert await call.result == {"n": 4}
        async with peer.attach_job(record.job, after_seq=2) as call:
            assert await take(call) == counted(4, first=3)  # a finished job: only what follows after_seq
            assert await call.result == {"n": 4}
        (listed,) = await peer.list_jobs(job=record)
        assert listed.job == record.job and listed.state == "succeeded" and listed.last_seq == 4 and listed.runs == 1
        assert listed.finished and listed.finished_ms is not None and listed.finished_ms >= listed.created_ms
        assert listed.error is None and listed.created is None
        assert listed.job in [r.job for r in await peer.list_jobs(action="countJob", state="succeeded", limit=1000)]
        assert await peer.list_jobs(action="countJob", state="failed", job=record) == []

        with pytest.raises(InvalidPayload):
            await peer.start_job("echo", "not a job")  # echo is not served as a job


async def test_an_idempotency_key_names_one_job_through_call_stream_start_and_attach(host: Any) -> None:
    key = f"py-key-{random.getrandbits(64):x}"  # the session host outlives this test: a key of its own
    async with zerobridge.connect(host.endpoint, name="py-jobs-key") as peer:
        async with peer.stream("countJob", {"n": 3}, idempotency_key=key) as call:
            assert await take(call) == counted(3)
            assert await call.result == {"n": 3}
        # Retried with the key (and another payload, which is not compared): the same job, its progress and result.
        async with peer.stream("countJob", {"n": 50}, idempotency_key=key) as again:
            assert await take(again) == counted(3)
            assert await again.result == {"n": 3}
        assert await peer.call("countJob", {"n": 50}, idempotency_key=key) == {"n": 3}
        found = await peer.start_job("countJob", {"n": 50}, key=key)
        assert found.created is False and found.key == key and found.state == "succeeded" and found.runs == 1
        async with peer.attach_job(action="countJob", key=key, after_seq=1) as by_key:
            assert await take(by_key) == counted(3, first=2)
            assert await by_key.result == {"n": 3}
        assert [r.job for r in await peer.list_jobs(action="countJob", limit=1000) if r.key == key] == [found.job]


async def test_unknown_jobs_are_unknown_job(host: Any) -> None:
    async with zerobridge.connect(host.endpoint, name="py-jobs-unknown") as peer:
        with pytest.raises(UnknownJob) as caught:
            async with peer.attach_job("no-such-job") as call:
                await call.result
        assert caught.value.code == "unknown_job"
        with pytest.raises(UnknownJob):
            await peer.cancel_job("no-such-job")
        with pytest.raises(UnknownJob):
            await peer.cancel_job(action="countJob", key="a key never used for anything")


async def test_cancel_job_ends_it_for_every_attached_caller_but_detaching_does_not(host: Any) -> None:
    async with zerobridge.connect(host.endpoint, name="py-jobs-cancel") as peer:
        record = await peer.start_job("countJob", {"n": 100000, "delay_ms": 20})
        async with peer.attach_job(record) as first:
            assert await take(first, 1) == [(1, {"i": 1, "n": 100000})]
        with pytest.raises(BridgeCancelled):
            await first.result  # this caller detached
        (listed,) = await peer.list_jobs(job=record)
        assert listed.state == "running"  # and the job runs on

        async with peer.attach_job(record, after_seq=listed.last_seq) as attached:
            cancelled = await peer.cancel_job(record)
            assert cancelled.state == "cancelled" and isinstance(cancelled.error, BridgeCancelled)
            assert cancelled.finished_ms is not None
            with pytest.raises(BridgeCancelled):
                await attached.result
        assert (await peer.cancel_job(record)).state == "cancelled"  # cancelling it again changes nothing
        (listed,) = await peer.list_jobs(job=record)
        assert listed.state == "cancelled" and listed.error is not None and listed.error.code == "cancelled"


async def test_a_job_without_checkpoint_is_interrupted_by_a_host_killed_under_it(
    journaled_host: Callable[..., JournaledHost],
) -> None:
    host = journaled_host()
    async with zerobridge.connect(host.endpoint, name="py-jobs-kill") as peer:
        record = await peer.start_job("countJob", {"n": 100000, "delay_ms": 10}, key="killed-under-it")
        async with peer.attach_job(record) as call:
            seen = await take(call, 3)
            host.kill()
    host.start()
    async with zerobridge.connect(host.endpoint, name="py-jobs-kill") as peer:
        (listed,) = await peer.list_jobs(job=record)
        assert listed.state == "interrupted" and listed.runs == 1 and listed.last_seq >= 3
        assert isinstance(listed.error, Interrupted)
        async with peer.attach_job(record) as call:  # what a caller saw, it can see again; then the outcome
            replayed = await take(call, listed.last_seq)
            assert replayed[:3] == seen and replayed == counted(100000)[: listed.last_seq]
            with pytest.raises(Interrupted):
                await call.result
        with pytest.raises(Interrupted):  # a retry with its key attaches to it: not a second run
            await peer.call("countJob", {"n": 1}, idempotency_key="killed-under-it")


def test_the_blocking_twin_has_the_job_api(host: Any) -> None:
    key = f"py-sync-{random.getrandbits(64):x}"
    with zerobridge.connect_sync(host.endpoint, name="py-jobs-sync") as peer:
        record = peer.start_job("countJob", {"n": 3}, key=key)
        assert record.created is True and record.key == key
        with peer.attach_job(action="countJob", key=key) as call:
            seen = []
            for payload in call.progress:
                seen.append((call.last_seq, payload))
            assert seen == counted(3) and call.result == {"n": 3} and call.last_seq == 3
        assert peer.call("countJob", {"n": 9}, idempotency_key=key) == {"n": 3}
        with peer.stream("countJob", {"n": 9}, idempotency_key=key) as again:
            assert list(again.progress) == [p for _, p in counted(3)] and again.last_seq == 3
        assert [r.job for r in peer.list_jobs(job=record.job)] == [record.job]
        long = peer.start_job("countJob", {"n": 100000, "delay_ms": 20})
        assert peer.cancel_job(long).state == "cancelled"
        with pytest.raises(UnknownJob):
            peer.cancel_job("no-such-job")


# --- the targets -----------------------------------------------------------------------------------------


async def vanish(peer: zerobridge.Peer) -> None:
    """As if the peer's process died: its connection closes with nothing more said, no cancel and no bye (the host
    learns of it from the transport, and keeps the session for its heartbeat's worth)."""
    await peer._close_socket(linger_ms=0)
    await peer.close()  # the socket is gone already: what close() would say goes nowhere


REATTACH_CYCLES = 100
REATTACH_N = 3000


@pytest.mark.async_timeout(240)
async def test_attaching_after_each_of_100_disconnects_delivers_every_progress_exactly_once_in_order(
    journaled_host: Callable[..., JournaledHost],
) -> None:
    host = journaled_host()
    rng = random.Random(16)
    async with zerobridge.connect(host.endpoint, name="reattach-starter") as starter:
        # At least 12 s of work: most cycles attach while it runs (journal then live), the rest replay the journal.
        record = await starter.start_job("countJob", {"n": REATTACH_N, "delay_ms": 4}, key="reattach-100")
    seen: list[tuple[int, Any]] = []
    endings = {"left the block": 0, "closed the peer": 0, "vanished": 0}
    for cycle in range(REATTACH_CYCLES):
        # A fresh session every time. Keys are per owner (SPEC 7.16): the cycles that attach by the job's key are the
        # starter started again under its name (and never vanish, which would hold the name for a heartbeat's worth);
        # the others prove ownership by the job's id under names of their own.
        by_key = cycle % 3 == 2
        peer = await zerobridge.connect(host.endpoint, name="reattach-starter" if by_key else f"reattach-{cycle}")
        after = seen[-1][0] if seen else 0
        # By id, by record, or by action and key: all name the one job.
        attach = (
            peer.attach_job(record.job, after_seq=after),
            peer.attach_job(record, after_seq=after),
            peer.attach_job(action="countJob", key="reattach-100", after_seq=after),
        )[cycle % 3]
        ending = rng.choice([name for name in endings if not (by_key and name == "vanished")])
        async with attach as call:
            taken = await take(call, rng.randint(1, 6))
            assert call.last_seq == taken[-1][0]
            if ending == "closed the peer":
                await peer.close()  # bye: the host ends the session and discards the attach
            elif ending == "vanished":
                await vanish(peer)
        # "left the block": the attach is cancelled, the host answers it and the job runs on.
        await peer.close()
        endings[ending] += 1
        seen += taken
    assert all(count > 0 for count in endings.values()), endings
    async with zerobridge.connect(host.endpoint, name="reattach-last") as peer:
        async with peer.attach_job(record, after_seq=seen[-1][0]) as call:
            seen += await take(call)
            assert await call.result == {"n": REATTACH_N}
            assert call.skipped == 0
        # Its record, through the id that proves ownership (another owner's list_jobs would not show it): cancelling
        # a finished job changes nothing and answers with its record.
        listed = await peer.cancel_job(record)
    assert listed.state == "succeeded" and listed.runs == 1 and listed.last_seq == REATTACH_N
    # Every payload exactly once, in order, each with its own seq, across 100 sessions that ended three ways.
    assert [payload["i"] for _, payload in seen] == list(range(1, REATTACH_N + 1))
    assert seen == counted(REATTACH_N)


KILL_RUNS = 50
SHORT_N = 3
LONG_N = 1000
CHECKPOINTED_N = 12


@dataclass
class Tracked:
    """What the test knows of one job of the kill runs, from what it received before each kill."""

    key: str
    n: int
    checkpoint: bool
    job: str | None = None  # the id, once a $job.start was answered
    result: Any = None  # the result, once one was received
    seen: dict[int, Any] = field(default_factory=dict)  # seq -> payload, as received live by attached callers
    interrupted: bool = False  # an attach after a restart answered interrupted

    @property
    def acknowledged(self) -> bool:
        """Whether the host said it has the job (a record or a result arrived): its key must name it for good."""
        return self.job is not None or self.result is not None


async def follow(peer: zerobridge.Peer, tracked: Tracked) -> None:
    """Attach to a job from its start and note every progress payload and the result that arrive before the kill."""
    async with peer.attach_job(action="countJob", key=tracked.key) as call:
        try:
            async for payload in call.progress:
                tracked.seen.setdefault(call.last_seq, payload)
                assert tracked.seen[call.last_seq] == payload, f"{tracked.key}: seq {call.last_seq} changed"
            tracked.result = await call.result
        except Interrupted:
            tracked.interrupted = True  # judged at the end: only a job killed before its first checkpoint may be


async def run_until_killed(peer: zerobridge.Peer, run: int, rng: random.Random, jobs: list[Tracked]) -> list[Any]:
    """Start this run's jobs and follow the unfinished checkpointed ones; return their tasks (the host is killed
    under them by the caller)."""

    async def short(tracked: Tracked) -> None:
        tracked.result = await peer.call("countJob", {"n": tracked.n, "delay_ms": rng.choice([0, 5, 20])},
                                         idempotency_key=tracked.key)

    async def started(tracked: Tracked, payload: dict[str, Any]) -> None:
        record = await peer.start_job("countJob", payload, key=tracked.key)
        assert record.key == tracked.key and record.created is True
        tracked.job = record.job
        await follow(peer, tracked)

    tasks = []
    for index in range(2):
        tracked = Tracked(f"run{run}-short{index}", SHORT_N, checkpoint=False)
        jobs.append(tracked)
        tasks.append(asyncio.ensure_future(short(tracked)))
    long = Tracked(f"run{run}-long", LONG_N, checkpoint=False)
    checkpointed = Tracked(f"run{run}-checkpointed", CHECKPOINTED_N, checkpoint=True)
    jobs += [long, checkpointed]
    tasks.append(asyncio.ensure_future(started(long, {"n": LONG_N, "delay_ms": 10})))
    tasks.append(asyncio.ensure_future(started(checkpointed, {"n": CHECKPOINTED_N, "delay_ms": 15, "checkpoint": True})))
    # Earlier checkpointed jobs resumed by this start: follow them too (their progress goes on from the journal's).
    for earlier in jobs:
        unfinished = earlier.result is None and not earlier.interrupted
        if earlier.checkpoint and earlier.acknowledged and unfinished and earlier is not checkpointed:
            tasks.append(asyncio.ensure_future(follow(peer, earlier)))
    return tasks


@pytest.mark.async_timeout(240)
async def test_a_host_killed_at_random_moments_never_loses_a_result_nor_runs_a_job_twice(
    journaled_host: Callable[..., JournaledHost],
) -> None:
    host = journaled_host()
    rng = random.Random(1604)
    jobs: list[Tracked] = []
    for run in range(KILL_RUNS):
        if run > 0:
            host.start()  # on the same journal: running jobs are interrupted, or resumed from their checkpoint
        # One front-end started again after each kill, under its name: its jobs and keys are its own (SPEC 7.16).
        peer = await zerobridge.connect(host.endpoint, name="kill-client")
        tasks = await run_until_killed(peer, run, rng, jobs)
        await asyncio.sleep(rng.uniform(0.0, 0.25))  # the deliberate random moment of the kill
        host.kill()
        await peer.close()  # what was in flight fails with PeerLost: the outcomes this run saw are recorded
        for outcome in await asyncio.gather(*tasks, return_exceptions=True):
            if isinstance(outcome, BaseException) and not isinstance(outcome, (PeerLost, BridgeCancelled)):
                raise outcome  # any other failure (a wrong assertion in follow(), an unexpected error) is the test's
    host.start()
    async with zerobridge.connect(host.endpoint, name="kill-client") as peer:
        records = {r.key: r for r in await peer.list_jobs(action="countJob", limit=1000)}
        assert len(records) <= 4 * KILL_RUNS
        for tracked in jobs:
            record = records.get(tracked.key)
            if record is None:
                assert not tracked.acknowledged, f"{tracked.key}: acknowledged, then lost by a kill"
                continue
            if tracked.job is not None:
                assert record.job == tracked.job
            # A key names its job for good: retrying it starts nothing.
            retried = await peer.start_job("countJob", {"n": 1}, key=tracked.key)
            assert retried.created is False and retried.job == record.job, tracked.key
            if not tracked.checkpoint:
                # Never run twice: a job without a checkpoint ran once, and a restart left it interrupted if unfinished.
                assert record.runs == 1 and record.state in ("succeeded", "interrupted"), record
            if tracked.result is not None:
                # A result seen is never lost: the job is succeeded, and attaching (here through its key) returns it.
                assert record.state == "succeeded", record
                assert await peer.call("countJob", {"n": 1}, idempotency_key=tracked.key) == tracked.result
            assert not tracked.interrupted or record.state == "interrupted", record
            if record.state == "interrupted":
                assert isinstance(record.error, Interrupted)
                if tracked.checkpoint:  # killed before its first checkpoint: there was nothing to resume from
                    assert record.last_seq == 0 and record.runs == 1, record

        checkpointed = [t for t in jobs if t.checkpoint and t.key in records and records[t.key].state != "interrupted"]
        assert len(checkpointed) >= KILL_RUNS // 2, "too few checkpointed jobs got a checkpoint before a kill to judge"
        assert any(records[t.key].runs > 1 for t in checkpointed), "no checkpointed job was ever resumed"
        for tracked in checkpointed:
            # Resumed across restarts until done: from the journal, every progress exactly once and in order, and
            # what callers received live along the way is what the journal says.
            async with peer.attach_job(action="countJob", key=tracked.key) as call:
                replayed = await take(call)
                assert replayed == counted(CHECKPOINTED_N), tracked.key
                assert await call.result == {"n": CHECKPOINTED_N}
            assert all(tracked.seen[seq] == payload for seq, payload in replayed if seq in tracked.seen), tracked.key
            assert set(tracked.seen) <= set(range(1, CHECKPOINTED_N + 1))
        for tracked in jobs:
            if not tracked.checkpoint and tracked.seen:  # the long plain jobs: what was seen live is in the journal
                record = records[tracked.key]
                assert max(tracked.seen) <= record.last_seq
                assert all(payload == {"i": seq, "n": tracked.n} for seq, payload in tracked.seen.items())
        results_seen = sum(t.result is not None for t in jobs)
        assert results_seen >= KILL_RUNS // 2, f"only {results_seen} results arrived before kills: nothing to judge"


async def test_a_graceful_stop_tells_a_checkpointed_jobs_caller_suspended_and_the_next_start_resumes_it(
    journaled_host: Callable[..., JournaledHost],
) -> None:
    """SPEC 7.16 (1.6): `interrupted` only for a job that will not run again; a checkpointed one cut by SIGTERM is
    `suspended`, and its next start resumes it."""
    host = journaled_host()
    async with zerobridge.connect(host.endpoint, name="suspend-client") as peer:
        resumable = peer.stream("countJob", {"n": 1000, "delay_ms": 50, "checkpoint": True}, idempotency_key="resumable")
        plain = peer.stream("countJob", {"n": 1000, "delay_ms": 50}, idempotency_key="plain")
        async with resumable as checkpointed, plain as unchecked:
            await take(checkpointed, 1)
            await take(unchecked, 1)
            stopping = asyncio.create_task(asyncio.to_thread(host.stop))  # SIGTERM: a graceful shutdown
            with pytest.raises(Suspended):
                await checkpointed.result
            with pytest.raises(Interrupted):
                await unchecked.result
            await stopping
    host.start()
    async with zerobridge.connect(host.endpoint, name="suspend-client") as peer:
        records = {record.key: record for record in await peer.list_jobs(action="countJob")}
        assert records["resumable"].state == "running" and records["resumable"].runs == 2, records["resumable"]
        assert records["plain"].state == "interrupted" and records["plain"].runs == 1, records["plain"]
        await peer.cancel_job(records["resumable"])


async def test_a_job_is_its_starters_another_peer_neither_lists_nor_reaches_it_by_key(
    journaled_host: Callable[..., JournaledHost],
) -> None:
    """SPEC 7.16 (1.6): keys are per owner and $job.list lists the caller's own jobs; the id proves ownership."""
    host = journaled_host()
    async with (
        zerobridge.connect(host.endpoint, name="owner-alice") as alice,
        zerobridge.connect(host.endpoint, name="owner-bob") as bob,
    ):
        started = await alice.start_job("countJob", {"n": 100000, "delay_ms": 20}, key="mine")
        assert await bob.list_jobs() == []
        with pytest.raises(UnknownJob):
            await bob.cancel_job(action="countJob", key="mine")
        with pytest.raises(UnknownJob):
            async with bob.attach_job(action="countJob", key="mine") as call:
                await call.result
        own = await bob.start_job("countJob", {"n": 1}, key="mine")
        assert own.created and own.job != started.job
        assert [record.job for record in await alice.list_jobs()] == [started.job]
        assert (await alice.cancel_job(action="countJob", key="mine")).state == "cancelled"
