"""How much text one file may become (decision 0022).

A conversion's output has no natural bound relative to its input: an EPUB of 1.1 MB whose
spine lists its chapters 60 times converts to 220 million characters, and embedding that takes
hours. The text a file may produce is capped absolutely and relative to its size on disk; past
the cap the document is cut at a paragraph break, indexed up to the cut, and carries the
warning ``text_truncated``.
"""

from __future__ import annotations

# About 2 million tokens, the longest books (the Bible is 4.3 M characters) and then some;
# ~8,000 chunks, an hour of embedding on two cores at worst.
MAX_TEXT_CHARS = 8_000_000
# Characters per byte on disk: plain text is ~1, zipped formats (EPUB, DOCX) 3-5, a PDF's
# compressed text streams up to ~10; 20 leaves room for every honest file.
MAX_CHARS_PER_BYTE = 20
MIN_BUDGET_CHARS = 200_000  # a small file may still hold a table or a list that expands
TRUNCATED = "text_truncated"


def text_budget(size_on_disk: int) -> int:
    """The most characters a file of ``size_on_disk`` bytes may produce."""
    return min(MAX_TEXT_CHARS, max(MIN_BUDGET_CHARS, MAX_CHARS_PER_BYTE * size_on_disk))


def cut(text: str, budget: int) -> tuple[str, bool]:
    """``text`` cut to at most ``budget`` characters, at a paragraph (else line, else word)
    break in its last tenth; and whether it was cut."""
    if len(text) <= budget:
        return text, False
    floor = budget - budget // 10
    for sep in ("\n\n", "\n", " "):
        at = text.rfind(sep, floor, budget)
        if at > 0:
            return text[:at], True
    return text[:budget], True
