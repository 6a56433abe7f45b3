"""Function words of other languages for the concept candidates (decision 0036).

``extract.STOPWORDS`` is English. The lists of ``stopwordsiso`` (MIT, offline) cover 58 more
languages, but one language's function word is another's content word (German "die", "also",
"man" are English words), so a list applies only where it cannot remove a word of another
language:

- the document's own language, from its metadata (a Calibre book's languages) when the text
  does not contradict it, else the language whose list covers the most of its words, well
  ahead of the others (``detect``); English keeps ``STOPWORDS`` (stopwordsiso's English list
  holds "information", "research", "world");
- for a word in a script other than Latin whose language is not known, every list's words in
  that script: a word can only equal a word of its own script, and the languages sharing a
  non-Latin script are few (Arabic, Persian, Urdu, Kurdish; Russian, Ukrainian, Bulgarian).

Hebrew and Arabic write some function words as prefixes ("שהוא" is "that he", "وهذا" "and
this"): such a word is a function word when what follows the prefix is one.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

# ISO 639-2 and 639-3 codes (Calibre's) of the languages stopwordsiso covers, to its 639-1.
_ISO3 = {
    "afr": "af", "ara": "ar", "arb": "ar", "bul": "bg", "ben": "bn", "bre": "br", "cat": "ca",
    "ces": "cs", "cze": "cs", "dan": "da", "deu": "de", "ger": "de", "ell": "el", "gre": "el",
    "eng": "en", "epo": "eo", "spa": "es", "est": "et", "eus": "eu", "baq": "eu", "fas": "fa",
    "per": "fa", "pes": "fa", "fin": "fi", "fra": "fr", "fre": "fr", "gle": "ga", "glg": "gl",
    "guj": "gu", "hau": "ha", "heb": "he", "hin": "hi", "hrv": "hr", "hun": "hu", "hye": "hy",
    "arm": "hy", "ind": "id", "ita": "it", "jpn": "ja", "kor": "ko", "kur": "ku", "ckb": "ku",
    "kmr": "ku", "lat": "la", "lit": "lt", "lav": "lv", "lvs": "lv", "mar": "mr", "msa": "ms",
    "may": "ms", "zsm": "ms", "nld": "nl", "dut": "nl", "nor": "no", "nob": "no", "nno": "no",
    "pol": "pl", "por": "pt", "ron": "ro", "rum": "ro", "rus": "ru", "slk": "sk", "slo": "sk",
    "slv": "sl", "som": "so", "sot": "st", "swe": "sv", "swa": "sw", "swh": "sw", "tha": "th",
    "tgl": "tl", "fil": "tl", "tur": "tr", "ukr": "uk", "urd": "ur", "vie": "vi", "yor": "yo",
    "zho": "zh", "chi": "zh", "cmn": "zh", "zul": "zu", "iw": "he", "in": "id",
}
# Marks a reader may leave out: Hebrew points and cantillation, Arabic harakat and tatweel.
# They are folded away so that a word is one key with or without them.
_OPTIONAL_MARKS = re.compile("[\u0591-\u05bd\u05bf\u05c1\u05c2\u05c4\u05c5\u05c7\u0610-\u061a"
                             "\u0640\u064b-\u065f\u0670\u06d6-\u06dc\u06df-\u06e4\u06e7\u06e8"
                             "\u06ea-\u06ed]")
# Prefix letters, how many at most, and the shortest rest: a Hebrew prefix before a word of two
# letters makes too many content words ("בכי" crying, "כלי" tool, "מלא" full).
_PREFIXES = {"HEBREW": ("והשבכלמ", 2, 3), "ARABIC": ("وفبلك", 1, 2)}
# stopwordsiso's Hebrew list (194 words) lacks common function words ("עוד", "כבר", "יותר",
# "הייתה"); both lists lack the speech verbs and the words that never name a topic alone that
# STOPWORDS holds for English ("said", "asked", "thing", "time", "good"). Added to its lists.
_MORE = {
    "he": """עוד כבר עכשיו עדיין יותר פחות הרבה מאוד כדי היו הייתה היינו הייתי יהיו תהיה אחד
          אחת שני שתי ממש מיד פתאום קצת תוך אפשר צריך צריכה צריכים נראה נראית כמה משהו כלום
          הכל הזה הזאת הזו האלה שלא ולא שזה זו כאילו בעצם אמר אמרה אמרו אומר אומרת שאל ענה
          ענתה חשב חשבה ראה ראתה טוב רגע פעם דבר דברים יום""",
    "ar": """أيضا الآن جدا أخرى الأخرى آخر داخل شيء أشياء مرة نفسها لقد حين بعدما ربما قليلا
          كثيرا قال قالت يقول تقول""",
}
DETECT_CHARS = 300_000  # the language is read from the first 300,000 characters
MIN_WORDS = 100  # fewer words say nothing reliable about the language
MIN_SHARE = 0.15  # the best list covers at least this share of the words
MARGIN = 1.4  # ... and this many times the next language's (Spanish / Galician: 1.5)
_TOKEN = re.compile(r"[^\W\d_]+")


def fold(text: str) -> str:
    """Lower case, without the optional marks of Hebrew and Arabic."""
    return _OPTIONAL_MARKS.sub("", text.lower())


def script(word: str) -> str:
    """The script of a word's first letter, by its Unicode name ("LATIN", "ARABIC", "CJK")."""
    for ch in word:
        if ch.isalpha():
            return unicodedata.name(ch, "UNKNOWN").split(" ", 1)[0]
    return ""


