"""Small documents of every supported format, generated with real libraries (python-docx,
python-pptx, openpyxl, reportlab) or by hand (EPUB, HTML, LaTeX, CSV), plus broken variants:
corrupt, truncated, encrypted and empty. Each good file holds known words the tests look for.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable
from pathlib import Path

# Words that appear only where the tests expect them.
PDF_PAGES = ["Alpha harbour lantern on the first page.",
             "Bravo zebrafish migrate past the lighthouse on page two.",
             "Charlie quasar telescope notes on the third page."]


def pdf_bytes(pages: list[str] | None = None, *, password: str | None = None,
              title: str = "Field Guide") -> bytes:
    """A PDF with one line of text per page (reportlab), optionally password-protected."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=A4, encrypt=password)
    c.setTitle(title)
    c.setAuthor("Ada Tester")
    for text in pages or PDF_PAGES:
        c.drawString(72, 720, text)
        c.showPage()
    c.save()
    return buf.getvalue()


def docx_bytes() -> bytes:
    import docx

    d = docx.Document()
    d.core_properties.title = "Quarterly Report"
    d.add_heading("Quarterly Report", level=1)
    d.add_paragraph("The orchard cooperative grew steadily this quarter.")
    d.add_heading("Findings", level=2)
    d.add_paragraph("Pears outsold apples", style="List Bullet")
    table = d.add_table(rows=2, cols=2)
    for r, row in enumerate([("Metric", "Value"), ("Revenue", "4242")]):
        for col, text in enumerate(row):
            table.cell(r, col).text = text
    d.add_paragraph("Closing remarks about marmalade.")
    buf = io.BytesIO()
    d.save(buf)
    return buf.getvalue()


def pptx_bytes() -> bytes:
    from pptx import Presentation
    from pptx.util import Inches

    p = Presentation()
    s1 = p.slides.add_slide(p.slide_layouts[1])
    s1.shapes.title.text = "Launch Plan"
    s1.placeholders[1].text_frame.text = "Rocket telemetry checklist"
    s1.notes_slide.notes_text_frame.text = "Speaker notes mention the gantry"
    s2 = p.slides.add_slide(p.slide_layouts[5])
    s2.shapes.title.text = "Budget Table"
    table = s2.shapes.add_table(2, 2, Inches(1), Inches(2), Inches(4), Inches(1)).table
    for r, row in enumerate([("Item", "Cost"), ("Fuel", "9000")]):
        for col, text in enumerate(row):
            table.cell(r, col).text = text
    buf = io.BytesIO()
    p.save(buf)
    return buf.getvalue()


def xlsx_bytes() -> bytes:
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Budget"
    ws.append(["Category", "Amount"])
    ws.append(["Kayak rental", 120])
    ws.append(["Campsite", 45.5])
    people = wb.create_sheet("People")
    people.append(["Name", "Role"])
    people.append(["Grace Hopper", "Admiral"])
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


HTML = """<!doctype html><html><head><title>Web Page Title</title>
<style>body { color: red }</style><script>var hidden = "scriptword";</script></head>
<body><nav>Menu Home About</nav>
<h1>Volcano Observatory</h1><p>Magma chambers <b>rumble</b> beneath the caldera.</p>
<h2>Readings</h2><ul><li>Sulphur level high</li><li>Tremor count rising</li></ul>
<table><tr><th>Station</th><th>Depth</th></tr><tr><td>North vent</td><td>1200</td></tr></table>
<pre>raw   seismograph   output</pre></body></html>"""

LATEX = r"""\documentclass{article}
\usepackage{amsmath}
\title{Notes on Tensors}
\author{Emmy Noether}
\begin{document}
\maketitle
\section{Introduction}
Symmetry implies \textbf{conservation} laws. % a comment that must vanish
\subsection{Background}
\begin{itemize}
\item Invariance under translation
\item Invariance under rotation
\end{itemize}
\begin{tabular}{ll}
Law & Symmetry \\
\hline
Energy & Time \\
\end{tabular}
\end{document}
"""

CSV = "city,population,river\nLyon,522000,Rhone\nKrakow,800000,Vistula\n"


def epub_bytes(*, encrypt_chapter: bool = False) -> bytes:
    """An EPUB 3 whose spine order (ch2 before ch1) differs from its manifest order."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        z.writestr("META-INF/container.xml", """<?xml version="1.0"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>
</rootfiles></container>""")
        z.writestr("OEBPS/content.opf", """<?xml version="1.0" encoding="UTF-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">
<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:identifier id="id">x</dc:identifier>
<dc:title>The Lighthouse Keeper</dc:title><dc:creator>Jo Writer</dc:creator>
<dc:language>en</dc:language></metadata>
<manifest>
<item id="ch1" href="text/ch1.xhtml" media-type="application/xhtml+xml"/>
<item id="ch2" href="text/ch2.xhtml" media-type="application/xhtml+xml"/>
<item id="css" href="style.css" media-type="text/css"/>
</manifest>
<spine><itemref idref="ch2"/><itemref idref="ch1"/></spine></package>""")
        z.writestr("OEBPS/text/ch1.xhtml", """<?xml version="1.0" encoding="UTF-8"?>
<html xmlns="http://www.w3.org/1999/xhtml"><head><title>Storm</title></head><body>
<h1>Chapter Two: The Storm</h1><p>Waves crashed against the granite tower.</p></body></html>""")
        z.writestr("OEBPS/text/ch2.xhtml", """<?xml version="1.0" encoding="UTF-8"?>
<html xmlns="http://www.w3.org/1999/xhtml"><head><title>Arrival</title></head><body>
<h1>Chapter One: Arrival</h1><p>The keeper climbed ninety steps at dusk.</p></body></html>""")
        z.writestr("OEBPS/style.css", "p { margin: 0 }")
        if encrypt_chapter:
            z.writestr("META-INF/encryption.xml", """<?xml version="1.0"?>
