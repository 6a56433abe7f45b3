"""Each format converts in process: known text, headings, table cells and page numbers survive;
broken files of each type fail with a stable skip code."""

from __future__ import annotations

import pytest
from document_fixtures import CSV, GOOD, HTML, LATEX, broken, epub_bytes, pdf_bytes

from ragd.daemon.convert.converted import Converted, ConvertSkip
from ragd.daemon.convert.converters import convert
from ragd.daemon.convert.formats import FORMATS, format_for, page_number
from ragd.daemon.convert.markdown import html_to_markdown, html_to_text, md_table, plain_text
from ragd.daemon.skips import SKIP_CODES
from ragd.daemon.text.headings import find_headings


def run(name: str, data: bytes) -> Converted:
    fmt = format_for(name)
    assert fmt is not None
    return convert(fmt.name, data)


def headings(markdown: str) -> list[str]:
    return [h.text for h in find_headings(markdown)]


def test_pdf_keeps_every_page_under_its_own_heading() -> None:
    out = run("a.pdf", pdf_bytes())
    assert out.title == "Field Guide" and out.metadata == {"pages": 3, "authors": ["Ada Tester"]}
    assert headings(out.markdown) == ["Page 1", "Page 2", "Page 3"]
    page2 = out.markdown.split("## Page 2")[1].split("## Page 3")[0]
    assert "zebrafish" in page2 and "Alpha" not in page2
    assert page_number("pdf", ("Page 2",)) == 2
    assert page_number("docx", ("Page 2",)) is None


def test_pdf_text_that_looks_like_markdown_cannot_fake_a_page() -> None:
    out = run("a.pdf", pdf_bytes(["# Page 99", "```", "plain"]))
    assert headings(out.markdown) == ["Page 1", "Page 2", "Page 3"]


def test_docx_headings_lists_and_tables() -> None:
    out = run("a.docx", GOOD["docx"]())
    assert out.title == "Quarterly Report"
    assert headings(out.markdown) == ["Quarterly Report", "Findings"]
    assert "- Pears outsold apples" in out.markdown
    assert "| Revenue | 4242 |" in out.markdown
    # Body order: the table sits between the list and the closing paragraph.
    assert out.markdown.index("4242") < out.markdown.index("marmalade")


def test_pptx_by_slide_with_tables_and_notes() -> None:
    out = run("a.pptx", GOOD["pptx"]())
    assert headings(out.markdown) == ["Slide 1: Launch Plan", "Slide 2: Budget Table"]
    assert "Rocket telemetry checklist" in out.markdown and "gantry" in out.markdown
    assert "| Fuel | 9000 |" in out.markdown and out.metadata["slides"] == 2


def test_xlsx_by_sheet_as_tables() -> None:
    out = run("a.xlsx", GOOD["xlsx"]())
    assert headings(out.markdown) == ["Sheet: Budget", "Sheet: People"]
    assert "| Kayak rental | 120 |" in out.markdown
    assert "| Grace Hopper | Admiral |" in out.markdown


def test_html_drops_scripts_styles_and_navigation() -> None:
    out = run("a.html", HTML.encode())
    assert out.title == "Web Page Title"
    assert headings(out.markdown) == ["Volcano Observatory", "Readings"]
    assert "Magma chambers rumble beneath the caldera." in out.markdown
    assert "- Sulphur level high" in out.markdown and "| North vent | 1200 |" in out.markdown
    assert "```\nraw   seismograph   output\n```" in out.markdown
    for hidden in ("scriptword", "color: red", "Menu Home"):
        assert hidden not in out.markdown


def test_html_links_images_and_emphasis_become_their_text() -> None:
    markdown, title = html_to_markdown(
        '<h2><a href="#s1" title="Link here">1</a> Scope <em>and</em> aims</h2>'
        '<p>See <a href="https://example.org/x">the guide</a> <img src="f.png" alt="Figure 2">'
        '</p><p># not a heading</p><ol><li>one<ul><li>nested</li></ul></li></ol>', shift=1)
    assert headings(markdown) == ["1 Scope and aims"] and title == "1 Scope and aims"
    assert markdown.startswith("### 1 Scope and aims")
    assert "See the guide Figure 2" in markdown and "https://" not in markdown
    assert "1. one" in markdown and "   - nested" in markdown


def test_html_to_text_reads_a_mail_body() -> None:
    text = html_to_text('<html><head><style>p {color: red}</style></head><body><div>Hi '
                        '<b>Bob</b>,<br>see <a href="https://x.org/a">the notes</a>.</div>'
                        '<h1>Agenda</h1><ul><li>budget</li><li>hiring</li></ul>'
                        '<script>var tracker = 1;</script></body></html>')
    assert text == "Hi Bob,\nsee the notes.\n\nAgenda\n\n- budget\n- hiring\n"
    assert html_to_text("<p> </p>") == ""


