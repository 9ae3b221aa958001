"""Run conversation fixtures as pytest tests of your own service: one test per conversation, named by its description.

For example, in ``tests/test_service_fixtures.py``::

    from zerobridge.testing import fixture_tests

    test_service = fixture_tests("fixtures/", endpoint="tcp://127.0.0.1:5555")

``endpoint`` is an endpoint, a connection file's path, or a function returning either (called when the first
test runs). Or name a pytest fixture that starts your service and returns its endpoint::

    @pytest.fixture(scope="session")
    def service_endpoint():
        ...start the service...
        yield "tcp://127.0.0.1:5555"

    test_service = fixture_tests("fixtures/", endpoint_fixture="service_endpoint")

With neither, the ``ZEROBRIDGE_ENDPOINT`` environment variable says where the host is. A conversation that kills and
restarts the host (a ``restart_host`` step) is reported as skipped, not run: a service started elsewhere cannot be
restarted from here (``zerobridge.fixtures.run_conversation(..., restart_host=...)`` runs it when you can). A failing conversation
fails its test with the step, the JSON path that differs, and the expected and received bodies.
"""

from __future__ import annotations

import os
from collections.abc import Callable
import pytest

from .fixtures import Conversation, load_conversations, run_conversation

__all__ = ["fixture_tests"]


def fixture_tests(
    *paths: str | os.PathLike[str],
    endpoint: str | os.PathLike[str] | Callable[[], str | os.PathLike[str]] | None = None,
    endpoint_fixture: str | None = None,
) -> Callable[..., None]:
    """A pytest test function parametrized over the conversations in ``paths`` (files or folders)."""
    if endpoint is not None and endpoint_fixture is not None:
        raise TypeError("give endpoint or endpoint_fixture, not both")
    conversations = load_conversations(paths or ["."])
    if not conversations:
        raise ValueError(f"no conversation fixtures in {', '.join(map(str, paths or ['.']))}")
    names = [c.description for c in conversations]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate is not None:
        raise ValueError(f"two conversations are described {duplicate!r}: descriptions name the tests")

    def target(request: pytest.FixtureRequest) -> str:
        if endpoint_fixture is not None:
            found = request.getfixturevalue(endpoint_fixture)
        elif endpoint is not None:
            found = endpoint() if callable(endpoint) else endpoint
        else:
            found = os.environ.get("ZEROBRIDGE_ENDPOINT")
            if not found:
                pytest.fail("fixture_tests needs endpoint=, endpoint_fixture= or $ZEROBRIDGE_ENDPOINT", pytrace=False)
        from .peer import resolve_target  # an endpoint as is; anything else is a connection file

        info = resolve_target(os.fspath(found))
        if info.key:  # conversations are raw frames, sent unsigned: a keyed host would refuse them all
            pytest.fail(f"{os.fspath(found)} has a key: conversations speak unsigned, so run the host without one"
                        " (zerobridge serve --no-key)", pytrace=False)
        return info.endpoint

    @pytest.mark.parametrize("zerobridge_conversation", [pytest.param(c, id=c.description) for c in conversations])
    def test_conversation(zerobridge_conversation: Conversation, request: pytest.FixtureRequest) -> None:
        __tracebackhide__ = True
        if zerobridge_conversation.restarts_host:  # SPEC 14.2: reported as not run, saying why; never passed
            pytest.skip("not run: it restarts the host (restart_host), and fixture_tests cannot restart a service")
        run_conversation(zerobridge_conversation, target(request))

    return test_conversation
