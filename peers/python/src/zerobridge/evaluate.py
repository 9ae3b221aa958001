"""``$evaluate``: run a script the host sent, the way ``callAsyncJavaScript`` runs one in a page.

DANGER: this runs arbitrary Python code from the host, with every right this process has (files,
network, subprocesses). It is off unless the user passes ``evaluate=True`` to ``connect``; only
turn it on when you trust the host and everyone who can reach its endpoint (CURVE with an allow-list
decides who can). Without CURVE the peer keeps it for the first host that welcomed it only (SPEC 2.1).

The script becomes the body of ``async def __evaluate__(<argument names>)``: the arguments are
local names, ``await`` works, and the value of ``return`` is the result (None without one).
Scripts of one peer share one module namespace, so ``global`` names and imports persist.
"""

from __future__ import annotations

import ast
import inspect
import keyword
from typing import Any

from . import errors
from .errors import BridgeError

_FUNCTION_NAME = "__evaluate__"


def compile_script(script: str, names: list[str], filename: str = "<$evaluate>") -> Any:
    """The code object of a module defining ``async def __evaluate__(*names)`` with ``script`` as body."""
    body = ast.parse(script, filename=filename).body  # `return`/`await` are legal to the parser
    function = ast.parse(f"async def {_FUNCTION_NAME}({', '.join(names)}): pass").body[0]
    assert isinstance(function, ast.AsyncFunctionDef)
    function.body = body or [ast.Pass()]
    module = ast.Module(body=[function], type_ignores=[])
    ast.fix_missing_locations(module)
    return compile(module, filename, "exec")


async def evaluate(payload: Any, namespace: dict[str, Any]) -> Any:
    """Run the ``$evaluate`` payload ``{"script": str, "arguments"?: object}`` in ``namespace``."""
    if not isinstance(payload, dict) or not isinstance(payload.get("script"), str):
        raise BridgeError(errors.INVALID_PAYLOAD, '$evaluate needs {"script": string, "arguments"?: object}')
    arguments = payload.get("arguments") or {}
    if not isinstance(arguments, dict):
        raise BridgeError(errors.INVALID_PAYLOAD, '"arguments" must be an object')
    for name in arguments:
        if not name.isidentifier() or keyword.iskeyword(name) or name == _FUNCTION_NAME:
            raise BridgeError(errors.INVALID_PAYLOAD, f"argument name {name!r} is not a Python identifier")
    try:
        code = compile_script(payload["script"], list(arguments))
    except SyntaxError as error:
        raise BridgeError(errors.HANDLER_ERROR, f"SyntaxError: {error.msg} (line {error.lineno})") from None
    exec(code, namespace)
    function = namespace.pop(_FUNCTION_NAME)
    if inspect.isasyncgenfunction(function):
        raise BridgeError(errors.HANDLER_ERROR, "a script may not use `yield`")
    return await function(**arguments)
