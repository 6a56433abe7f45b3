"""Heading-aware markdown chunking: split a note body into chunks that fit the embedding model.

Pure: the token counter is passed in, nothing is read or written. Every chunk is an exact slice
of the input text, and ``count_tokens([chunk.embed_text])[0] <= max_tokens`` holds for every
chunk, so the model never silently truncates what it embeds.

Counting is the expensive part, so it happens in batches: all blocks of a note are counted in one
call, then whatever is too big is split a level finer and counted again. Sums of piece counts are
estimates (tokenizers are nearly, not exactly, additive); each finished chunk is counted for real
and its section is re-packed with a tighter budget when an estimate was wrong.
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import NamedTuple

from ragd.daemon.models import ChunkDraft, Heading
from ragd.daemon.text.headings import find_headings
from ragd.daemon.text.reading import Ranges, hidden, reading

# Part of the embedding fingerprint: bump whenever the chunks produced for a text change.
# 2: every note also gets its properties chunks (ragd.daemon.text.properties), so notes indexed before
# are read again. 3: what is embedded is what reading view shows (ragd.daemon.text.reading,
# decision 0038): no comments, link destinations or HTML tags.
CHUNKER_VERSION = "3"

TokenCounter = Callable[[Sequence[str]], list[int]]

# The hard character cap: a chunk holds at most max_tokens * CHARS_PER_TOKEN_MAX characters
# (2,048 for a 256-token model). Prose runs at ~4-5 characters a token, code at ~3.
CHARS_PER_TOKEN_MAX = 8

log = logging.getLogger(__name__)

_WORD_WINDOW = 512  # word groups counted per call when a piece must be cut between words
_GROUP_CHARS = 64  # words are counted in runs this long, one by one only around a cut
_MAX_CHARS_PER_TOKEN = 32  # longer pieces are not worth counting before cutting
_OVERLAP_CHARS_PER_TOKEN = 8  # how far back to look for overlap sentences
_MAX_REPACKS = 32  # re-packs of a section whose estimated counts were too low
_ENCODE_BATCH = 1024  # texts per encode_batch call


# --- sections and blocks --------------------------------------------------------------------


@dataclass(frozen=True)
class _Section:
    """Text under one heading, up to the next one. ``heads`` are heading-line spans at its top
    (more than one when heading-only sections were merged forward)."""

    start: int
    end: int
    path: tuple[str, ...]
    heads: tuple[tuple[int, int], ...]


def _sections(text: str, headings: Sequence[Heading]) -> list[_Section]:
    """Split ``text`` at its headings, merging heading-only sections into the next one."""
    first = headings[0].start if headings else len(text)
    out = [_Section(0, first, (), ())] if text[:first].strip() else []
    stack: list[Heading] = []
    pending: list[Heading] = []
    for i, heading in enumerate(headings):
        while stack and stack[-1].level >= heading.level:
            stack.pop()
        stack.append(heading)
        end = headings[i + 1].start if i + 1 < len(headings) else len(text)
        pending.append(heading)
        if not text[heading.end : end].strip() and i + 1 < len(headings):
            continue  # no body: its heading line opens the next section's first chunk
        path = tuple(" ".join(h.text.split()) for h in stack if h.text.strip())
        heads = tuple((h.start, h.end) for h in pending)
        out.append(_Section(pending[0].start, end, path, heads))
        pending = []
    return out


_FENCE = re.compile(r"[ \t]{0,3}(`{3,}|~{3,}|\$\$|%%)")
_LIST_ITEM = re.compile(r"[ \t]*(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")
_STRUCTURED = ("line", "sentence")  # code, tables, lists, quotes: cut between lines first
_PROSE = ("sentence", "line")


def _opens(line: str) -> str:
    """The fence ``line`` opens (```, ~~~, $$ or %%), or "" when it opens none."""
    m = _FENCE.match(line)
    if not m:
        return ""
    fence, rest = m.group(1), line[m.end() :]
    if fence in ("$$", "%%"):
        return "" if fence in rest else fence  # closed on the same line
    return "" if fence[0] == "`" and "`" in rest else fence  # ```x``` is inline code


def _closes(fence: str, line: str) -> bool:
    """Whether the stripped ``line`` ends the fenced block opened by ``fence``."""
    if fence in ("$$", "%%"):
        return fence in line
    return line.startswith(fence) and not line.strip(fence[0])


class _Block(NamedTuple):
    """A paragraph, list, table, quote or fenced block of a section."""

    start: int
    end: int
    levels: tuple[str, ...]  # how to cut it when too big
    is_list: bool
    indented: bool


def _new_block(line: str, start: int) -> _Block:
    """A block starting with ``line``, its end still unknown."""
    is_list = bool(_LIST_ITEM.match(line))
    structured = is_list or _FENCE.match(line) or line.lstrip()[:1] in ("|", ">")
    levels = _STRUCTURED if structured else _PROSE
    return _Block(start, start, levels, is_list, line[:1] in (" ", "\t"))


def _raw_blocks(text: str, start: int, end: int) -> list[_Block]:
    """Blank-line separated blocks of ``text[start:end]``; fenced blocks stay whole."""
    blocks: list[_Block] = []
    block: _Block | None = None
    fence = ""
    pos = start
    while pos < end:
        newline = text.find("\n", pos, end)
        line_end = end if newline < 0 else newline
        line = text[pos:line_end]
        if fence:
            fence = "" if _closes(fence, line.strip()) else fence
        elif not line.strip():
            if block:
                blocks.append(block)
            block = None
            pos = line_end + 1
            continue
        else:
            fence = _opens(line)
        block = (block or _new_block(line, pos))._replace(end=line_end)
        pos = line_end + 1
    if block:
        blocks.append(block)
    return blocks


def _blocks(text: str, section: _Section) -> list[_Block]:
    """Packing units of a section: its heading lines, then paragraphs, lists, tables, code."""
    body_start = section.heads[-1][1] if section.heads else section.start
    out = [_Block(s, e, _PROSE, False, False) for s, e in section.heads]
    for block in _raw_blocks(text, body_start, section.end):
        prev = out[-1] if len(out) > len(section.heads) else None
        if prev and prev.is_list and (block.is_list or block.indented):
            out[-1] = prev._replace(end=block.end)  # loose items and continuations: one list
        else:
            out.append(block)
    stripped = (b._replace(start=s, end=e) for b in out for s, e in [_strip(text, b.start, b.end)])
    return [b for b in stripped if b.start < b.end]


def _strip(text: str, start: int, end: int) -> tuple[int, int]:
    """``(start, end)`` moved inwards past surrounding whitespace."""
    piece = text[start:end]
    left = len(piece) - len(piece.lstrip())
    return start + left, start + len(piece.rstrip())


# --- fitting pieces into the budget ---------------------------------------------------------


class _Unit(NamedTuple):
    """A span that fits a chunk on its own; ``cost`` excludes the special tokens."""

    start: int
    end: int
    cost: int


class _Costs:
    """``count_tokens`` minus the model's special tokens, so piece costs can be summed.

    A piece never costs less than one token per ``CHARS_PER_TOKEN_MAX`` characters: a word
    the tokenizer cannot split (a 5 MB line with no space is one unknown token) would
    otherwise make one giant chunk. So no chunk holds more than ``max_tokens`` times that many
    characters, and text with no break point is cut by characters.
    """

    def __init__(self, count_tokens: TokenCounter) -> None:
        self.count_tokens = count_tokens
        self.special = count_tokens([""])[0]

    def __call__(self, texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        return [max(n - self.special, -(-len(t) // CHARS_PER_TOKEN_MAX))
                for t, n in zip(texts, self.count_tokens(texts), strict=True)]


class _Piece(NamedTuple):
    """A span still to be fitted into ``budget`` tokens."""

    key: int  # which section it belongs to
    start: int
    end: int
    budget: int
    levels: tuple[str, ...]  # finer cuts still to try before words


_WORD = re.compile(r"\S+")
_NEWLINE = re.compile(r"\n")
_SENTENCE_END = re.compile(r"(?:[.!?…][\"'”’)\]*_]*(?=\s)|[。！？])")


def _cut_points(text: str, piece: _Piece, level: str) -> list[tuple[int, int]]:
    """Stripped spans of ``piece`` cut after sentence ends or at line breaks."""
    pattern = _SENTENCE_END if level == "sentence" else _NEWLINE
    cuts = [m.end() for m in pattern.finditer(text, piece.start, piece.end)]
    bounds = zip([piece.start, *cuts], [*cuts, piece.end], strict=True)
    return [span for span in (_strip(text, s, e) for s, e in bounds) if span[0] < span[1]]


def _fit_units(text: str, pieces: Iterable[_Piece], costs: _Costs) -> dict[int, list[_Unit]]:
    """Cut pieces until each fits its budget; batched level by level across all pieces."""
    out: dict[int, list[_Unit]] = defaultdict(list)
    todo = list(pieces)
    while todo:
        # A piece this long cannot fit (short of giant unknown words): cut it without counting.
        countable = [p.end - p.start <= p.budget * _MAX_CHARS_PER_TOKEN for p in todo]
        counted = iter(
            costs([text[p.start : p.end] for p, ok in zip(todo, countable, strict=True) if ok])
        )
        finer: list[_Piece] = []
        for piece, ok in zip(todo, countable, strict=True):
            cost = next(counted) if ok else piece.budget + 1
            if cost <= piece.budget:
                out[piece.key].append(_Unit(piece.start, piece.end, cost))
                continue
            for i, level in enumerate(piece.levels):
                spans = _cut_points(text, piece, level)
                if len(spans) > 1:
                    finer += [
                        _Piece(piece.key, s, e, piece.budget, piece.levels[i + 1 :])
                        for s, e in spans
                    ]
                    break
            else:
                out[piece.key] += _cut_words(text, piece.start, piece.end, piece.budget, costs)
        todo = finer
    for units in out.values():
        units.sort()
    return out


class _Runs:
    """Greedy runs of adjacent spans whose summed cost stays within ``budget``."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.units: list[_Unit] = []
        self.start, self.end, self.cost = -1, -1, 0

    def fits(self, cost: int) -> bool:
        return (self.cost if self.start >= 0 else 0) + cost <= self.budget

    def add(self, start: int, end: int, cost: int) -> None:
        if not self.fits(cost):
            self.flush()
        if self.start < 0:
            self.start, self.cost = start, 0
        self.end, self.cost = end, self.cost + cost

    def flush(self) -> None:
        if self.start >= 0:
            self.units.append(_Unit(self.start, self.end, self.cost))
        self.start = -1


def _word_groups(text: str, start: int, end: int) -> Iterator[list[re.Match[str]]]:
    """Runs of consecutive words of about ``_GROUP_CHARS`` characters."""
    group: list[re.Match[str]] = []
    for word in _WORD.finditer(text, start, end):
        if group and word.end() - group[0].start() > _GROUP_CHARS:
            yield group
            group = []
        group.append(word)
    if group:
        yield group


def _cut_words(text: str, start: int, end: int, budget: int, costs: _Costs) -> list[_Unit]:
    """Greedy runs of whole words within ``budget``.

    Words are counted in groups, a window of groups per call, and one by one only where a
    group straddles a cut: memory stays flat and calls few even for a 50 MB line.
    """
    runs = _Runs(budget)
    groups = _word_groups(text, start, end)
    while window := list(islice(groups, _WORD_WINDOW)):
        spans = [(group[0].start(), group[-1].end()) for group in window]
        for group, cost in zip(window, costs([text[s:e] for s, e in spans]), strict=True):
            if runs.fits(cost):
                runs.add(group[0].start(), group[-1].end(), cost)
                continue
            for word, word_cost in zip(group, costs([w.group() for w in group]), strict=True):
                if word_cost > budget:
                    runs.flush()
                    runs.units += _cut_chars(text, word.start(), word.end(), budget, costs)
                else:
                    runs.add(word.start(), word.end(), word_cost)
    runs.flush()
    return runs.units


def _prefix_cut(text: str, start: int, hi: int, budget: int,
                costs: _Costs) -> tuple[int, int] | None:
    """Where ``budget`` tokens of ``text[start:hi]`` end, read from the tokenizer's offsets
    (one encoding instead of a search), checked by counting the piece; None when the counter
    gives no offsets or the check fails (the search decides then). CJK text, a token a
    character and no spaces, took 135 s a million characters by search alone."""
    prefix_end = getattr(costs.count_tokens, "prefix_end", None)
    at = prefix_end(text[start:hi], budget) if prefix_end is not None else None
    if at is None:
        return None
    end = min(start + at, start + budget * CHARS_PER_TOKEN_MAX)
    if end <= start:
        return None
    cost = costs([text[start:end]])[0]
    return (end, cost) if cost <= budget else None


def _cut_chars(text: str, start: int, end: int, budget: int, costs: _Costs) -> list[_Unit]:
    """Cut one over-long word into pieces within ``budget``, by batched 16-ary search."""
    units: list[_Unit] = []
    ratio = 0.0  # characters per token of the piece before: where to look for the next cut
    while start < end:
        fit, fit_cost = start + 1, -1  # at least one character, so the loop always advances
        hi = min(end, start + max(64, budget * CHARS_PER_TOKEN_MAX))
        near = min(hi, start + int(ratio * budget * 2) + 64) if ratio else hi
        if near < hi and (at := _prefix_cut(text, start, near, budget, costs)) is not None:
            fit, fit_cost = at
            units.append(_Unit(start, fit, fit_cost))
            ratio, start = (fit - start) / max(1, fit_cost), fit
            continue
        # Unknown runs (no break point, one token to the model) fill the character cap
        # exactly: try the longest piece first, so a 5 MB line costs one count per chunk.
        longest = costs([text[start:hi]])[0]
        if longest <= budget:
            fit, fit_cost = hi, longest
        elif (at := _prefix_cut(text, start, hi, budget, costs)) is not None:
            fit, fit_cost = at
            hi = fit
        else:
            # Tokens grow about in step with characters: a bound near the cut, checked, keeps
            # the probes ~budget characters long instead of the whole window.
            guess = start + (hi - start) * budget * 3 // (2 * longest) + 16
            if guess < hi and costs([text[start:guess]])[0] > budget:
                hi = guess
        while fit < hi:
            probes = sorted({fit + (hi - fit) * k // 16 for k in range(17)})
            probe_costs = costs([text[start:p] for p in probes])
            fitting = [(p, c) for p, c in zip(probes, probe_costs, strict=True) if c <= budget]
            if not fitting:  # not even one character fits: take it anyway
                fit_cost = probe_costs[0]
                break
            fit, fit_cost = fitting[-1]
            above = [p for p in probes if p > fit]
            hi = above[0] - 1 if above else fit
        if fit_cost < 0:
            fit_cost = costs([text[start:fit]])[0]
        units.append(_Unit(start, fit, fit_cost))
        ratio, start = (fit - start) / max(1, fit_cost), fit
    return units


# --- packing and overlap --------------------------------------------------------------------


def _pack(units: Sequence[_Unit], first_limit: int, limit: int) -> list[list[_Unit]]:
    """Greedy runs of units; chunks after the first keep room for the overlap."""
    groups: list[list[_Unit]] = []
    run: list[_Unit] = []
    total = 0
    for unit in units:
        if run and total + unit.cost > (limit if groups else first_limit):
            groups.append(run)
            run, total = [], 0
        run.append(unit)
        total += unit.cost
    if run:
        groups.append(run)
    return groups


_FENCE_LINE = re.compile(r"^[ \t]{0,3}(?:`{3,}|~{3,}|\$\$|%%).*$", re.M)
_SENTENCE_START = re.compile(r"(?:[.!?…][\"'”’)\]*_]*\s+|[。！？]\s*|\n\s*)")


