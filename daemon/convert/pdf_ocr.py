"""OCR of a PDF's scanned pages: rendered by pypdfium2, read by Tesseract (decision 0044).

Worker-process only, and only with ``[documents] ocr_pdfs`` on: a page without a text layer is
rendered in grey at ``OCR_DPI`` (scaled down past ``MAX_PIXELS``: a page may declare any size)
and sent to the Tesseract command as a PGM image, the path images take
(``ragd.daemon.convert.ocr.ocr_text``). Bounds, besides the worker's own time and
memory limits: at most ``PdfOcr.max_pages`` pages, and no page begun past ``PdfOcr.budget_s``
(each page's Tesseract run is cut at what is left), so a long scan yields the pages read so
far instead of a killed worker. The document says what was left out (``ocr_pages_left``,
``ocr_stopped``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from ragd.daemon.convert.converted import ConvertSkip
from ragd.daemon.convert.formats import (
    OCR_PAGE_LIMIT,
    OCR_TESSERACT_MISSING,
    OCR_TIME,
    PdfOcr,
)
from ragd.daemon.convert.ocr import OCR_MISSING, OCR_TIMEOUT_S, ocr_text, tesseract

OCR_DPI = 200  # Tesseract reads body text well from 200 DPI up (decision 0044's figures)
MAX_PIXELS = 25_000_000  # a letter page at 200 DPI is 3.7 million
MIN_PAGE_S = 1.0  # a page is not begun with less time than this left


def render_pgm(page: Any, dpi: int = OCR_DPI, max_pixels: int = MAX_PIXELS) -> tuple[bytes, int]:
    """A pypdfium2 page as a binary PGM image (grey, 8 bits), and the DPI it was rendered at
    (lower than ``dpi`` for a page that would pass ``max_pixels``)."""
    width, height = (max(1.0, float(x)) for x in page.get_size())  # in points (1/72 inch)
    scale = dpi / 72.0
    pixels = width * height * scale * scale
    if pixels > max_pixels:
        scale *= math.sqrt(max_pixels / pixels)
    bitmap = page.render(scale=scale, grayscale=True)
    try:
        w, h, stride, n = bitmap.width, bitmap.height, bitmap.stride, bitmap.n_channels
        buf = bytes(bitmap.buffer)
    finally:
        bitmap.close()
    # Rows may be padded to the stride; a colour bitmap of a grey render has equal channels.
    rows = b"".join(buf[r * stride:r * stride + w * n:n] for r in range(h))
    return f"P5\n{w} {h}\n255\n".encode("ascii") + rows, max(1, round(scale * 72))


class PageOcr:
    """Reads the pages of one PDF that have no text, in page order, within ``options``."""

    def __init__(self, options: PdfOcr, *, exe: str | None = None,
                 read: Callable[..., str] = ocr_text,
                 render: Callable[[Any], tuple[bytes, int]] = render_pgm,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.options = options
        self.exe = exe if exe is not None else tesseract()
        self._read, self._render, self._clock = read, render, clock
        self.started = clock()
        self.pages = 0  # pages read by OCR
        self.left = 0  # pages without text that were not read
        self.stopped: str | None = None

    def read(self, page: Any) -> str:
        """The text of a page without a text layer ("" when OCR is over or finds none)."""
        left_s = self.options.budget_s - (self._clock() - self.started)
        if self.stopped is None:
            if self.exe is None:
                self.stopped = OCR_TESSERACT_MISSING
            elif self.pages >= self.options.max_pages:
                self.stopped = OCR_PAGE_LIMIT
            elif left_s < MIN_PAGE_S:
                self.stopped = OCR_TIME
        if self.stopped is not None:
            self.left += 1
            return ""
        image, dpi = self._render(page)
        try:
            text: str = self._read(self.exe, image, timeout_s=min(OCR_TIMEOUT_S, left_s),
                                   dpi=dpi)
        except ConvertSkip as skip:
            if skip.code == "convert_timeout":
                self.stopped = OCR_TIME
                self.left += 1
                return ""
            text = ""  # Tesseract could not read this page: the others still count
        self.pages += 1
        return text

    def metadata(self) -> dict[str, Any]:
        """What the document's metadata says of its OCR."""
        out: dict[str, Any] = {"ocr_pages": self.pages}
        if self.left:
            out.update(ocr_pages_left=self.left, ocr_stopped=self.stopped)
        return out

    def nothing_read(self) -> None:
        """Raise the skip of a PDF in which neither its text layer nor OCR gave any text."""
        if self.stopped == OCR_TESSERACT_MISSING:
            raise ConvertSkip("ocr_unavailable", "the PDF has no text layer, and "
                              + OCR_MISSING.replace("images", "its pages"))
        if self.stopped == OCR_TIME:
            raise ConvertSkip("convert_timeout", "OCR of the PDF's pages ran out of time "
                              f"({self.options.budget_s:g} s) before it read any text")
        raise ConvertSkip("no_text", f"the PDF has no text layer and OCR read no text on "
                          f"{self.pages} page(s)")
