"""Key phrases and an extractive summary of one document, from its own text and vectors.

Pure functions: the caller gives the chunks, their vectors and an embedder. Candidates are
noun-phrase-like word runs (no stopword at either end, one to three words, no digits); each is
scored KeyBERT-style against the document's embedding (the mean of its chunk vectors) and by
its TF-IDF weight, and near-duplicates are dropped by maximal marginal relevance. The TF-IDF
order alone is the baseline the bench compares against (decision 0033).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ragd.daemon.concepts import languages

# English function words and words that never name a topic on their own.
STOPWORDS = frozenset("""
a about above after again against all almost also although always am among an and another any
anyone anything are around as at away back be became because become becomes been before being
below between both but by came can cannot could did do does doing done down during each either
else enough even ever every few first for found from further get gets got had has have having he
her here hers herself him himself his how however i if in into is it its itself just last least
less let like made make many may me might mine more most much must my myself never new next no
none nor not nothing now of off often on once one only onto or other others our ours ourselves out
over own per perhaps quite rather really said same say says see seen shall she should since so
some something still such than that the their theirs them themselves then there these they thing
things this those though through thus till to too toward towards two under until up upon us used
very was way we well were what whatever when where whether which while who whom whose why will
with within without would yes yet you your yours yourself yourselves mr mrs miss sir shall upon
chapter page section part contents figure table copyright isbn edition published press http
https www com org html said says went come comes going go goes know knew think thought look
looked looking took take taken give gave given tell told ask asked put little great good long
old nothing anything everything something day days time times man men woman women eyes hand
hands head face side whole moment left right way word words
change changes changed matter matters explain explains explained show shows showed shown
belong belongs start starts started argue argues argued expect expects expected read reads
measure measured seem seems seemed become felt feel feels keep kept turned turn turns
began begin begins called call calls need needs needed want wants wanted tried try tries
continued heard hear saw making using use uses means mean meant help helps let lets
remarked replied cried answered observed exclaimed whispered muttered shouted added returned
murmured repeated inquired responded declared sat stood smiled laughed nodded
""".split())  # noqa: SIM905


def _marks() -> str:
    """The combining marks of the Basic Multilingual Plane as a character class body: \\w
    leaves them out, and they are inside words (Arabic shadda, Hindi vowel signs)."""
    out, start = [], None
    for cp in range(0x300, 0x10001):
        mark = cp < 0x10000 and unicodedata.category(chr(cp)).startswith("M")
        if mark and start is None:
            start = cp
        elif not mark and start is not None:
            out.append(f"\\u{start:04x}-\\u{cp - 1:04x}")
            start = None
    return "".join(out)


_M = _marks()
_WORD = re.compile(rf"[^\W\d_](?:[\w'’-]|[{_M}])*(?:[^\W_]|[{_M}])|[^\W\d_]", re.UNICODE)
_BREAK = re.compile(r"[.,;:!?()\[\]{}\"“”«»|/\\<>=*#_~`\n\t—–]+")
_SENT = re.compile(r"(?<=[.!?])[\"”’)]?\s+(?=[\"“‘(]?[A-Z0-9])")
MAX_WORDS = 3
MAX_CANDIDATES = 120
MAX_WORD_CHARS = 24  # longer is a run of a script written without spaces, not a word


def normalise(phrase: str) -> str:
    """The concept key: lower case, single spaces, a plain English plural made singular."""
    words = phrase.lower().replace("’", "'").split()
    if words:
        last = words[-1]
        if len(last) > 4 and last.endswith("ies"):
            last = last[:-3] + "y"
        elif len(last) > 3 and last.endswith("s") and not last.endswith(("ss", "us", "is")):
            last = last[:-1]
        words[-1] = last
    return " ".join(words)


def _base(word: str) -> str:
    """A word without its possessive ending ("holmes's" -> "holmes")."""
    return word[:-2] if word.endswith(("'s", "’s")) else word


def _content(word: str, stops: frozenset[str] = frozenset()) -> bool:
    """Whether a folded word may be part of a concept; ``stops``: the document's function
    words of other languages (``languages.stopwords_for``)."""
    base = _base(word)
    return (2 < len(word) <= MAX_WORD_CHARS and base not in STOPWORDS
            and not word.startswith("'")
            and not (stops and languages.is_function_word(base, stops)))


def candidates(text: str, stops: frozenset[str] = frozenset()) -> Counter[str]:
    """Phrase key -> occurrences: word runs of 1..3 words between breaks and stopwords (the
    English ones and ``stops``), folded (lower case, no optional Hebrew or Arabic marks)."""
    counts: Counter[str] = Counter()
    for piece in _BREAK.split(languages.fold(text)):
        words = _WORD.findall(piece)
        run: list[str] = []
        for w in [*words, ""]:
            if w and _content(w, stops):
                run.append(w)
                continue
            for n in range(1, MAX_WORDS + 1):
                for i in range(len(run) - n + 1):
                    counts[" ".join(run[i:i + n])] += 1
            run = []
    return counts


@dataclass(frozen=True)
class Concept:
    """One concept of one document: its key, the name shown, and how it scored."""

    key: str
    name: str
    score: float
    similarity: float
    tfidf: float
    count: int


def _surface(counts: Mapping[str, int]) -> dict[str, tuple[str, int]]:
    """key -> (most frequent surface form, total count) over the forms of one key."""
    best: dict[str, tuple[str, int, int]] = {}
    for phrase, c in counts.items():
        k = normalise(phrase)
        name, top, total = best.get(k, (phrase, 0, 0))
        if c > top:
            name, top = phrase, c
        best[k] = (name, top, total + c)
    return {k: (name, total) for k, (name, _, total) in best.items()}


def tfidf_rank(counts: Mapping[str, int], df: Callable[[str], int], n_docs: int,
               limit: int = MAX_CANDIDATES) -> list[tuple[str, str, int, float]]:
    """(key, name, count, tf-idf) best first: the baseline, and the candidate pool. A phrase
    of several words counts a little more (it names a thing; its words alone may not)."""
    out = []
    for key, (name, count) in _surface(counts).items():
        if count < 2 and len(counts) > 200:
            continue
        idf = math.log((1 + n_docs) / (1 + df(key))) + 1.0
        weight = (1 + math.log(count)) * idf * (1.0 + 0.35 * (key.count(" ")))
        out.append((key, name, count, weight))
    out.sort(key=lambda t: (-t[3], t[0]))
    return out[:limit]


def variant(a: str, b: str) -> bool:
    """Whether two keys name the same thing shorter and longer: the shorter's words begin or
    end the longer's ("holmes", "sherlock holmes"; "moby", "moby dick"), or one word with and
    without its possessive. "gregor's mother" is not "gregor": the possessive stays."""
    wa, wb = a.split(), b.split()
    if len(wa) == len(wb) == 1:
        return _base(wa[0]) == _base(wb[0])
    if len(wa) > len(wb):
        wa, wb = wb, wa
    n = len(wa)
    return n < len(wb) and (wb[:n] == wa or wb[-n:] == wa)


def rank(pool: Sequence[tuple[str, str, int, float]], doc_vec: np.ndarray,
         phrase_vecs: np.ndarray, *, limit: int, weight_sim: float = 0.65,
         diversity: float = 0.5, dup_cos: float = 0.9) -> list[Concept]:
    """Score the pool against the document's vector and pick ``limit`` by maximal marginal
    relevance: relevant to the document, unlike what was picked already. A variant of a
    chosen concept is the same concept named again: it is dropped."""
    if not pool:
        return []
    sims = phrase_vecs @ doc_vec
    tf = np.array([p[3] for p in pool], dtype=np.float32)
    tf_n = tf / (tf.max() or 1.0)
    score = weight_sim * sims + (1 - weight_sim) * tf_n
    chosen: list[int] = []
    left = list(np.argsort(-score))
    while left and len(chosen) < limit:
        if chosen:
            red = (phrase_vecs[left] @ phrase_vecs[chosen].T).max(axis=1)
            mmr = score[left] - diversity * np.maximum(red - 0.5, 0.0)
            j = int(np.argmax(mmr))
            if red[j] >= dup_cos or any(variant(pool[left[j]][0], pool[c][0])
                                        for c in chosen):  # a near-synonym or a variant
                left.pop(j)
                continue
        else:
            j = 0
        chosen.append(int(left.pop(j)))
    return [Concept(pool[i][0], pool[i][1], round(float(score[i]), 4),
                    round(float(sims[i]), 4), round(float(tf_n[i]), 4), pool[i][2])
            for i in chosen]


def sentences(text: str) -> list[str]:
    """The sentences of a chunk, roughly (enough to choose whole ones for a summary)."""
    flat = re.sub(r"\s+", " ", re.sub(r"^#+ .*$", " ", text, flags=re.M)).strip()
    return [s.strip() for s in _SENT.split(flat) if 40 <= len(s.strip()) <= 400]


def summary(chunks: Sequence[str], chunk_vecs: np.ndarray, doc_vec: np.ndarray,
            concept_keys: Sequence[str], *, n: int = 3, max_chars: int = 700) -> str:
    """Extractive: from the chunks closest to the document's centre, the sentences that hold
    the most of its concepts, in reading order."""
    if not len(chunks):
        return ""
    central = np.argsort(-(chunk_vecs @ doc_vec))[:6]
    keys = [k for k in concept_keys[:30] if k]
    picked: list[tuple[float, int, int, str]] = []
    for ci in central:
        for si, sent in enumerate(sentences(chunks[int(ci)])):
            low = languages.fold(sent)
            hits = sum(1 for k in keys if k in low)
            if hits:
                picked.append((hits / (1 + len(sent) / 200), int(ci), si, sent))
    if not picked:
        picked = [(0.0, int(ci), 0, s) for ci in central[:1]
                  for s in sentences(chunks[int(ci)])[:n]]
    seen: set[str] = set()
    unique = []
    for item in sorted(picked, key=lambda t: -t[0]):
        if item[3] not in seen:
            seen.add(item[3])
            unique.append(item)
    best = unique[:n]
    out: list[str] = []
    used = 0
    for _, _, _, sent in sorted(best, key=lambda t: (t[1], t[2])):
        if sent in out:
            continue
        if used + len(sent) > max_chars and out:
            break
        out.append(sent)
        used += len(sent) + 1
    return " ".join(out)
