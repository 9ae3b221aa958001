"""`zerobridge types --python`: the client generated from a live conformance host passes `mypy --strict`, catches
wrong payloads and misused results, imports, and calls every conformance action through a real peer (SPEC 7.8).
Action and member names that are not Python identifiers, or are keywords, still make a valid module."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import pathlib
import subprocess
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

import zerobridge
from conftest import ZEROBRIDGE, ImportHost, Process

# The Makefile exports ZEROBRIDGE_BIN (the debug build); conftest's SWIFT_BIN folder otherwise.
BINARY = pathlib.Path(os.environ.get("ZEROBRIDGE_BIN") or ZEROBRIDGE)


@pytest.fixture
def conformance_host() -> Iterator[str]:
    """A `zerobridge serve --conformance` on a free loopback port: its endpoint."""
    if not BINARY.exists():
        raise AssertionError(f"{BINARY} is missing: build it first (swift build --product zerobridge)")
    host = Process([str(BINARY), "serve", "--conformance", "--endpoint", "tcp://127.0.0.1:*"])
    try:
        yield host.wait_for_line("zerobridge ready ").removeprefix("zerobridge ready ")
    finally:
        host.stop()


def generate(*arguments: str) -> str:
    completed = subprocess.run([str(BINARY), "types", *arguments], capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


def mypy_strict(*files: pathlib.Path) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed in this Python (pip install mypy): the generated module's types are unchecked")
    folder = files[0].parent
    return subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(folder / ".mypy_cache"),
                           *(file.name for file in files)], cwd=folder, capture_output=True, text=True, timeout=300)


def load(path: pathlib.Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


# A module using the client as a user would: mypy --strict must accept it, and reject the two misuses at the end.
USAGE = '''
from __future__ import annotations

import zerobridge
from conformance_client import ConformanceClient, CountPayload, CountProgress, CountResult


async def use(peer: zerobridge.Peer) -> None:
    client = ConformanceClient(peer)
    payload: CountPayload = {"n": 3}
    result: CountResult = await client.count(payload, timeout=None)
    async with client.count_stream({"n": 3, "delay_ms": None}) as call:
        async for step in call.progress:
            progress: CountProgress = step
        total: int = (await call.result)["n"]
    sum_: float = await client.add({"a": 1, "b": 2.5})
    await client.echo()
    await client.sleep({"ms": "10"})  # wrong: ms is an integer
    name: str = await client.add({"a": 1, "b": 2})  # wrong: add gives a number
'''


def test_the_generated_python_client_type_checks_and_calls_every_conformance_action(
    tmp_path: pathlib.Path, conformance_host: str
) -> None:
    module_path = tmp_path / "conformance_client.py"
    saved = tmp_path / "catalogue.json"
    assert "ConformanceClient: 12 actions" in generate(
        "--endpoint", conformance_host, "--python", str(module_path), "--save-catalogue", str(saved))

    checked = mypy_strict(module_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    (tmp_path / "usage.py").write_text(USAGE)
    misuse = mypy_strict(module_path, tmp_path / "usage.py")
    errors = [line for line in misuse.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 2, misuse.stdout
    assert 'usage.py:18: error: Incompatible types (expression has type "str", TypedDict item "ms" has type "int")' in errors[0]
    assert "usage.py:19: error: Incompatible types in assignment" in errors[1]

    client_module = load(module_path)
    assert client_module.CATALOGUE == json.loads(saved.read_text())["catalogue"]
    asyncio.run(call_every_action(client_module, conformance_host))

    # `once` is gone after its first call: the host's catalogue changed, and a client generated now lacks it.
    regenerated = tmp_path / "after_once.py"
    generate("--endpoint", conformance_host, "--python", str(regenerated))
    text = regenerated.read_text()
    assert "async def once(" not in text and "async def echo(" in text
    assert client_module.CATALOGUE not in text


async def call_every_action(module: Any, endpoint: str) -> None:
    events: asyncio.Queue[Any] = asyncio.Queue()
    async with zerobridge.connect(endpoint, name="generated-client-test", evaluate=True,
                                  actions={"double": lambda payload: payload * 2}) as peer:
        peer.on_event("emitted")(events.put_nowait)
        client = module.ConformanceClient(peer)
        assert client.catalogue_is_current()

        assert await client.add({"a": 2, "b": 3}) == 5
        assert await client.add({"a": 0.5, "b": 2}) == 2.5
        assert await client.echo({"nested": [1, "two", None]}) == {"nested": [1, "two", None]}
        assert await client.echo() is None
        assert await client.sleep({"ms": 20}) == {"slept_ms": 20}
        assert await client.sleep({"ms": 20}, timeout=None) == {"slept_ms": 20}
        with pytest.raises(zerobridge.BridgeTimeout):
            await client.sleep({"ms": 5000}, timeout=0.2)

        assert await client.count({"n": 2}) == {"n": 2}
        steps = []
        async with client.count_stream({"n": 3, "delay_ms": 5}) as call:
            async for step in call.progress:
                steps.append(step)
            assert await call.result == {"n": 3}
        assert steps == [{"i": 1, "n": 3}, {"i": 2, "n": 3}, {"i": 3, "n": 3}]
        assert call.skipped == 0
        # A job (SPEC 7.16): a second call with the same idempotency key attaches to the first one's job.
        job_steps = []
        async with client.count_job_stream({"n": 2}, idempotency_key="generated-client") as job:
            async for step in job.progress:
                job_steps.append(step)
            assert await job.result == {"n": 2}
        assert job_steps == [{"i": 1, "n": 2}, {"i": 2, "n": 2}]
        assert await client.count_job({"n": 99}, idempotency_key="generated-client") == {"n": 2}

        with pytest.raises(zerobridge.HandlerError, match="no such luck"):
            await client.fail({"message": "no such luck"})

        assert await client.emit({"action": "emitted", "payload": {"k": 1}}) is None
        assert await asyncio.wait_for(events.get(), 10) == {"k": 1}
        assert await client.broadcast({"action": "emitted", "payload": {"k": 2}}) == {"delivered": 1, "skipped": 0}
        assert await asyncio.wait_for(events.get(), 10) == {"k": 2}
        assert await client.broadcast({"action": "emitted", "topic": "nobody-listens"}) == {"delivered": 0, "skipped": 0}
        assert await client.callback({"action": "double", "payload": 21}) == 42
        assert await client.call_peer({"peer": "generated-client-test", "action": "double", "payload": 4}) == 8
        with pytest.raises(zerobridge.BridgeError) as nobody:
            await client.call_peer({"peer": "nobody-by-that-name", "action": "double"})
        assert nobody.value.code == "peer_lost"
        assert await client.evaluate({"script": "return a * b", "arguments": {"a": 6, "b": 7}}) == 42

        assert await client.once() == {"called": True}
        with pytest.raises(zerobridge.BridgeError) as gone:
            await client.once()
        assert gone.value.code == "handler_gone"


# Names a catalogue may hold that Python cannot take as they are.
AWKWARD = {
    "catalogue": "0" * 64,
    "actions": [
        {"name": "$odd name", "doc": 'says """hi""" and \\ ends with "', "payload": {}, "result": {"type": "boolean"},
         "progress": {}},
        {"name": "2fa", "doc": "", "payload": {"anyOf": [
            {"type": "object", "title": "Code", "properties": {"code": {"type": "string"}}}, {"type": "null"}]},
         "result": {"type": "array", "items": {"type": "string", "contentEncoding": "base64"}}},
        {"name": "class", "doc": "", "result": {"enum": ["a", "b", 3, None, 1.5]}, "payload": {
            "type": "object", "required": ["from"], "properties": {
                "from": {"type": "string"}, "a-b": {"type": "integer"}, "__x": {"type": "boolean"},
                "int": {"type": "number"}, "tags": {"type": "object", "additionalProperties": {"type": "integer"}},
                "rule": {"type": "string", "pattern": "^x"}}}},
        {"name": "import-file", "doc": "", "payload": {}, "result": {}},
        {"name": "importFile", "doc": "", "payload": {"type": "null"}, "result": {}},
        {"name": "list", "doc": "", "payload": {"type": "array", "items": {"type": "integer"}}, "result": {}},
        {"name": "peer", "doc": "", "payload": {}, "result": {}},
    ],
}


def test_awkward_names_make_a_valid_module(tmp_path: pathlib.Path) -> None:
    catalogue = tmp_path / "awkward.json"
    catalogue.write_text(json.dumps(AWKWARD))
    module_path = tmp_path / "awkward_client.py"
    generate("--catalogue", str(catalogue), "--python", str(module_path))
    checked = mypy_strict(module_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    module = load(module_path)
    client = module.AwkwardClient
    for method in ("odd_name", "odd_name_stream", "action_2fa", "class_", "import_file", "import_file2", "list_", "peer2"):
        assert callable(getattr(client, method)), method
    assert module.ClassPayload.__required_keys__ == {"from"}
    assert module.ClassPayload.__optional_keys__ == {"a-b", "__x", "int", "tags", "rule"}
    assert client.odd_name.__doc__ == 'says """hi""" and \\ ends with "'


IMPORT_USAGE = '''
from __future__ import annotations

import zerobridge
from import_client import ImportClient, ImportFolderPayload, ImportFolderProgress, ImportFolderResult, StatsResult


async def use(peer: zerobridge.Peer, folder: str) -> tuple[ImportFolderResult, list[ImportFolderProgress], StatsResult]:
    client = ImportClient(peer)
    payload: ImportFolderPayload = {"path": folder, "options": {"concurrency": 2}}
    steps: list[ImportFolderProgress] = []
    async with client.import_folder_stream(payload) as call:
        async for step in call.progress:
            steps.append(step)
        result = await call.result
    stats = await client.stats()
    found = await client.search({"query": "nothing-matches-this", "limit": 5})
    assert found["total"] == 0 and found["hits"] == []
    return result, steps, stats
'''


def test_the_import_services_generated_client_type_checks_and_imports_a_folder(
        host_with_etl: ImportHost, dataset: tuple[pathlib.Path, dict[str, Any]], tmp_path: pathlib.Path) -> None:
    """The import service's client, generated from the live (keyed) host through its connection file, matches the
    committed catalogue, passes mypy --strict with code using it, and imports a folder with typed progress."""
    folder, manifest = dataset
    out = tmp_path / "generated"
    generate("--connection-file", str(host_with_etl.connection_file), "--python", str(out / "import_client.py"),
             "--class-name", "ImportClient", "--save-catalogue", str(out / "catalogue.json"))
    committed = json.loads((pathlib.Path(__file__).resolve().parents[1] / "import-service.catalogue.json").read_text())
    assert json.loads((out / "catalogue.json").read_text()) == committed
    (out / "use_import_client.py").write_text(IMPORT_USAGE)
    checked = mypy_strict(out / "import_client.py", out / "use_import_client.py")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    sys.path.insert(0, str(out))
    try:
        load(out / "import_client.py")
        usage = load(out / "use_import_client.py")

        async def run() -> tuple[Any, list[Any], Any]:
            async with zerobridge.connect(str(host_with_etl.connection_file), name="generated-import-client") as peer:
                assert sys.modules["import_client"].ImportClient(peer).catalogue_is_current()
                return await usage.use(peer, str(folder))

        result, steps, stats = asyncio.run(run())
    finally:
        sys.path.remove(str(out))
    assert result["filesTotal"] == len(manifest["files"]) and result["filesImported"] + result["filesFailed"] == result["filesTotal"]
    assert steps and steps[-1]["filesDone"] == result["filesTotal"]
    assert stats["records"] == result["records"] > 0
