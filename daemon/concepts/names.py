"""Which document a name names (issue 37, measured in bench/doc_by_name.py): its title, path
or file name; else the words of its title, file name and authors, with one letter's typo in a
long word. A name that several documents answer names none of them, unless they are copies of
one (another edition). Pure functions over the documents' dicts (``title``, ``source``, and
``metadata``, ``vector`` when there)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ragd.daemon.concepts.extract import normalise

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)


# Issue 37: a name names a document when every word of it is a word of that document's name
# (or, failing that, of its concepts), and no other document's as well but a copy of it.
NAME_STOPWORDS = frozenset({"a", "an", "the", "of", "and", "or", "in", "on", "at", "to", "for",
                            "by", "with", "from"})
FUZZY_LETTERS = 5  # a word of this many letters may be one letter off (a typo)
COPY_COS = 0.9  # two editions of one book; distinct books of the shared library stay under 0.6
_POSSESSIVE = re.compile(r"'s\b")


def name_words(text: str) -> list[str]:
    """A name's words: lower case, possessive ``'s`` dropped, function words left out."""
    low = _POSSESSIVE.sub("", text.lower().replace("\u2019", "'"))
    return [w for w in _TOKEN.findall(low) if w not in NAME_STOPWORDS]


def one_edit(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` differ by at most one letter added, dropped or changed, or by
    two neighbouring letters swapped."""
    if len(a) > len(b):
        a, b = b, a
    if len(b) - len(a) > 1:
        return False
    i = 0
    while i < len(a) and a[i] == b[i]:
        i += 1
    if i == len(a):
        return True
    if len(a) < len(b):
        return a[i:] == b[i + 1:]
    swapped = i + 1 < len(a) and a[i] == b[i + 1] and a[i + 1] == b[i]
    return a[i + 1:] == b[i + 1:] or (swapped and a[i + 2:] == b[i + 2:])


def path_like(text: str) -> bool:
    """Whether ``text`` is a path (``/``, ``\\`` or ``..`` in it): it names no document by
    its words."""
    return ".." in text or "/" in text or "\\" in text


def holds_words(words: Sequence[str], have: set[str], fuzzy: bool) -> bool:
    """Every one of ``words`` is in ``have`` (singular or plural; one letter off in a long
    word with ``fuzzy``)."""
    forms = {normalise(h) for h in have}
    for w in words:
        if normalise(w) in forms:
            continue
        if not (fuzzy and len(w) >= FUZZY_LETTERS
                and any(len(h) >= FUZZY_LETTERS and one_edit(w, h) for h in have)):
            return False
    return True


def _document_name(d: dict[str, Any]) -> set[str]:
    """The words of a document's title, file name and authors."""
    stem = re.split(r"[\\/]", d["source"])[-1].rsplit(".", 1)[0]
    authors = (d.get("metadata") or {}).get("authors") or []
    return {w for part in (d["title"], stem, *map(str, authors)) for w in name_words(part)}


def one_or_copies(found: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The first of ``found`` when the others are copies of it (nearly the same document
    vector: another edition), else None: the name is ambiguous."""
    if not found:
        return None
    first = found[0]
    for d in found[1:]:
        a, b = first.get("vector"), d.get("vector")
        if a is None or b is None or a.shape != b.shape or float(a @ b) < COPY_COS:
            return None
    return first


def by_name(docs: Sequence[dict[str, Any]], query: str) -> dict[str, Any] | None:
    """The document ``query`` names: the one whose title, path or file name it is; else,
    unless it is path-like, the one whose title, file name and authors hold each of its words
    (one letter off in a long word), those whose title it covers most if several do. None
    for empty input, no match, or an ambiguous one (documents that are not copies of each
    other). Each of ``docs`` has a ``title`` and a ``source`` (its path); ``metadata``
    (``authors``) and ``vector`` (copies) are used when there."""
    low = query.strip().lower()
    if not low:
        return None
    same = [d for d in docs if low in (d["title"].lower(), d["source"].lower(),
                                        re.split(r"[\\/]", d["source"].lower())[-1])]
    if same or path_like(low):  # a path names only its own document
        return one_or_copies(same)
    words = name_words(query)
    if not words:
        return None
    found = [d for d in docs if holds_words(words, _document_name(d), fuzzy=True)]

    def covered(d: dict[str, Any]) -> float:
        title = set(name_words(d["title"]))
        return len(title & set(words)) / len(title) if title else 0.0

    best = max((covered(d) for d in found), default=0.0)
    return one_or_copies([d for d in found if covered(d) == best])


