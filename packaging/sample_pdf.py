"""Write the sample vault's PDF, ``daemon/sample_vault/Attachments/ragd-cheatsheet.pdf``.

The PDF is committed (the wheel ships it; reportlab is a dev dependency only) and made
reproducible (``invariant``), so a test can check that it is what this script writes:
``python packaging/sample_pdf.py`` after editing the lines below.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

TARGET = (Path(__file__).resolve().parents[1] / "daemon" / "sample_vault" / "Attachments"
          / "ragd-cheatsheet.pdf")

PAGES = [
    ("ragd command cheat sheet", [
        "make run: set up, index your vault (or the sample vault), then serve",
        "make test: the whole test suite, as CI runs it",
        "ragd search QUERY: hybrid search (--mode keyword or semantic, --tag, --explain)",
        "ragd status: what the daemon is doing, per collection",
        "ragd convert FILE: any PDF, DOCX or EPUB as markdown",
        "ragd doctor: check configuration, vault paths, the model and the indexes",
    ]),
    ("Keeping the index fresh", [
        "Watch events are hints; one reconcile pass compares size, mtime and content hash.",
        "An edited note is searchable again within about a second.",
        "ragd pause and ragd resume stop and restart indexing without losing the queue.",
    ]),
]


def pdf_bytes() -> bytes:
    """The cheat sheet: one heading and a few lines per page."""
    from reportlab.lib.pagesizes import A5
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=A5, invariant=1, pageCompression=1)
    c.setTitle("ragd command cheat sheet")
    c.setAuthor("ragd")
    for heading, lines in PAGES:
        c.setFont("Helvetica-Bold", 13)
        c.drawString(36, 545, heading)
        c.setFont("Helvetica", 8)
        for n, line in enumerate(lines):
            c.drawString(36, 515 - 16 * n, line)
        c.showPage()
    c.save()
    return buf.getvalue()


if __name__ == "__main__":
    TARGET.parent.mkdir(parents=True, exist_ok=True)
    TARGET.write_bytes(pdf_bytes())
    print(f"wrote {TARGET} ({TARGET.stat().st_size:,} bytes)", file=sys.stderr)
