"""The ``[concepts]`` settings: concepts and categories of long documents (decision 0033)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ConceptsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(
        default=True, description="Analyse books, papers and long notes in the background "
        "(summary, concepts, categories) and offer the `concepts` MCP toolset")
    min_note_chars: int = Field(
        default=20_000, ge=1000, le=10_000_000,
        description="A note or text file of at least this many bytes counts as a long "
        "document; PDFs, EPUBs, DOCX and Calibre books always do")
    concepts_per_doc: int = Field(
        default=60, ge=5, le=300, description="Concepts kept per document (the best first)")