def _overlap_starts(
    text: str, requests: Sequence[tuple[int, int, int]], costs: _Costs
) -> list[int | None]:
    """For each previous chunk ``(start, end, reserve)``: where its longest tail of whole
    sentences (or lines) within ``reserve`` tokens begins, or None when none fits."""
    candidates: list[list[int]] = []
    for prev_start, prev_end, reserve in requests:
        lo = max(prev_start, prev_end - reserve * _OVERLAP_CHARS_PER_TOKEN)
        # Never start inside a fenced block's tail: a lone closing fence is not context.
        for fence in _FENCE_LINE.finditer(text, lo, prev_end):
            lo = fence.end()
        starts = [m.end() for m in _SENTENCE_START.finditer(text, lo, prev_end)]
        candidates.append([s for s in starts if prev_start < s < prev_end] if reserve > 0 else [])
    # Count each sentence once and sum from the end: the tails overlap each other.
    sentences = [
        text[s:e]
        for found, (_, end, _) in zip(candidates, requests, strict=True)
        for s, e in zip(found, [*found[1:], end], strict=False)
    ]
    sentence_costs = costs(sentences)
    out: list[int | None] = []
    pos = 0
    for found, (_, _, reserve) in zip(candidates, requests, strict=True):
        tail, start = 0, None
        for k in range(len(found) - 1, -1, -1):
            tail += sentence_costs[pos + k]
            if tail > reserve:
                break
            start = found[k]
        out.append(start)
        pos += len(found)
    return out