@functools.cache
def _lists() -> dict[str, frozenset[str]]:
    """Language -> its one-word stopwords, folded."""
    import stopwordsiso

    return {lang: frozenset(fold(w) for w in [*stopwordsiso.stopwords(lang),
                                              *_MORE.get(lang, "").split()]
                            if w.strip() and " " not in w.strip() and script(w))
            for lang in sorted(stopwordsiso.langs())}


@functools.cache
def _by_script() -> dict[str, frozenset[str]]:
    """Non-Latin script -> every list's words in it."""
    out: dict[str, set[str]] = {}
    for words in _lists().values():
        for w in words:
            s = script(w)
            if s != "LATIN":
                out.setdefault(s, set()).add(w)
    return {s: frozenset(ws) for s, ws in out.items()}


def codes(values: Iterable[Any]) -> tuple[str, ...]:
    """The stopwordsiso codes of metadata language values ("heb", "ar", "en-US")."""
    out = []
    for v in values:
        if not isinstance(v, str):
            continue
        code = v.strip().lower().replace("_", "-").split("-", 1)[0]
        code = _ISO3.get(code, code)
        if code in _lists() and code not in out:
            out.append(code)
    return tuple(out)


def metadata_languages(metadata: dict[str, Any]) -> tuple[str, ...]:
    """A document's languages as its metadata gives them (Calibre: ``languages``)."""
    langs = metadata.get("languages") or metadata.get("language") or ()
    return codes([langs] if isinstance(langs, str) else langs)


def word_counts(texts: Sequence[str], limit: int = DETECT_CHARS) -> Counter[str]:
    """Folded word -> occurrences over the first ``limit`` characters."""
    counts: Counter[str] = Counter()
    used = 0
    for t in texts:
        if used >= limit:
            break
        part = t[:limit - used]
        used += len(part)
        counts.update(_TOKEN.findall(fold(part)))
    return counts


def shares(words: Counter[str]) -> dict[str, float]:
    """Language -> the share of the words its stopword list holds."""
    total = sum(words.values()) or 1
    return {lang: sum(n for w, n in words.items() if w in stops) / total
            for lang, stops in _lists().items()}


def detect(words: Counter[str]) -> str | None:
    """The language whose stopwords cover the most words, when it is clearly ahead."""
    if sum(words.values()) < MIN_WORDS:
        return None
    ranked = sorted(shares(words).items(), key=lambda t: -t[1])
    (best, top), (_, second) = ranked[0], ranked[1]
    return best if top >= MIN_SHARE and top >= MARGIN * second else None


def document_languages(declared: Sequence[str], words: Counter[str]) -> tuple[str, ...]:
    """The languages whose lists apply: the declared ones unless the text clearly is in
    another (a library that labels every book with one language), else the detected one."""
    found = detect(words)
    if declared and (found is None or found in declared):
        return tuple(declared)
    if declared and found is not None:
        share = shares(words)
        if max(share[d] for d in declared) >= share[found] / MARGIN:
            return tuple(declared)
    return (found,) if found else ()


@functools.cache
def stopwords_for(languages: tuple[str, ...]) -> frozenset[str]:
    """The extra stopwords of a document in ``languages`` (empty: not known): their lists
    (English keeps its own), and for the other non-Latin scripts, all their lists' words."""
    lists = _lists()
    own = frozenset().union(*(lists[lang] for lang in languages if lang != "en"))
    covered = {script(w) for lang in languages for w in lists.get(lang, ())}
    other = frozenset().union(*(ws for s, ws in _by_script().items() if s not in covered))
    return own | other


def is_function_word(word: str, stops: frozenset[str]) -> bool:
    """Whether a folded word is in ``stops``, or is one behind Hebrew or Arabic prefixes."""
    if word in stops:
        return True
    if not word or ord(word[0]) < 0x0590:  # no prefixes in the scripts before Hebrew
        return False
    letters, most, rest = _PREFIXES.get(script(word), ("", 0, 0))
    for i in range(min(most, len(word) - rest)):
        if word[i] not in letters:
            return False
        if word[i + 1:] in stops:
            return True
    return False
