"""`$evaluate` scripts: compiled as the body of an async function whose parameters are the arguments."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from zerobridge import BridgeError
from zerobridge.evaluate import evaluate


def run(payload: Any, namespace: dict[str, Any] | None = None) -> Any:
    return asyncio.run(evaluate(payload, {} if namespace is None else namespace))


def test_arguments_are_local_names_and_return_is_the_result() -> None:
    assert run({"script": "return a * b", "arguments": {"a": 6, "b": 7}}) == 42


def test_await_works_inside_the_script() -> None:
    script = "import asyncio\nawait asyncio.sleep(0.001)\nreturn 'awaited'"
    assert run({"script": script}) == "awaited"


def test_a_script_without_return_gives_none_and_empty_is_allowed() -> None:
    assert run({"script": "x = 1"}) is None
    assert run({"script": ""}) is None


def test_multiline_strings_in_the_script_are_kept_as_written() -> None:
    script = 'text = """first\n  second"""\nreturn text'
    assert run({"script": script}) == "first\n  second"


def test_globals_persist_in_one_namespace() -> None:
    namespace: dict[str, Any] = {}
    run({"script": "global counter\ncounter = 41"}, namespace)
    assert run({"script": "return counter + 1"}, namespace) == 42


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        ("return 1", "invalid_payload"),
        ({"script": 5}, "invalid_payload"),
        ({"script": "return 1", "arguments": [1]}, "invalid_payload"),
        ({"script": "return 1", "arguments": {"not a name": 1}}, "invalid_payload"),
        ({"script": "return 1", "arguments": {"class": 1}}, "invalid_payload"),
        ({"script": "return ("}, "handler_error"),
        ({"script": "yield 1"}, "handler_error"),
    ],
)
def test_bad_scripts_and_payloads_are_clear_errors(payload: Any, code: str) -> None:
    with pytest.raises(BridgeError) as caught:
        run(payload)
    assert caught.value.code == code


def test_exceptions_from_the_script_propagate_to_the_handler_wrapper() -> None:
    with pytest.raises(ZeroDivisionError):
        run({"script": "return 1 / 0"})
