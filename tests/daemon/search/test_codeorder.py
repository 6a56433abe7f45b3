"""Code search finds the implementation before its tests, examples and docs (issue 36)."""

from __future__ import annotations

import pytest

from ragd.daemon.search.codeorder import asked, implementation_first, role


@pytest.mark.parametrize(("path", "kind", "expected"), [
    ("src/requests/sessions.py", "method", None),
    ("requests/adapters.py", "class", None),
    ("tests/test_sessions.py", "function", "test"),
    ("src/pkg/test_utils.py", "function", "test"),
    ("pkg/sessions_test.go", "function", "test"),
    ("web/session.spec.ts", "method", "test"),
    ("web/__tests__/cache.ts", "function", "test"),
    ("conftest.py", "function", "test"),
    ("src/main/java/CacheTest.java", "method", "test"),
    ("examples/retry.py", "function", "example"),
    ("docs/conf.py", "module", "doc"),
    ("README.md", "doc", "doc"),
    ("src/contest.py", "function", None),  # "test" inside a word is not a test
    ("src/attestation.py", "function", None),
])
def test_role_by_path_and_kind(path: str, kind: str, expected: str | None) -> None:
    assert role(path, kind) == expected


def test_a_query_asks_for_a_role_by_its_words() -> None:
    assert asked("how long to wait before the next attempt") == set()
    assert asked("the test that checks the delay doubles") == {"test"}
    assert asked("an example of a session with retries") == {"example"}
    assert asked("Docs on proxies") == {"doc"}
    assert asked("contest attestation") == set()


def test_implementation_first_keeps_the_order_within_each_part() -> None:
    items = [("tests/test_a.py", "function"), ("src/a.py", "function"),
             ("docs/a.md", "doc"), ("src/b.py", "method"), ("examples/a.py", "function")]

    def role_of(item: tuple[str, str]) -> str | None:
        return role(*item)

    assert implementation_first(items, role_of, set()) == [
        items[1], items[3], items[0], items[2], items[4]]
    assert implementation_first(items, role_of, {"test"}) == [
        items[0], items[1], items[3], items[2], items[4]]
