"""NumPy BM25 over Whoosh postings scores as Whoosh's own searcher does."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from chunk_fixtures import row

from ragd.daemon.models import Filters
from ragd.daemon.stores.fulltext import WhooshStore
from ragd.daemon.stores.whoosh_postings import Postings, PostingsCache

WORDS = [f"w{i}" for i in range(60)]


def _text(rng: random.Random, n: int) -> str:
    # Zipf-like: low-numbered words are frequent, so some terms span many blocks of 128
    # postings and some occur once (Whoosh inlines those in the term info).
    return " ".join(WORDS[min(int(rng.expovariate(0.15)), len(WORDS) - 1)] for _ in range(n))


def _store(tmp_path: Path) -> WhooshStore:
    """Three commits (so several segments), a deletion and an update in existing ones."""
    rng = random.Random(7)
    store = WhooshStore(tmp_path / "ix")
    mark = 0
    for batch in range(3):
        mark += 1
        rows = [row(batch * 300 + i, _text(rng, rng.randint(3, 60)), collection=f"c{i % 3}")
                for i in range(300)]
        store.apply(rows, [], mark, {})
    store.apply([row(5, "w59 w58 replaced")], [7, 301, 650], mark + 1, {})
    return store


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> WhooshStore:
    s = _store(tmp_path_factory.mktemp("postings"))
    yield s
    s.close()


def _whoosh_scores(store: WhooshStore, terms: list[str]) -> dict[int, float]:
    from whoosh import query as Q

    searcher = store._current()[0]
    found = searcher.search(Q.Or([Q.Term("text", t) for t in terms]), limit=None)
    return {hit.docnum: hit.score for hit in found}


@pytest.mark.parametrize("terms", [["w0"], ["w0", "w1", "w2"], ["w3", "w40", "w59"],
                                   ["w59", "replaced", "nothere"], ["w1", "w1", "w20"]])
def test_scores_equal_whoosh_bm25f_for_every_document(store: WhooshStore,
                                                      terms: list[str]) -> None:
    searcher, postings = store._current()
    assert len(postings.leaves) > 1  # several segments, one with deletions
    assert not postings.live.all()
    expected = _whoosh_scores(store, list(dict.fromkeys(terms)))
    scores = postings.scores(terms)
    got = {d: s for d, s in enumerate(scores) if s > 0 and postings.live[d]}
    assert got.keys() == expected.keys()
    for d, s in expected.items():
        assert got[d] == pytest.approx(s, rel=1e-9)


def test_top_ranks_as_whoosh_with_ties_to_the_lower_document(store: WhooshStore) -> None:
    searcher, postings = store._current()
    scores = postings.scores(["w0", "w5", "w30"])
    top = postings.top(scores, 20)
    expected = sorted(_whoosh_scores(store, ["w0", "w5", "w30"]).items(),
                      key=lambda kv: (-round(kv[1], 9), kv[0]))[:20]
    assert [d for d, _ in top] == [d for d, _ in expected]
    mask = np.zeros(postings.doc_count, dtype=bool)
    mask[::2] = True
    assert all(d % 2 == 0 for d, _ in postings.top(scores, 20, mask))


def test_deleted_and_updated_chunks_are_not_found(store: WhooshStore) -> None:
    def ids(query: str) -> list[int]:
        return [c for c, _ in store.search_any(store.analyse(query), [], 1000, Filters())]

    assert 5 in ids("replaced")
    everything = set(ids(" ".join(WORDS)))
    assert not everything & {7, 301, 650}
    assert len(everything) == 900 - 3


def test_containing_all_and_the_phrase_leg(store: WhooshStore) -> None:
    _, postings = store._current()
    words = store.analyse("w59 replaced")  # stemmed as the index is
    assert len(postings.containing_all(words)) == 1
    assert [c for c, _ in store.search_phrase(store.analyse("w58 replaced"), 5, Filters())] == [5]
    # Both words in chunk 5, but not in this order: no phrase.
    assert store.search_phrase(store.analyse("replaced w58"), 5, Filters()) == []
    assert store.search_phrase(store.analyse("w58 replaced"), 5,
                               Filters(collections=("c1",))) == []


def test_filters_restrict_without_changing_scores(store: WhooshStore) -> None:
    terms = ["w2", "w9"]
    unfiltered = dict(store.search_any(terms, [], 1000, Filters()))
    only = store.search_any(terms, [], 1000, Filters(collections=("c1",)))
    assert only
    for cid, score in only:
        assert score == pytest.approx(unfiltered[cid])
    assert store.search_any(terms, [], 10, Filters(collections=("none",))) == []


def test_the_cache_is_bounded_and_keeps_the_recent(tmp_path: Path) -> None:
    cache = PostingsCache(limit=1000)
    arrays = (np.zeros(50, dtype=np.int64), np.zeros(50, dtype=np.float32))  # 600 bytes
    cache.put(("s", "text", b"a"), arrays)
    cache.put(("s", "text", b"b"), arrays)
    assert cache.get(("s", "text", b"a")) is None and cache.get(("s", "text", b"b")) is not None
    assert cache.size == 600
    cache.put(("s", "text", b"big"), (np.zeros(200, dtype=np.int64), arrays[1]))
    assert cache.get(("s", "text", b"big")) is None  # larger than the whole cache


def test_an_empty_index_scores_nothing(tmp_path: Path) -> None:
    s = WhooshStore(tmp_path)
    _, postings = s._current()
    assert isinstance(postings, Postings) and postings.doc_count == 0
    assert s.search_any(["anything"], [], 10, Filters()) == []
    assert s.search_phrase(["any", "thing"], 10, Filters()) == []
    s.close()


def test_filter_masks_match_whooshs_own_filter_queries(tmp_path: Path) -> None:
    from ragd.daemon.search.filters import to_whoosh
    from ragd.daemon.stores.fulltext import filter_mask

    rng = random.Random(3)
    s = WhooshStore(tmp_path)
    for batch in range(3):  # three segments
        rows = [row(batch * 100 + i, _text(rng, 10), path=f"{'ab'[i % 2]}/{'cd'[i % 3 % 2]}/n.md",
                    collection=f"c{i % 4}", date=20240101 + (i % 28) if i % 5 else None,
                    tags=(("proj/alpha",) if i % 3 == 0 else ("misc",)),
                    sender=("Ada Lovelace <ada@example.org>" if i % 7 == 0 else ""))
                for i in range(100)]
        s.apply(rows, [], batch + 1, {})
    s.apply([], [3, 150], 4, {})
    cases = [Filters(collections=("c1", "c2")), Filters(collections=()),
             Filters(source_type="markdown"), Filters(date_from=20240110),
             Filters(date_to=20240105), Filters(date_from=20240103, date_to=20240103),
             Filters(folder="a/c"), Filters(folder="b"), Filters(tags=("proj",)),
             Filters(tags=("proj/alpha", "misc")), Filters(sender="lovelace"),
             Filters(sender="nobody"), Filters(collections=("c0",), date_from=20240115,
                                               folder="a")]
    with s._search_lock:
        searcher, postings = s._current()
        for f in cases:
            mask = filter_mask(searcher, postings, f)
            expected = set(searcher.docs_for_query(to_whoosh(f)))
            assert set(np.flatnonzero(mask & postings.live).tolist()) == expected, f
    assert any(len(set(searcher.docs_for_query(to_whoosh(f)))) for f in cases)
    s.close()


def test_segments_are_separate_files_never_copied_into_memory(store: WhooshStore) -> None:
    # A compound segment (.seg) is read through a BytesIO copy of each of its files.
    assert not list(store.dir.glob("*.seg"))
    assert list(store.dir.glob("*.pst"))
