"""Code search finds the implementation (issue 36): a code question ranks a library's own
symbols above its tests, examples and docs of the same thing, unless the query asks for those.

Tests, examples and doc sections say the same words as the code they exercise or describe, and
often more plainly, so they outranked the implementation (of what ranked above the right symbol
on a question set: 23 tests, 19 doc sections, 6 examples). The order among the candidates is
kept; those whose role the query did not ask for go after the rest. Pure functions."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import PurePosixPath
from typing import TypeVar

T = TypeVar("T")

# Folders, and file-name patterns, that hold tests, examples and docs in the usual layouts.
_DIRS = {
    "test": {"test", "tests", "testing", "__tests__", "spec", "specs", "test_utils",
             "testutils", "e2e"},
    "example": {"example", "examples", "demo", "demos", "sample", "samples", "cookbook"},
    "doc": {"doc", "docs", "documentation"},
}
_TEST_FILE = re.compile(r"(^test_.*|.*_test\.\w+$|.*\.(test|spec)\.\w+$|^conftest\.py$|"
                        r".*Tests?\.\w+$)")
# The words with which a query asks for a role (lower case, whole words).
_ASKS = {
    "test": {"test", "tests", "testing", "tested", "unittest", "pytest", "spec", "specs",
             "fixture", "fixtures", "assert", "asserts"},
    "example": {"example", "examples", "demo", "demos", "sample", "samples", "usage"},
    "doc": {"doc", "docs", "documentation", "documented", "readme", "guide", "tutorial",
            "docstring", "manual"},
}
_WORD = re.compile(r"[a-z]+")


def role(file_path: str, symbol_type: str) -> str | None:
    """"test", "example" or "doc" for a symbol of a test, an example or the docs (by its
    path, or a markdown section), None for the implementation."""
    if symbol_type == "doc":
        return "doc"
    p = PurePosixPath(file_path.lower())
    folders = set(p.parts[:-1])
    for name, dirs in _DIRS.items():
        if folders & dirs:
            return name
    return "test" if _TEST_FILE.match(PurePosixPath(file_path).name) else None


def asked(query: str) -> set[str]:
    """The roles a query asks for by its words ("a test that ...", "an example of ...")."""
    words = set(_WORD.findall(query.lower()))
    return {name for name, asks in _ASKS.items() if words & asks}


def implementation_first(items: Sequence[T], role_of: Callable[[T], str | None],
                         wanted: set[str]) -> list[T]:
    """``items`` in their order, with those whose role is not ``wanted`` after the others."""
    first = [i for i in items if role_of(i) is None or role_of(i) in wanted]
    later = [i for i in items if not (role_of(i) is None or role_of(i) in wanted)]
    return first + later
