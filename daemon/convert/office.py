"""DOCX (python-docx), PPTX by slide (python-pptx) and XLSX by sheet as tables (openpyxl).

Worker-process only. All three are MIT licensed and read the files with lxml; each file is
first checked as a zip (``open_zip``): an encrypted Office file or a decompression bomb is
skipped before the library sees it.
"""

from __future__ import annotations

import io
import re
from typing import Any

from ragd.daemon.convert.converted import Converted, open_zip
from ragd.daemon.convert.markdown import join_blocks, md_table, plain_text

_HEADING_STYLE = re.compile(r"Heading (\d)")
MAX_SHEET_CELLS = 2_000_000  # cells kept of one workbook; a note says when more were cut


def _title(props: Any) -> str:
    try:
        return " ".join((props.title or "").split())
    except Exception:
        return ""


def _authors(props: Any) -> dict[str, Any]:
    try:
        author = " ".join((props.author or "").split())
    except Exception:
        author = ""
    return {"authors": [author]} if author else {}


def convert_docx(data: bytes) -> Converted:
    """Paragraphs and tables in body order; Heading N and Title styles become headings."""
    import docx
    from docx.table import Table

    open_zip(data, "DOCX")
    doc = docx.Document(io.BytesIO(data))
    blocks: list[str] = []
    for item in doc.iter_inner_content():
        if isinstance(item, Table):
            blocks.append(md_table([[c.text for c in row.cells] for row in item.rows]))
            continue
        text = " ".join(item.text.split())
        if not text:
            continue
        style = item.style.name if item.style is not None else ""
        m = _HEADING_STYLE.fullmatch(style or "")
        if m:
            blocks.append("#" * int(m.group(1)) + " " + text)
        elif style == "Title":
            blocks.append("# " + text)
        elif style and style.startswith("List Number"):
            blocks.append("1. " + plain_text(text))
        elif style and style.startswith("List"):
            blocks.append("- " + plain_text(text))
        else:
            blocks.append(plain_text(text))
    props = doc.core_properties
    return Converted(_title(props), join_blocks(blocks) if blocks else "", _authors(props))


def convert_pptx(data: bytes) -> Converted:
    """``## Slide N: title``, then the slide's text frames, tables and speaker notes."""
    from pptx import Presentation

    open_zip(data, "PPTX")
    pres = Presentation(io.BytesIO(data))
    blocks: list[str] = []
    slides = 0
    for n, slide in enumerate(pres.slides, 1):
        slides = n
        title_shape = slide.shapes.title
        title = " ".join(title_shape.text_frame.text.split()) if title_shape is not None \
            and title_shape.has_text_frame else ""
        blocks.append(f"## Slide {n}" + (f": {title}" if title else ""))
        for shape in _shapes(slide.shapes):
            if title_shape is not None and shape.shape_id == title_shape.shape_id:
                continue
            if getattr(shape, "has_table", False) and shape.has_table:
                rows = [[c.text for c in row.cells] for row in shape.table.rows]
                blocks.append(md_table(rows))
            elif getattr(shape, "has_text_frame", False) and shape.has_text_frame:
                for para in shape.text_frame.paragraphs:
                    text = " ".join("".join(r.text for r in para.runs).split())
                    if text:
                        blocks.append(("  " * para.level) + "- " + plain_text(text))
        if slide.has_notes_slide:
            notes = slide.notes_slide.notes_text_frame
            text = notes.text.strip() if notes is not None else ""
            if text:
                blocks.append("Notes: " + plain_text(text))
    props = pres.core_properties
    body = join_blocks(blocks) if any(not b.startswith("## Slide") for b in blocks) else ""
    return Converted(_title(props), body, {"slides": slides, **_authors(props)})


def _shapes(shapes: Any) -> Any:
    """Every shape, group members included, in slide order."""
    for shape in shapes:
        if shape.shape_type == 6:  # MSO_SHAPE_TYPE.GROUP
            yield from _shapes(shape.shapes)
        else:
            yield shape


def convert_xlsx(data: bytes) -> Converted:
    """``## Sheet: name`` and the sheet's used cells as a table (values, not formulas)."""
    import openpyxl

    open_zip(data, "XLSX")
    wb = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    blocks: list[str] = []
    budget = MAX_SHEET_CELLS
    sheets = 0
    try:
        for ws in wb.worksheets:
            sheets += 1
            rows: list[list[Any]] = []
            for row in ws.iter_rows(values_only=True):
                if budget <= 0:
                    break
                budget -= len(row)
                rows.append(["" if v is None else v for v in row])
            rows = _trim_columns(rows)
            table = md_table(rows)
            if table:
                blocks.append(f"## Sheet: {ws.title}\n\n{table}")
            if budget <= 0:
                blocks.append(f"(cut: the workbook has more than {MAX_SHEET_CELLS:,} cells)")
                break
    finally:
        wb.close()
    props = wb.properties
    return Converted(_title(props), join_blocks(blocks) if blocks else "",
                     {"sheets": sheets, **_authors(props)})


def _trim_columns(rows: list[list[Any]]) -> list[list[Any]]:
    """Drop columns that are empty in every row (read-only sheets report a wide used range)."""
    if not rows:
        return rows
    width = max(len(r) for r in rows)
    keep = [c for c in range(width) if any(c < len(r) and str(r[c]).strip() for r in rows)]
    return [[r[c] if c < len(r) else "" for c in keep] for r in rows]
