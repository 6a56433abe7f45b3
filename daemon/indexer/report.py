"""What a sync pass tells its caller: progress while it runs, a report when it ends.

``Progress`` feeds the progress bars and ``indexing.remaining``; ``IndexReport`` is the
summary of one pass that the CLI prints and the daemon returns (``as_dict``). Plain data,
apart from the indexer that fills them in, so the runtime and the CLI read them without it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Progress:
    """A snapshot for progress bars and `indexing.remaining`."""

    collection: str
    phase: str  # scan | index | done
    done: int = 0
    total: int = 0
    chunks_embedded: int = 0


@dataclass
class IndexReport:
    """The summary of one sync pass over a collection."""

    collection: str
    total_found: int = 0  # files found (mail: the files that hold messages)
    indexed: int = 0
    containers: bool = False  # a collection of containers (mail): documents are messages
    unchanged: int = 0
    touched: int = 0
    moved: int = 0
    deleted: int = 0
    chunks_written: int = 0
    body_notes: int = 0  # sources read this pass that gave body chunks
    metadata_only_notes: int = 0  # ... that gave only properties chunks (no body text)
    chunks_deleted: int = 0
    embedded: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    skipped_files: list[tuple[str, str, str]] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)
    planned: int = 0  # sources this pass reads (new + modified)
    processed: int = 0  # of those, read so far (indexed, skipped or failed)
    seconds: float = 0.0
    stage_seconds: dict[str, float] = field(default_factory=dict)

    def add_stage(self, stage: str, seconds: float) -> None:
        self.stage_seconds[stage] = self.stage_seconds.get(stage, 0.0) + seconds

    def as_dict(self) -> dict[str, object]:
        return {
            "collection": self.collection, "total_found": self.total_found,
            "indexed": self.indexed, "unchanged": self.unchanged, "moved": self.moved,
            "deleted": self.deleted, "chunks_written": self.chunks_written,
            "chunks_deleted": self.chunks_deleted, "embedded": self.embedded,
            "body_notes": self.body_notes, "metadata_only_notes": self.metadata_only_notes,
            "skipped": dict(self.skipped),
            "skipped_files": [{"path": p, "code": c, "detail": d}
                              for p, c, d in self.skipped_files],
            "warnings": [{"path": p, "code": c} for p, c in self.warnings],
            "errors": [{"path": p, "error": e} for p, e in self.errors],
            "seconds": round(self.seconds, 3),
            "stage_seconds": {k: round(v, 3) for k, v in self.stage_seconds.items()},
        }
