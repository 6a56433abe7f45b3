"""CJK runs as character bigrams; every other character analysed as before."""

from __future__ import annotations

import unicodedata

from ragd.daemon.text import cjk


def split(text: str) -> list[str]:
    """A stand-in for a store's own analyser: lower-cased words."""
    return text.lower().split()


def test_runs_become_overlapping_bigrams_and_a_lone_character_is_a_term() -> None:
    assert cjk.terms("東京タワー", split) == (["東京", "京タ", "タワ", "ワー"], [])
    assert cjk.terms("猫 と 犬", split) == (["猫", "と", "犬"], [])
    assert cjk.terms("한국어 사전", split)[0] == ["한국", "국어", "사전"]
    # the middle dot separates words: no bigram spans it
    assert cjk.terms("ジョン・スミス", split)[0] == ["ジョ", "ョン", "スミ", "ミス"]


def test_latin_text_goes_through_the_stores_analyser_unchanged() -> None:
    latin = "The Herons, running; e.g. 3.5 km — café"
    assert cjk.terms(latin, split) == (split(latin), [])
    assert cjk.rewrite(latin) == latin and cjk.rewrite(latin, unigrams=True) == latin
    assert not cjk.has_cjk(latin)


def test_mixed_text_keeps_word_order_and_splits_at_the_script_boundary() -> None:
    assert cjk.terms("Python入門 guide 第2版", split)[0] == [
        "python", "入門", "guide", "第", "2", "版"]
    # full-width Latin, common in Japanese text, reaches the analyser as ASCII
    assert cjk.terms("ＰＹＴＨＯＮの本", split)[0] == ["python", "の本"]


def test_runs_are_normalised_before_their_grams() -> None:
    assert cjk.terms("ｶﾞﾘ版", split)[0] == ["ガリ", "リ版"]  # half-width Katakana
    nfd = unicodedata.normalize("NFD", "ガリ版")  # a kana and its combining voiced mark
    assert nfd != "ガリ版" and cjk.terms(nfd, split)[0] == ["ガリ", "リ版"]


def test_an_index_adds_the_unigrams_of_longer_runs_after_the_text() -> None:
    words, extra = cjk.terms("猫 is 東京", split, unigrams=True)
    assert words == ["猫", "is", "東京"] and extra == ["東", "京"]  # 猫 is a term already
    text = cjk.rewrite("猫 is 東京都", unigrams=True)
    assert text.split() == ["猫", "is", "東京", "京都", "東", "京", "都"]
    assert cjk.rewrite("猫 is 東京都").split() == ["猫", "is", "東京", "京都"]


def test_query_words_are_chains_of_overlapping_bigrams() -> None:
    terms = cjk.terms("ガリ版 と 宮沢賢治 printing 東京", split)[0]
    assert cjk.words(terms) == [["ガリ", "リ版"], ["宮沢", "沢賢", "賢治"]]
    assert cjk.words(["heron", "blue"]) == [] and cjk.words(["東京"]) == []
    many = cjk.terms(" ".join(f"{a}{b}{c}" for a, b, c in zip(
        "一二三四五六七八九十", "山川田村木林森谷原野", "町市区県島島島島島島", strict=True)), split)[0]
    assert len(cjk.words(many)) == cjk.MAX_WORDS
    # a quoted word is not matched twice as a phrase
    assert cjk.with_words([["ガリ", "リ版"], ["blue", "heron"]], terms) == [
        ["ガリ", "リ版"], ["blue", "heron"], ["宮沢", "沢賢", "賢治"]]


def test_is_cjk_tells_grams_from_latin_terms() -> None:
    assert cjk.is_cjk("猫") and cjk.is_cjk("東京") and cjk.is_cjk("한국")
    assert not cjk.is_cjk("a") and not cjk.is_cjk("heron") and not cjk.is_cjk("東a")
