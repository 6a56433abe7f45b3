"""Where the text most like an edit's absent ``old_text`` is: a hint for the retry, found in
time linear in the note and capped by a measured budget (decision 0045).

Comparing ``old_text`` with a window at every line of the note (what this replaced) costs
lines x similarity: 195 s of CPU for 2 KB in a 100,000-line note. Instead:

1. The same text in another letter case: one ``str.find`` (linear: CPython's two-way search).
2. **Anchors** pick a few places worth comparing: the occurrences (``str.find``, at most 50
   each) of ``old_text``'s 16 longest lines, stripped, and of its three longest words, in
   lower case. Each occurrence votes for where ``old_text`` would start there; a line with
   a typo finds no occurrence, its neighbours and words do.
3. **Comparison** of the most voted places only (at most 200), with ``difflib``: character by
   character when ``old_text`` is short, line by line when it has many lines, else word by
   word over its first 1,500 words, so one comparison costs milliseconds, never the square of
   50 KB.

The whole search stops after ``BUDGET_S`` (the anchors' pass included); an answer found by
then is given, and the hint says the search was cut short.
"""

from __future__ import annotations

import difflib
import time
from collections import Counter
from typing import Any

BUDGET_S = 0.5
MAX_PLACES = 200  # places compared at most
MAX_HITS = 50  # occurrences of one anchor looked at
MAX_LINE_ANCHORS = 16  # longest lines of old_text looked for
CHAR_LEVEL = 1_000  # old_text up to this many (squeezed) characters is compared by character
MAX_WORDS = 1_500  # words of a long old_text of few lines compared by word
MIN_RATIO = 0.5


def _squeeze(text: str) -> str:
    return " ".join(text.split()).lower()


def near_miss(text: str, old: str, budget_s: float = BUDGET_S) -> str:
    """A sentence for a ``no_match`` refusal: where ``old`` occurs in another case, or the
    closest text and its line; '' when nothing is alike."""
    if not old.strip() or not text:
        return ""
    deadline = time.monotonic() + budget_s
    low, old_low = text.lower(), old.lower()
    if len(low) != len(text):  # a letter whose lower case is longer ('İ'): offsets would drift
        low, old_low = text, old
    at = low.find(old_low)
    if at >= 0:
        line = low.count("\n", 0, at) + 1
        return (f" It occurs at line {line} with other letter case: "
                f"{text[at:at + len(old)][:200]!r}.")
    votes, places, cut = _anchors(low, old_low, deadline)
    ranked = [places[k] for k, _ in votes.most_common(MAX_PLACES)]
    best, ratio, compared = _closest(low, ranked, old_low, deadline)
    note = ""
    if cut or compared < len(ranked):
        note = (f" (The search for it stopped at its {budget_s:g} s budget after "
                f"{compared} of {len(ranked)} likely places.)")
    if best is None or ratio < MIN_RATIO:
        return note
    best = _align(low, best, old_low)
    line = low.count("\n", 0, best) + 1
    return (f" The closest text is at line {line} ({ratio:.0%} alike): "
            f"{text[best:best + min(len(old), 200)]!r}.{note}")


def _anchors(low: str, old_low: str, deadline: float) -> tuple[Counter[int], dict[int, int], bool]:
    """Votes for where ``old_low`` would start in ``low``: (votes by bucket, the offset of
    each bucket, whether the clock stopped the search). Each anchor is one ``str.find`` scan
    (C speed, linear): the longest lines of ``old_low``, stripped, then its longest words."""
    bucket = max(16, len(old_low) // 8)
    votes: Counter[int] = Counter()
    places: dict[int, int] = {}
    anchors: dict[str, int] = {}  # anchor text -> its offset in old_low
    offset = 0
    for line in old_low.split("\n"):
        stripped = line.strip()
        if len(stripped) >= 8:
            anchors.setdefault(stripped, offset + line.find(stripped))
        offset += len(line) + 1
    chosen = sorted(anchors, key=len, reverse=True)[:MAX_LINE_ANCHORS]
    words = sorted({w for w in old_low.split() if len(w) >= 4} - set(chosen), key=len,
                   reverse=True)[:3]
    chosen += [w for w in words if w not in anchors]
    for anchor in chosen:
        if time.monotonic() > deadline:
            return votes, places, True
        inside_old = anchors.get(anchor, old_low.find(anchor))
        at, hits = low.find(anchor), 0
        while at >= 0 and hits < MAX_HITS:
            start = max(0, at - inside_old)
            votes[start // bucket] += 1
            places.setdefault(start // bucket, start)
            at, hits = low.find(anchor, at + 1), hits + 1
    return votes, places, False


def _matcher(window: str, old_low: str) -> difflib.SequenceMatcher[Any]:
    """A comparison whose cost stays in milliseconds: by character for a short old_text, by
    line for one of many lines, else by word over its first ``MAX_WORDS`` words."""
    target = _squeeze(old_low)
    if len(target) <= CHAR_LEVEL:
        return difflib.SequenceMatcher(None, _squeeze(window), target, autojunk=False)
    lines = [x for x in map(_squeeze, old_low.split("\n")) if x]
    if len(lines) >= 8:
        return difflib.SequenceMatcher(
            None, [x for x in map(_squeeze, window.split("\n")) if x], lines)
    return difflib.SequenceMatcher(None, window.split()[:MAX_WORDS],
                                   target.split()[:MAX_WORDS], autojunk=False)


def _closest(low: str, ranked: list[int], old_low: str, deadline: float
             ) -> tuple[int | None, float, int]:
    """The best of the ``ranked`` offsets: (offset, similarity, places compared)."""
    slack = min(200, len(old_low) // 10 + 8)
    best: int | None = None
    best_ratio = 0.0
    compared = 0
    for offset in ranked:
        if time.monotonic() > deadline:
            break
        compared += 1
        matcher = _matcher(low[max(0, offset - slack):offset + len(old_low) + slack], old_low)
        if matcher.real_quick_ratio() <= best_ratio or matcher.quick_ratio() <= best_ratio:
            continue
        ratio = matcher.ratio()
        if ratio > best_ratio:
            best, best_ratio = offset, ratio
    return best, best_ratio, compared


def _align(low: str, offset: int, old_low: str) -> int:
    """``offset`` moved to where ``old_low`` lines up best near it (the anchors' guess is off
    by the spacing that differs), then past leading blanks old_text does not have."""
    if len(old_low) <= CHAR_LEVEL:  # bounded: at most one short comparison
        lo = max(0, offset - len(old_low) // 10 - 8)
        window = low[lo:offset + len(old_low) + len(old_low) // 10 + 8]
        block = difflib.SequenceMatcher(None, window, old_low, autojunk=False) \
            .find_longest_match(0, len(window), 0, len(old_low))
        if block.size:
            offset = max(0, lo + block.a - block.b)
    if not old_low[:1].isspace():
        while offset < len(low) and low[offset].isspace():
            offset += 1
    return offset
