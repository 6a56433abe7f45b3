"""OCR of scanned PDFs (decision 0044): pages without a text layer are rendered and read by
Tesseract when ``[documents] ocr_pdfs`` is on, within page and time bounds; off, a scan is
``no_text`` as before. The doc store keeps the two apart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from scan_fixtures import SCANNED_PAGES, mixed_pdf, need_tesseract, scanned_pdf

from ragd.daemon.convert import pdf_ocr
from ragd.daemon.convert.converted import ConvertSkip
from ragd.daemon.convert.converters import convert
from ragd.daemon.convert.docstore import DocStore
from ragd.daemon.convert.formats import FORMATS, PdfOcr
from ragd.daemon.models import Skip

OCR = PdfOcr(max_pages=100, budget_s=90).worker_format


def words(text: str) -> set[str]:
    return {w.strip(".,").lower() for w in text.split()}


def test_a_scanned_pdf_is_read_with_ocr_on_and_skipped_with_it_off() -> None:
    need_tesseract()
    data = scanned_pdf()
    with pytest.raises(ConvertSkip) as off:
        convert("pdf", data)
    assert off.value.code == "no_text"

    out = convert(OCR, data)
    assert out.markdown.startswith("## Page 1\n\n")
    assert "## Page 2" in out.markdown
    page1, page2 = out.markdown.split("## Page 2")
    assert {"zanzibar", "harbour", "ledger"} <= words(page1)
    assert {"lighthouse", "copper", "kettle"} <= words(page2)
    assert out.metadata == {"pages": 2, "ocr_pages": 2}


def test_only_pages_without_text_are_read_by_ocr() -> None:
    need_tesseract()
    out = convert(OCR, mixed_pdf("Typed minutes of the orchard meeting",
                                 "Handwritten walrus census"))
    page1, page2 = out.markdown.split("## Page 2")
    assert "Typed minutes of the orchard meeting" in page1
    assert {"walrus", "census"} <= words(page2)
    assert out.metadata["ocr_pages"] == 1


def test_the_page_limit_leaves_the_rest_out_and_says_so() -> None:
    need_tesseract()
    out = convert(PdfOcr(max_pages=1, budget_s=90).worker_format, scanned_pdf())
    assert "zanzibar" in words(out.markdown) and "## Page 2" not in out.markdown
    assert out.metadata == {"pages": 2, "ocr_pages": 1, "ocr_pages_left": 1,
                            "ocr_stopped": "page_limit"}


def test_the_worker_switch_turns_pdf_ocr_off() -> None:
    with pytest.raises(ConvertSkip) as off:
        convert(OCR, scanned_pdf(), ocr=False)
    assert off.value.code == "no_text"


def test_a_huge_page_is_rendered_within_the_pixel_cap() -> None:
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument.new()
    page = doc.new_page(14400, 14400)  # 200 x 200 inches, the largest a PDF page may be
    image, dpi = pdf_ocr.render_pgm(page)
    header, _, _ = image.partition(b"\n255\n")
    w, h = (int(x) for x in header.split()[1:3])
    assert w * h <= pdf_ocr.MAX_PIXELS and dpi < pdf_ocr.OCR_DPI
    assert len(image) == len(header) + 5 + w * h
    page.close()
    doc.close()


# -- the bounds, as logic ----------------------------------------------------------------------
class Pages:
    """Tesseract and the renderer as stand-ins, with a clock that moves per page."""

    def __init__(self, seconds_per_page: float = 1.0, fail: str | None = None) -> None:
        self.now = 0.0
        self.seconds = seconds_per_page
        self.fail = fail

    def clock(self) -> float:
        return self.now

    def render(self, page: Any) -> tuple[bytes, int]:
        return b"P5", 200

    def read(self, exe: str, image: bytes, *, timeout_s: float, dpi: int) -> str:
        self.now += self.seconds
        if self.fail:
            raise ConvertSkip(self.fail, "stand-in")
        return f"text read in {timeout_s:.0f} s"


def reader(pages: Pages, options: PdfOcr) -> pdf_ocr.PageOcr:
    return pdf_ocr.PageOcr(options, exe="tesseract", read=pages.read, render=pages.render,
                           clock=pages.clock)


def test_ocr_stops_at_its_time_budget_and_each_page_gets_what_is_left() -> None:
    pages = Pages(seconds_per_page=4.0)
    r = reader(pages, PdfOcr(max_pages=100, budget_s=10))
    texts = [r.read(object()) for _ in range(5)]
    assert texts[:3] == ["text read in 10 s", "text read in 6 s", "text read in 2 s"]
    assert texts[3:] == ["", ""]
    assert r.metadata() == {"ocr_pages": 3, "ocr_pages_left": 2, "ocr_stopped": "time"}


def test_a_page_that_times_out_stops_ocr_and_an_unreadable_one_does_not() -> None:
    r = reader(Pages(fail="convert_timeout"), PdfOcr(budget_s=90))
    assert r.read(object()) == "" and r.stopped == "time"
    with pytest.raises(ConvertSkip) as nothing:
        r.nothing_read()
    assert nothing.value.code == "convert_timeout"  # not cached: tried again later

    r = reader(Pages(fail="parse_error"), PdfOcr(budget_s=90))
    assert r.read(object()) == "" and r.stopped is None and r.pages == 1


def test_without_tesseract_a_scan_is_ocr_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pdf_ocr, "tesseract", lambda: None)
    pages = Pages()
    r = pdf_ocr.PageOcr(PdfOcr(), read=pages.read, render=pages.render, clock=pages.clock)
    assert r.read(object()) == ""
    with pytest.raises(ConvertSkip) as missing:
        r.nothing_read()
    assert missing.value.code == "ocr_unavailable"  # retried once Tesseract is installed
    assert r.metadata()["ocr_stopped"] == "tesseract_missing"


def test_options_stop_short_of_the_conversion_limit() -> None:
    assert PdfOcr.within(120.0, 50) == PdfOcr(50, 100.0)
    assert PdfOcr.within(10.0, 50).budget_s == 5.0
    assert PdfOcr.parse(PdfOcr(7, 33.5).worker_format) == PdfOcr(7, 33.5)
    assert PdfOcr.parse("pdf") is None and PdfOcr.parse("pdf+ocr:x") is None


# -- the doc store keeps OCR and plain conversions apart ---------------------------------------
class Answers:
    def __init__(self, answer: dict[str, Any] | Skip) -> None:
        self.answer = answer
        self.formats: list[str] = []

    def convert(self, fmt: str, data: bytes) -> dict[str, Any] | Skip:
        self.formats.append(fmt)
        return self.answer

    def close(self) -> None:
        pass


def test_the_doc_store_keys_ocr_conversions_apart(tmp_path: Path) -> None:
    options = PdfOcr(max_pages=100, budget_s=90)
    plain = DocStore(tmp_path / "ds", Answers(Skip("no_text", "none")))
    assert isinstance(plain.convert(b"%PDF scan", FORMATS["pdf"]), Skip)

    worker = Answers({"title": "", "markdown": "## Page 1\n\nledger\n",
                      "metadata": {"pages": 1, "ocr_pages": 1}})
    with_ocr = DocStore(tmp_path / "ds", worker, pdf_ocr=options)
    conv = with_ocr.convert(b"%PDF scan", FORMATS["pdf"])
    assert not isinstance(conv, Skip) and conv.markdown.endswith("ledger\n")
    assert conv.format == "pdf" and worker.formats == ["pdf+ocr:100:90"]
    assert with_ocr.object_path(conv.content_hash, FORMATS["pdf"], options.variant).name \
        .endswith(".pdf-1+ocr100.json")
    again = with_ocr.convert(b"%PDF scan", FORMATS["pdf"])
    assert not isinstance(again, Skip) and again.cached and len(worker.formats) == 1
    # Turned off again: the plain conversion's skip is what is served.
    assert isinstance(plain.convert(b"%PDF scan", FORMATS["pdf"]), Skip)
    # Other formats are not affected.
    with_ocr.convert(b"<p>x</p>", FORMATS["html"])
    assert worker.formats[-1] == "html"


def test_a_conversion_cut_short_for_now_is_answered_not_kept(tmp_path: Path) -> None:
    worker = Answers({"title": "", "markdown": "## Page 1\n\npart\n",
                      "metadata": {"pages": 9, "ocr_pages": 1, "ocr_pages_left": 8,
                                   "ocr_stopped": "time"}})
    store = DocStore(tmp_path / "ds", worker, pdf_ocr=PdfOcr())
    first = store.convert(b"%PDF long scan", FORMATS["pdf"])
    assert not isinstance(first, Skip) and "part" in first.markdown
    store.convert(b"%PDF long scan", FORMATS["pdf"])
    assert len(worker.formats) == 2  # not cached: the whole document is tried again


@pytest.mark.slow
def test_the_conversion_worker_reads_a_scan(tmp_path: Path) -> None:
    """The real worker process: OCR on, the words; off, no_text."""
    need_tesseract()
    from ragd.daemon.convert.documents import DocumentSettings, open_documents

    data = scanned_pdf()
    on = open_documents(tmp_path / "on", DocumentSettings(ocr_pdfs=True))
    off = open_documents(tmp_path / "off", DocumentSettings())
    try:
        doc = on.parse(tmp_path, "scan.pdf", data)
        skip = off.parse(tmp_path, "scan.pdf", data)
    finally:
        on.close()
        off.close()
    assert isinstance(skip, Skip) and skip.code == "no_text"
    assert not isinstance(doc, Skip)
    assert {"zanzibar", "lighthouse"} <= words(doc.text)
    assert doc.source_type == "pdf" and doc.metadata["ocr_pages"] == len(SCANNED_PAGES)


class HashEmbedder:
    """Deterministic fake for this pipeline test only: a vector from the text's hash (no
    tokenizer file, so the app reads in process instead of in extraction workers)."""

    fingerprint = "fake-embedder-ocr"
    dimension = 16
    max_tokens = 256

    def count_tokens(self, texts: Any) -> list[int]:
        return [len(t.split()) for t in texts]

    def embed_query(self, text: str) -> Any:
        return self.embed([text])[0]

    def embed(self, texts: Any) -> Any:
        import hashlib

        import numpy as np

        rows = []
        for t in texts:
            seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:4], "little")
            v = np.random.default_rng(seed).standard_normal(self.dimension).astype(np.float32)
            rows.append(v / np.linalg.norm(v))
        return np.stack(rows)


@pytest.mark.slow
def test_the_pipeline_reads_skipped_scans_again_once_ocr_is_turned_on(tmp_path: Path) -> None:
    need_tesseract()
    from ragd.daemon.runtime.app import App
    from ragd.daemon.search.engine import SearchRequest
    from ragd.daemon.settings.config import load_config
    from ragd.daemon.settings.paths import resolve_paths

    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "Welcome.md").write_text("# Welcome\n\nA note.\n", encoding="utf-8")
    (vault / "harbour scan.pdf").write_bytes(scanned_pdf())
    paths = resolve_paths()

    def run(ocr: bool) -> tuple[list[str], dict[str, int]]:
        config = load_config(paths, {"obsidian.vaults": [str(vault)],
                                     "documents.ocr_pdfs": ocr})
        with App(paths, config, embedder=HashEmbedder()) as app:
            app.sync_all()
            req = SearchRequest(query="zanzibar harbour", mode="keyword", top_k=3)
            found = [r["source_path"] for r in app.search_engine.search(req)["results"]]
            skips = app.catalog.collection_stats(app.collection("obsidian").id)["skips"]
            assert app.consistency()["ok"]
        return found, skips

    assert run(ocr=False) == ([], {"no_text": 1})
    found, skips = run(ocr=True)  # the file did not change: read again because OCR is on
    assert {Path(p).name for p in found} == {"harbour scan.pdf"} and skips == {}


@pytest.mark.slow
def test_200_dpi_reads_small_print() -> None:
    """Why 200 DPI (decision 0044): words read and seconds per page by rendering DPI, on
    6 pt and 8 pt scans. `pytest tests/daemon/convert/test_pdf_ocr.py -k small_print -s`
    prints the table."""
    import time
    from collections import Counter

    import pypdfium2 as pdfium
    from scan_fixtures import small_print_scan

    from ragd.daemon.convert.ocr import ocr_text

    exe = need_tesseract()
    read: dict[tuple[int, int], float] = {}
    for points in (6, 8):
        data, truth = small_print_scan(points)
        doc = pdfium.PdfDocument(data)
        page = doc[0]
        for dpi in (100, 150, 200, 300):
            image, used = pdf_ocr.render_pgm(page, dpi)
            t0 = time.perf_counter()
            found = Counter(ocr_text(exe, image, dpi=used).split())
            seconds = time.perf_counter() - t0
            hits = sum(min(n, found[w]) for w, n in Counter(truth).items())
            read[points, dpi] = hits / len(truth)
            print(f"\n{points} pt, {dpi:>3} DPI: {hits}/{len(truth)} words "
                  f"({read[points, dpi]:.3f}), OCR {seconds:.2f} s")
        page.close()
        doc.close()
    assert read[8, pdf_ocr.OCR_DPI] >= 0.99 and read[6, pdf_ocr.OCR_DPI] >= 0.9
    assert read[6, pdf_ocr.OCR_DPI] > read[6, 150]