def test_epub_chapters_in_spine_order() -> None:
    out = run("a.epub", epub_bytes())
    assert out.title == "The Lighthouse Keeper" and out.metadata["authors"] == ["Jo Writer"]
    assert headings(out.markdown) == ["Chapter One: Arrival", "Chapter Two: The Storm"]
    assert out.markdown.index("ninety steps") < out.markdown.index("granite tower")


def test_latex_sections_lists_tables_and_no_comments() -> None:
    out = run("a.tex", LATEX.encode())
    assert out.title == "Notes on Tensors" and out.metadata["authors"] == ["Emmy Noether"]
    assert headings(out.markdown) == ["Notes on Tensors", "Introduction", "Background"]
    assert "Symmetry implies conservation laws." in out.markdown
    assert "- Invariance under rotation" in out.markdown and "| Energy | Time |" in out.markdown
    assert "comment" not in out.markdown and "\\" not in out.markdown


def test_latex_nested_braces_accents_math_and_links() -> None:
    tex = (r"\title{On \emph{Nested} {Braces}}\author{A. Writer \and B. Reader}"
           "\n\\begin{document}\\maketitle\n"
           r"\section[short]{The \textbf{bold \emph{nested}} case}\label{s}"
           "\n"
           r"Caf\'e costs 50\% off, math $\alpha$, \cite[p.~3]{knuth}, \href{http://x.org}{site}."
           "\n# not a heading\n\\end{document}\n")
    out = run("a.tex", tex.encode())
    assert out.title == "On Nested Braces" and out.metadata == {"authors": ["A. Writer, B. Reader"]}
    assert headings(out.markdown) == ["On Nested Braces", "The bold nested case"]
    assert "Café costs 50% off, math α, [knuth], site." in out.markdown
    assert "\\# not a heading" in out.markdown


def test_csv_as_a_table() -> None:
    out = run("a.csv", CSV.encode())
    assert out.markdown.splitlines()[0] == "| city | population | river |"
    assert "| Krakow | 800000 | Vistula |" in out.markdown


def test_markdown_and_text_pass_through() -> None:
    assert run("a.md", b"# T\n\nbody\n").markdown == "# T\n\nbody\n"
    assert run("a.txt", "caf\xe9".encode("cp1252")).markdown == "café"


# Text formats cannot tell a truncated file from a short one: they convert what is there.
_TEXT = ("html", "tex", "csv")


@pytest.mark.parametrize("suffix", sorted(GOOD))
def test_broken_files_are_skipped_with_a_code(suffix: str) -> None:
    expected = {"empty": "empty", "corrupt": "binary" if suffix in _TEXT else "parse_error",
                "truncated": None if suffix in _TEXT else "parse_error",
                "encrypted": "encrypted"}
    for name, data in broken(suffix).items():
        want = expected[name.split(".")[0]]
        if want is None:
            run(name, data)
            continue
        with pytest.raises(ConvertSkip) as info:
            run(name, data)
        assert info.value.code == want, (name, info.value.detail)
        assert info.value.code in SKIP_CODES


def test_a_zip_bomb_is_refused_before_it_is_expanded(monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import zipfile

    monkeypatch.setattr("ragd.daemon.convert.converted.MAX_UNZIPPED_BYTES", 1 << 20)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("word/document.xml", b"\x00" * (2 << 20))
    with pytest.raises(ConvertSkip) as info:
        run("bomb.docx", buf.getvalue())
    assert info.value.code == "too_large"


def test_an_image_without_tesseract_is_a_clear_skip(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ragd.daemon.convert.converters.tesseract", lambda: None)
    with pytest.raises(ConvertSkip) as info:
        run("scan.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 64)
    assert info.value.code == "ocr_unavailable" and "tesseract" in info.value.detail.lower()


def test_formats_and_helpers() -> None:
    assert format_for("Report.PDF") is FORMATS["pdf"]
    assert format_for("x.mobi") is format_for("B.AZW3") is format_for("c.azw") is FORMATS["mobi"]
    assert format_for("x.kfx") is None
    assert md_table([["a|b", "c\nd"], ["1"]]) == "| a\\|b | c d |\n| --- | --- |\n| 1 |  |"
    assert plain_text("# not a heading\n```\n---") == "\\# not a heading\n\\```\n\\---"
    markdown, title = html_to_markdown("<p>#hashtag start</p><h3>Real</h3>")
    assert headings(markdown) == ["Real"] and title == "Real"
