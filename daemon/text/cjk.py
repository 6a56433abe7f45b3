"""Chinese, Japanese and Korean text for the keyword index: overlapping character bigrams.

These scripts put no spaces between words, so an analyser that splits on spaces and
punctuation takes a whole clause for one "word", and no query ever matches it. Each run of
CJK characters (Han, Hiragana, Katakana, Hangul) becomes its overlapping bigrams instead,
as Lucene's CJK analyser does: "東京タワー" -> 東京 京タ タワ ワー. A query is analysed the
same way, so a word of two characters or more is found wherever it occurs, and a query of
several characters matches as a phrase of consecutive bigrams. A run of one character is
itself a term. Positions run on from one run to the next across spaces and punctuation,
as they do between Latin words: a Korean phrase of two words still matches. Every other
character keeps the keyword index's own analysis (words, lowercase, stop words, stemming):
text without CJK characters is analysed exactly as before.

An index also gets every character of the longer runs as a term of its own, after the
text's terms so that the bigrams keep consecutive positions: a query of one character
(猫) then finds it inside longer runs too. Queries never ask for those unigrams otherwise.
Decision 0021 has the measurements behind both choices.

Pure functions, standard library only; the keyword stores (daemon/stores/fulltext.py,
tantivy_store.py) call them.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence

# Han (with 々 〆 〇 〻 and the extension planes), Hiragana, Katakana (without the middle
# dot ・, a word separator), half-width Katakana (normalised below) and Hangul. The
# combining voiced marks (U+3099-309A) belong to a run so that NFKC can compose them.
_CJK_CLASS = (
    "\u3005-\u3007\u303b"
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
    "\u3041-\u3096\u3099\u309a\u309d-\u309f"
    "\u30a1-\u30fa\u30fc-\u30ff\u31f0-\u31ff\uff66-\uff9f"
    "\u1100-\u11ff\u3131-\u318e\ua960-\ua97f\uac00-\ud7a3\ud7b0-\ud7ff"
)
_RUN = re.compile(f"[{_CJK_CLASS}]+")
_FULLWIDTH_ASCII = "\uff01-\uff5e"  # Ａ-Ｚ, ０-９ ...: Japanese text writes Latin this way
_NEEDS_US = re.compile(f"[{_CJK_CLASS}{_FULLWIDTH_ASCII}]")
_FULLWIDTH = re.compile(f"[{_FULLWIDTH_ASCII}]")
_TO_ASCII = {c: c - 0xFEE0 for c in range(0xFF01, 0xFF5F)}
_WORD = re.compile(r"\w")

MAX_WORDS = 8  # CJK words of a query matched as phrases, as the engine caps quoted ones
# Whether an index adds the unigrams of runs of two characters or more (measured in
# decision 0021: single-character queries found 11 % of their chunks without them).
INDEX_UNIGRAMS = True


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds anything this module changes (CJK or full-width Latin)."""
    return _NEEDS_US.search(text) is not None


def is_cjk(term: str) -> bool:
    """Whether an analysed term is a CJK gram (the stores keep one-character ones)."""
    return _RUN.fullmatch(term) is not None


def normalise_run(run: str) -> str:
    """A CJK run in NFKC (half-width Katakana to full width, compatibility ideographs to
    unified ones, a kana and its combining voiced mark composed), letters only."""
    if not unicodedata.is_normalized("NFKC", run):
        run = unicodedata.normalize("NFKC", run)
    # A combining mark that composed with nothing is no letter: keep it out of the grams.
    return run if run.isalnum() else "".join(c for c in run if c.isalnum())


def bigrams(run: str) -> list[str]:
    """The overlapping bigrams of a normalised run; a run of one character is its own term."""
    if len(run) < 2:
        return [run] if run else []
    return [run[i:i + 2] for i in range(len(run) - 1)]


def _segments(text: str) -> Iterable[tuple[bool, str]]:
    """``text`` cut into (is a CJK run, piece), in order; full-width Latin made ASCII."""
    if _FULLWIDTH.search(text):
        text = text.translate(_TO_ASCII)
    pos = 0
    for m in _RUN.finditer(text):
        if m.start() > pos:
            yield False, text[pos:m.start()]
        yield True, normalise_run(m.group())
        pos = m.end()
    if pos < len(text):
        yield False, text[pos:]


def terms(text: str, latin: Callable[[str], list[str]], *, unigrams: bool = False
          ) -> tuple[list[str], list[str]]:
    """The terms of ``text`` in order, and the unigrams an index adds after them.

    ``latin`` analyses everything outside CJK runs (the store's own analyser). ``unigrams``
    (for indexing, when INDEX_UNIGRAMS) returns each character of the runs of two or more.
    """
    if not has_cjk(text):
        return latin(text), []
    out: list[str] = []
    extra: list[str] = []
    for cjk, piece in _segments(text):
        if not cjk:
            if _WORD.search(piece):  # not only punctuation and spaces between two runs
                out.extend(latin(piece))
            continue
        out.extend(bigrams(piece))
        if unigrams and len(piece) > 1:
            extra.extend(piece)
    return out, extra


def rewrite(text: str, *, unigrams: bool = False) -> str:
    """``text`` for an analyser that cuts words at anything not a letter or digit
    (tantivy's simple tokenizer): each CJK run replaced by its bigrams between spaces, and
    with ``unigrams`` the characters of longer runs appended, one per word. Text without
    CJK is returned as it is, so its analysis is unchanged."""
    if not has_cjk(text):
        return text
    parts: list[str] = []
    extra: list[str] = []
    for cjk, piece in _segments(text):
        if not cjk:
            parts.append(piece)
            continue
        parts.append(" " + " ".join(bigrams(piece)) + " ")
        if unigrams and len(piece) > 1:
            extra.extend(piece)
    if extra:
        parts.append("\n" + " ".join(extra))
    return "".join(parts)


def words(terms: Sequence[str]) -> list[list[str]]:
    """The CJK words of three characters or more among a query's terms, as phrases of
    bigrams: each run of bigrams where one ends with the character the next begins with.

    The keyword leg matches them as quoted phrases, on top of the OR of every term: a chunk
    that holds the word itself then ranks above one that holds its bigrams apart (measured
    in decision 0021). Two words that only touch ("東京 京都") chain into one phrase, which
    the text "東京都" holds as well as "東京 京都": positions run on across spaces and
    punctuation, as a phrase of Latin words ignores the commas between them.
    """
    out: list[list[str]] = []
    chain: list[str] = []
    for term in terms:
        gram = len(term) == 2 and is_cjk(term)
        if gram and chain and chain[-1][1] == term[0]:
            chain.append(term)
            continue
        if len(chain) > 1:
            out.append(chain)
        chain = [term] if gram else []
    if len(chain) > 1:
        out.append(chain)
    return out[:MAX_WORDS]


def with_words(phrases: Sequence[Sequence[str]], terms: Sequence[str]) -> list[list[str]]:
    """A query's quoted ``phrases`` and then its CJK words (``words``) not quoted already."""
    quoted = [list(p) for p in phrases]
    return quoted + [w for w in words(terms) if w not in quoted]
