"""The conversion worker process: real conversions, and a pathological file costs the worker,
never the caller (timeout, crash, memory limit), after which a fresh worker takes over."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from document_fixtures import GOOD, pdf_bytes

from ragd.daemon.convert.docstore import DocStore
from ragd.daemon.convert.process import ConversionWorker
from ragd.daemon.models import Skip
from ragd.daemon.sources.on_request import convert_file

pytestmark = pytest.mark.slow


@pytest.fixture
def worker() -> ConversionWorker:
    w = ConversionWorker(timeout_s=60, memory_mb=1024, idle_s=0)
    yield w
    w.close()


def test_every_format_converts_in_one_worker(worker: ConversionWorker) -> None:
    names = {"tex": "latex"}
    for suffix, make in GOOD.items():
        answer = worker.convert(names.get(suffix, suffix), make())
        assert not isinstance(answer, Skip), (suffix, answer)
        assert answer["markdown"].strip()
    assert worker.starts == 1 and worker.calls == len(GOOD)


def test_the_daemon_never_imports_a_converter_library() -> None:
    code = ("import sys, ragd.daemon.runtime.app, ragd.daemon.runtime.service, ragd.daemon.convert.documents, "
            "ragd.daemon.convert.process, ragd.daemon.runtime.methods\n"
            "heavy = {'pypdfium2', 'docx', 'pptx', 'openpyxl', 'lxml', 'PIL', "
            "'html_to_markdown', 'pylatexenc'}\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parents[3])
    assert out.stdout.strip() == "[]"


def test_a_conversion_past_the_time_limit_kills_the_worker_and_the_next_one_works(
        worker: ConversionWorker) -> None:
    worker.timeout_s = 0.001
    assert worker.convert("pdf", pdf_bytes()).code == "convert_timeout"  # type: ignore[union-attr]
    assert not worker.running
    worker.timeout_s = 60
    answer = worker.convert("pdf", pdf_bytes())
    assert not isinstance(answer, Skip) and "zebrafish" in answer["markdown"]
    assert worker.starts == 2


def test_a_crashing_worker_is_a_skip_and_is_replaced(worker: ConversionWorker) -> None:
    big = ("a,b,c\n" * 3_000_000).encode()  # seconds of work: time to crash it mid-way
    results: list[object] = []
    thread = threading.Thread(target=lambda: results.append(worker.convert("csv", big)))
    thread.start()
    deadline = time.monotonic() + 30
    while not (worker.running and worker.calls == 1) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert worker._proc is not None
    os.kill(worker._proc.pid, signal.SIGSEGV)
    thread.join(60)
    assert results and isinstance(results[0], Skip) and results[0].code == "convert_crashed"
    answer = worker.convert("csv", b"x,y\n1,2\n")
    assert not isinstance(answer, Skip) and "| 1 | 2 |" in answer["markdown"]


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS is enforced on Linux")
def test_a_file_needing_too_much_memory_is_skipped() -> None:
    worker = ConversionWorker(timeout_s=60, memory_mb=300, idle_s=0)
    try:
        big = ("word," * 60 + "\n").encode() * 200_000  # ~60 MB of CSV, far more as rows
        answer = worker.convert("csv", big)
        assert isinstance(answer, Skip) and answer.code in ("convert_memory", "convert_crashed")
        assert not isinstance(worker.convert("csv", b"a\n1\n"), Skip)
    finally:
        worker.close()


def test_an_idle_worker_exits_and_restarts_on_demand() -> None:
    worker = ConversionWorker(timeout_s=60, idle_s=0.2)
    try:
        assert not isinstance(worker.convert("html", b"<p>hi</p>"), Skip)
        deadline = time.monotonic() + 10
        while worker.running and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not worker.running
        assert not isinstance(worker.convert("html", b"<p>again</p>"), Skip)
        assert worker.starts == 2
    finally:
        worker.close()


def test_rag_convert_twice_answers_from_the_cache(worker: ConversionWorker,
                                                  tmp_path: Path) -> None:
    store = DocStore(tmp_path / "docstore", worker)
    doc = tmp_path / "guide.pdf"
    doc.write_bytes(pdf_bytes())
    first = convert_file(store, str(doc), max_bytes=1 << 20)
    t0 = time.perf_counter()
    second = convert_file(store, str(doc), max_bytes=1 << 20)
    assert (first["cached"], second["cached"]) == (False, True)
    assert time.perf_counter() - t0 < 0.5 and worker.calls == 1
    assert second["markdown"] == first["markdown"] and "## Page 3" in first["markdown"]
    copy = tmp_path / "copy.pdf"
    shutil.copy(doc, copy)
    assert convert_file(store, str(copy), max_bytes=1 << 20)["cached"] is True
    assert worker.calls == 1


@pytest.mark.skipif(shutil.which("tesseract") is None,
                    reason="tesseract is not installed (apt install tesseract-ocr)")
def test_an_image_is_read_with_tesseract(worker: ConversionWorker) -> None:
    from PIL import Image, ImageDraw, ImageFont

    img = Image.new("RGB", (900, 160), "white")
    try:
        font = ImageFont.load_default(size=48)
    except TypeError:  # Pillow < 10.1
        font = ImageFont.load_default()
    ImageDraw.Draw(img).text((20, 40), "Harbour lantern", fill="black", font=font)
    import io

    buf = io.BytesIO()
    img.save(buf, format="PNG")
    answer = worker.convert("image", buf.getvalue())
    assert not isinstance(answer, Skip), answer
    assert "lantern" in answer["markdown"].lower()
