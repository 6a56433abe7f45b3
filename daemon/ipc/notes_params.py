"""The note methods' params (decision 0028), built with the protocol's other models.

Kept apart from ``ragd.daemon.ipc.protocol`` so that the note tools add a few lines there; light
like it: pydantic is imported only when the daemon first validates a request.
"""

from __future__ import annotations

from typing import Any

NOTE_METHODS: tuple[str, ...] = (
    "note_read", "note_chunks", "note_list", "note_folders", "note_tags", "note_structure",
    "note_stats", "note_suggest", "note_index", "note_write", "note_edit", "note_append",
    "note_delete", "note_rename", "note_search", "note_reindex", "note_embeddings",
)
WRITE_METHODS = frozenset({"note_write", "note_edit", "note_append", "note_delete",
                           "note_rename"})
MAX_NOTE_CHARS = 5_000_000  # what one write may carry (a long note is ~100 KB)
MIN_CHUNK_ID, MAX_CHUNK_ID = -(2**63), 2**63 - 1  # chunk ids are SQLite integers (int64)
MAX_REPLY_NOTE_CHARS = 2_000_000


def build_models(base: Any, Name: Any, Filter: Any, PathText: Any) -> dict[str, Any]:
    """The params model of each note method, on the protocol's strict ``base`` model and its
    bounded text types (given, so that this module never imports the protocol)."""
    from typing import Annotated

    from pydantic import Field

    Body = Annotated[str, Field(max_length=MAX_NOTE_CHARS)]
    Etag = Annotated[str, Field(max_length=128)]

    class _Vault(base):  # type: ignore[misc, valid-type]
        vault: Name | None = None

    class ReadParams(_Vault):
        path: PathText
        section: Filter | None = None
        max_chars: Annotated[int, Field(ge=1, le=MAX_REPLY_NOTE_CHARS)] = 200_000

    class ChunksParams(base):  # type: ignore[misc, valid-type]
        chunk_id: Annotated[int, Field(ge=MIN_CHUNK_ID, le=MAX_CHUNK_ID)]  # SQLite's int64
        before: Annotated[int, Field(ge=0, le=20)] = 1
        after: Annotated[int, Field(ge=0, le=20)] = 1

    class ListParams(_Vault):
        folder: PathText | None = None
        tag: Filter | None = None
        glob: PathText | None = None
        regex: Filter | None = None
        include_attachments: bool = True
        limit: Annotated[int, Field(ge=1, le=10_000)] = 1000

    class TagsParams(_Vault):
        field: Name | None = None

    class StructureParams(_Vault):
        root_path: PathText = ""
        depth: Annotated[int, Field(ge=1, le=50)] = 2

    class SuggestParams(_Vault):
        path: PathText
        n: Annotated[int, Field(ge=1, le=50)] = 5
        min_similarity: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] = 0.5
        exclude_current: bool = True
        exclude_linked: bool = True
        folder: PathText | None = None
        tags: Annotated[list[Filter], Field(max_length=100)] = []

    class PathParams(_Vault):
        path: PathText

    class WriteParams(_Vault):
        path: PathText
        content: Body = ""
        frontmatter: dict[str, Any] | None = None
        content_base64: Annotated[str, Field(max_length=MAX_NOTE_CHARS * 2)] | None = None
        if_match: Etag | None = None
        create_dirs: bool = True
        create_only: bool = False

    class EditParams(_Vault):
        path: PathText
        old_text: Annotated[str, Field(min_length=1, max_length=MAX_NOTE_CHARS)]
        new_text: Body
        if_match: Etag | None = None

    class AppendParams(_Vault):
        path: PathText
        content: Body
        if_match: Etag | None = None

    class DeleteParams(_Vault):
        path: PathText
        if_match: Etag | None = None

    class RenameParams(_Vault):
        old_path: PathText
        new_path: PathText
        if_match: Etag | None = None
        update_links: bool = True

    class SearchParams(_Vault):
        query: Annotated[str, Field(max_length=200_000)]
        top_k: Annotated[int, Field(ge=1, le=100)] = 10
        mode: Name = "hybrid"
        folder: PathText | None = None
        tags: Annotated[list[Filter], Field(max_length=100)] = []
        filters: dict[str, Any] | None = None

    class Bounded(_Vault):
        # Answer after this many seconds with what is done so far (issue 37). None: when done.
        answer_within_s: Annotated[float, Field(ge=0, le=3600)] | None = None

    class EmbeddingsParams(Bounded):
        force: bool = False

    return {"note_search": SearchParams, "note_reindex": Bounded,
            "note_embeddings": EmbeddingsParams, "note_read": ReadParams, "note_chunks": ChunksParams, "note_list": ListParams,
            "note_folders": _Vault, "note_tags": TagsParams, "note_structure": StructureParams,
            "note_stats": _Vault, "note_suggest": SuggestParams, "note_index": PathParams,
            "note_write": WriteParams, "note_edit": EditParams, "note_append": AppendParams,
            "note_delete": DeleteParams, "note_rename": RenameParams}
