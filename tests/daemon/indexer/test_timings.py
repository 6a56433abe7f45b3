"""A small job's timing: its wait and its run split by what the writer did meanwhile."""

from __future__ import annotations

import threading

from ragd.daemon.indexer.timings import EMBEDDING_TAG, Spans, job_timing, summary


def test_spans_between_counts_only_the_overlap() -> None:
    spans = Spans()
    spans.add("commit", 1.0, 2.0)
    spans.add("keyword_commit", 2.0, 5.0)
    spans.add("commit", 9.0, 10.0)
    assert spans.between(1.5, 3.0) == {"commit": 0.5, "keyword_commit": 1.0}
    assert spans.between(5.0, 9.0) == {}


def test_the_embedding_threads_phases_are_tagged_and_not_the_writers() -> None:
    spans = Spans()

    def embed() -> None:
        spans.tag_thread(EMBEDDING_TAG)
        spans.add("lock_wait", 0.0, 2.0)

    thread = threading.Thread(target=embed)
    thread.start()
    thread.join()
    spans.add("keyword_commit", 0.0, 1.0)
    t = job_timing(collection="obsidian", paths=["a.md"], queued=0.0, started=2.0,
                   visible=2.5, ended=3.0, spans=spans)
    # Writer time not covered by a span is "other"; the embedding thread's is beside it.
    assert t["wait"] == {"embedding/lock_wait": 2.0, "keyword_commit": 1.0, "other": 1.0}
    assert t["wait_s"] == 2.0 and t["visible_s"] == 2.5 and t["total_s"] == 3.0
    assert t["run"] == {"other": 1.0} and t["paths"] == ["a.md"] and t["finished"]
    line = summary([t])
    assert line.startswith("obsidian (1 paths): visible 2.5 s")
    assert "wait.embedding/lock_wait 2.000" in line and "wait.keyword_commit 1.000" in line


def test_ragd_status_says_how_soon_the_last_saves_were_searchable() -> None:
    from ragd.daemon.cli.remote import format_status

    spans = Spans()
    spans.add("keyword_commit", 0.0, 0.4)
    jobs = [job_timing(collection="obsidian", paths=["a.md"], queued=0.0, started=0.5,
                       visible=0.6, ended=0.7, spans=spans),
            job_timing(collection="obsidian", paths=["b.md"], queued=5.0, started=5.01,
                       visible=5.1, ended=5.2, spans=spans)]
    text = format_status({"version": "0.1.0", "pid": 7, "state": "indexing",
                          "paths": {"log": "/l"}, "small_jobs": jobs})
    assert "  last 2 saves searchable in at most 0.60 s (waited 0.40 s for keyword_commit)" \
        in text.splitlines()