def _section_spans(
    text: str, sections: Sequence[_Section], bases: Sequence[int], overlap: int, costs: _Costs
) -> list[list[tuple[int, int]]]:
    """Chunk spans of each section, packed so the estimated token count fits ``bases[i]``."""
    reserves = [max(0, min(overlap, base // 4)) for base in bases]
    limits = [base - reserve for base, reserve in zip(bases, reserves, strict=True)]
    pieces = (
        _Piece(i, block.start, block.end, limits[i], block.levels)
        for i, section in enumerate(sections)
        for block in _blocks(text, section)
    )
    units = _fit_units(text, pieces, costs)
    groups = [_pack(units.get(i, []), bases[i], limits[i]) for i in range(len(sections))]
    requests = [
        (runs[k - 1][0].start, runs[k - 1][-1].end, reserves[i])
        for i, runs in enumerate(groups)
        for k in range(1, len(runs))
    ]
    overlaps = iter(_overlap_starts(text, requests, costs))
    spans: list[list[tuple[int, int]]] = []
    for runs in groups:
        section_spans = []
        for k, run in enumerate(runs):
            overlap_start = next(overlaps) if k else None
            start = run[0].start if overlap_start is None else overlap_start
            section_spans.append((start, run[-1].end))
        spans.append(section_spans)
    return spans


# --- public API -----------------------------------------------------------------------------


def embed_prefix(title: str, heading_path: Sequence[str]) -> str:
    """The context line embedded before a chunk: ``"title > h1 > h2"`` (empty parts skipped).

    A chunk's ``embed_text`` is ``prefix + "\n\n" + text`` (just the text when it is empty).
    """
    parts = (" ".join(part.split()) for part in (title, *heading_path))
    return " > ".join(part for part in parts if part)


def embed_text(prefix: str, chunk: str) -> str:
    """What is embedded for a chunk: its prefix (``embed_prefix``), a blank line, its text."""
    return f"{prefix}\n\n{chunk}" if prefix else chunk


def _fit_prefixes(prefixes: Sequence[str], limit: int, costs: _Costs) -> dict[str, tuple[str, int]]:
    """Each distinct prefix, cut at word boundaries to at most ``limit`` tokens, with its cost.

    A title or heading path longer than half the model's window would leave no room for text.
    """
    distinct = sorted(set(prefixes))
    out: dict[str, tuple[str, int]] = {}
    for prefix, cost in zip(distinct, costs(distinct), strict=True):
        if cost <= limit:
            out[prefix] = (prefix, cost)
        else:
            first = _cut_words(prefix, 0, len(prefix), limit, costs)[0]
            out[prefix] = (prefix[: first.end], first.cost)
    return out


@dataclass(frozen=True)
class _Note:
    """One note being chunked: what every packing attempt needs."""

    text: str
    sections: Sequence[_Section]
    prefixes: Sequence[str]  # embed prefix of each section
    hidden: Ranges  # what reading view does not show: left out of what is embedded
    max_tokens: int
    overlap: int
    costs: _Costs


def chunk_markdown(
    title: str,
    text: str,
    *,
    count_tokens: TokenCounter,
    max_tokens: int,
    overlap_tokens: int = 32,
) -> list[ChunkDraft]:
    """Split a markdown note body into chunks whose ``embed_text`` fits ``max_tokens``.

    A chunk's ``text`` is its slice of ``text``; its ``embed_text`` is the title and heading
    prefix and what reading view shows of that slice (``ragd.daemon.text.reading``). Packing
    counts the slice with its markup, so the budget holds for what is embedded, which is
    never longer.

    Each heading opens a section (heading-only sections are merged into the next); a section's
    paragraphs, lists, tables and code blocks are packed greedily, and a block too big for one
    chunk is cut at sentences, then lines, then words, then characters. When a section spills
    over several chunks, each following chunk repeats the last sentences of the previous one,
    up to ``overlap_tokens``. ``count_tokens`` must count the special tokens the model adds.
    Offsets are into ``text``; ordinals run in document order. A prefix longer than half of
    ``max_tokens`` is cut at a word boundary. Raises ValueError when ``max_tokens`` leaves no
    room for text.
    """
    if not text.strip():
        return []
    costs = _Costs(count_tokens)
    if max_tokens < costs.special + 8:
        raise ValueError(f"max_tokens={max_tokens} leaves no room for text")
    sections = _sections(text, find_headings(text))
    wanted = [embed_prefix(title, s.path) for s in sections]
    fitted = _fit_prefixes(wanted, (max_tokens - costs.special) // 2, costs)
    note = _Note(text, sections, [fitted[p][0] for p in wanted], hidden(text), max_tokens,
                 overlap_tokens, costs)
    # Token budget of each section's text, net of the special tokens and the prefix.
    bases = [max_tokens - costs.special - fitted[p][1] for p in wanted]
    done: dict[int, list[tuple[int, int, int, str, int]]] = {}
    todo = list(range(len(sections)))
    for attempt in range(_MAX_REPACKS):
        todo = _pack_and_verify(note, bases, todo, done)
        if not todo or any(bases[i] - attempt < 1 for i in todo):
            break
        # An estimate was wrong (the tokenizer is not additive there): pack those tighter.
        log.debug("re-packing %d sections of %r", len(todo), title)
        for i in todo:
            bases[i] -= attempt
    if todo:
        raise RuntimeError(f"could not fit the chunks of {title!r} into {max_tokens} tokens")
    rows = [row for i in range(len(sections)) for row in done[i]]
    return [
        ChunkDraft(n, text[s:e], embed, sections[i].path, s, e, count)
        for n, (i, s, e, embed, count) in enumerate(rows)
    ]


def _pack_and_verify(
    note: _Note,
    bases: list[int],
    todo: Sequence[int],
    done: dict[int, list[tuple[int, int, int, str, int]]],
) -> list[int]:
    """Pack sections ``todo`` and count their chunks for real. Sections whose chunks all fit go
    into ``done``; the others get their budget lowered by their excess and are returned."""
    sections = [note.sections[i] for i in todo]
    spans = _section_spans(note.text, sections, [bases[i] for i in todo], note.overlap, note.costs)
    rows = [
        [(i, s, e, embed_text(note.prefixes[i], reading(note.text, note.hidden, s, e)))
         for s, e in section_spans]
        for i, section_spans in zip(todo, spans, strict=True)
    ]
    counts = iter(note.costs.count_tokens([row[3] for section in rows for row in section]))
    retry = []
    for i, section_rows in zip(todo, rows, strict=True):
        counted = [(*row, next(counts)) for row in section_rows]
        excess = max((row[4] for row in counted), default=0) - note.max_tokens
        if excess <= 0:
            done[i] = counted
        else:
            bases[i] -= excess
            retry.append(i)
    return retry


def tokenizer_counter(tokenizer_json: str | Path) -> TokenCounter:
    """A token counter for :func:`chunk_markdown` from a HuggingFace ``tokenizer.json``.

    Truncation and padding are switched off (the model's file truncates at 128 by default),
    and special tokens are counted, so the count is what the model would see untruncated.
    """
    from tokenizers import Tokenizer  # light, but only the indexer needs it

    tokenizer = Tokenizer.from_file(str(tokenizer_json))
    tokenizer.no_truncation()
    tokenizer.no_padding()

    def count_tokens(texts: Sequence[str]) -> list[int]:
        counts: list[int] = []
        # Slices bound the memory held by Encoding objects when millions of words are counted.
        for i in range(0, len(texts), _ENCODE_BATCH):
            batch = tokenizer.encode_batch(
                list(texts[i : i + _ENCODE_BATCH]), add_special_tokens=True
            )
            counts += [len(encoding.ids) for encoding in batch]
        return counts

    def prefix_end(text: str, tokens: int) -> int | None:
        """The end (in characters) of the first ``tokens`` tokens of ``text``; None when
        it holds no more than that."""
        offsets = tokenizer.encode(text, add_special_tokens=False).offsets
        return None if len(offsets) <= tokens else int(offsets[tokens - 1][1])

    count_tokens.prefix_end = prefix_end  # type: ignore[attr-defined]
    return count_tokens