<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container"
 xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData>
<enc:EncryptionMethod Algorithm="http://www.w3.org/2001/04/xmlenc#aes128-cbc"/>
<enc:CipherData><enc:CipherReference URI="OEBPS/text/ch1.xhtml"/></enc:CipherData>
</enc:EncryptedData></encryption>""")
    return buf.getvalue()


def office_encrypted() -> bytes:
    """What Office writes for a password-protected DOCX/PPTX/XLSX: an OLE compound file
    holding an ``EncryptedPackage`` stream (header and directory entry only; enough for the
    sniff, which is all a reader can do without the password)."""
    header = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 504
    entry = "EncryptedPackage".encode("utf-16-le").ljust(64, b"\x00")
    return header + entry + b"\x00" * 448


GOOD: dict[str, Callable[[], bytes]] = {
    "pdf": pdf_bytes, "docx": docx_bytes, "pptx": pptx_bytes, "xlsx": xlsx_bytes,
    "html": lambda: HTML.encode(), "epub": epub_bytes, "tex": lambda: LATEX.encode(),
    "csv": lambda: CSV.encode(),
}

# Encrypted forms of the formats that have one.
ENCRYPTED: dict[str, Callable[[], bytes]] = {
    "pdf": lambda: pdf_bytes(password="secret"), "docx": office_encrypted,
    "pptx": office_encrypted, "xlsx": office_encrypted,
    "epub": lambda: epub_bytes(encrypt_chapter=True),
}


def broken(suffix: str) -> dict[str, bytes]:
    """name -> bytes of each broken variant of a format (zero-byte, corrupt, truncated, and
    encrypted where the format has encryption)."""
    good = GOOD[suffix]()
    out = {f"empty.{suffix}": b"",
           f"corrupt.{suffix}": b"\x00\x01garbage\xff\xfe" * 64,
           f"truncated.{suffix}": good[: len(good) // 2]}
    if suffix in ENCRYPTED:
        out[f"encrypted.{suffix}"] = ENCRYPTED[suffix]()
    return out


def write_all(folder: Path, *, broken_too: bool = True) -> dict[str, bytes]:
    """Write one good file per format (``good.<suffix>``) and the broken variants."""
    folder.mkdir(parents=True, exist_ok=True)
    files: dict[str, bytes] = {}
    for suffix, make in GOOD.items():
        files[f"good.{suffix}"] = make()
        if broken_too:
            files.update(broken(suffix))
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return files


def amplifying_epub(chapter_chars: int, repeats: int, *, varied: bool = False) -> bytes:
    """An EPUB of one chapter listed ``repeats`` times in its spine: small on disk, huge as
    text (the hostile EPUB of issues 21 and 28). ``varied`` writes the chapter from a
    vocabulary of 2,000 made-up words, so that it compresses as prose does (4 MB of it zip to
    about a megabyte, the size of row 5's EPUB) instead of to nothing."""
    if varied:
        import random

        rng = random.Random(5)
        vocab = ["".join(rng.choice("aeioubcdfghklmnprstvw") for _ in range(rng.randint(3, 9)))
                 for _ in range(2000)]
        text = " ".join(rng.choice(vocab) for _ in range(chapter_chars // 6 + 1))
    else:
        text = "lorem ipsum dolor sit amet consectetur " * (chapter_chars // 39 + 1)
    para = f"<p>{text[:chapter_chars]}</p>"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        z.writestr("META-INF/container.xml", """<?xml version="1.0"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
<rootfiles><rootfile full-path="content.opf" media-type="application/oebps-package+xml"/>
</rootfiles></container>""")
        spine = "".join('<itemref idref="c"/>' for _ in range(repeats))
        z.writestr("content.opf", f"""<?xml version="1.0" encoding="UTF-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">
<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:identifier id="id">x</dc:identifier>
<dc:title>Echo</dc:title></metadata>
<manifest><item id="c" href="c.xhtml" media-type="application/xhtml+xml"/></manifest>
<spine>{spine}</spine></package>""")
        z.writestr("c.xhtml", f"""<?xml version="1.0" encoding="UTF-8"?>
<html xmlns="http://www.w3.org/1999/xhtml"><body><h1>Echo</h1>{para}</body></html>""")
    return buf.getvalue()


# A chapter of a Kindle book: small enough that a test which indexes it embeds a dozen chunks,
# not a whole novel (Alice in full took minutes on a busy machine, issue 40).
MOBI_CHAPTER = ("<html><head><title>Down the Rabbit-Hole</title></head><body>"
                "<h1>Down the Rabbit-Hole</h1>"
                "<p>Alice was beginning to get very tired of sitting by her sister on the bank."
                " Then a White Rabbit with pink eyes ran close by her, and she followed it down"
                " a large rabbit-hole under the hedge.</p>"
                "<p>The rabbit-hole went straight on like a tunnel for some way, and then dipped"
                " suddenly down, so suddenly that Alice had not a moment to think.</p>"
                "</body></html>")


def calibre_mobi(out: Path) -> Path:
    """A real MOBI of one chapter, written by Calibre's own ebook-convert (~1 s): the title
    "Alice's Adventures in Wonderland", by Lewis Carroll, holding the words "rabbit-hole"."""
    import subprocess

    source = out.with_suffix(".html")
    source.write_text(MOBI_CHAPTER, encoding="utf-8")
    done = subprocess.run(["ebook-convert", str(source), str(out), "--title",
                           "Alice's Adventures in Wonderland", "--authors", "Lewis Carroll"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and out.is_file(), done.stdout[-2000:] + done.stderr[-2000:]
    source.unlink()
    return out
