"""Scanned documents for the OCR tests (decision 0044): text drawn into an image with PIL,
saved as a PDF page with no text layer, as a scanner's PDF is."""

from __future__ import annotations

import io
import shutil

import pytest

SCANNED_PAGES = ["Quarterly ledger from the Zanzibar harbour office",
                 "Lighthouse keepers logged the copper kettle inventory"]


def page_image(text: str, dpi: int = 150) -> object:
    """A letter-size grey page with ``text`` in a large sans-serif face."""
    from PIL import Image, ImageDraw, ImageFont

    img = Image.new("L", (int(8.5 * dpi), 11 * dpi), 255)
    draw = ImageDraw.Draw(img)
    font = ImageFont.load_default(size=int(dpi / 4))
    draw.text((dpi, dpi), text, fill=0, font=font)
    return img


def scanned_pdf(pages: list[str] | None = None, dpi: int = 150) -> bytes:
    """A PDF whose pages are images only (PIL writes no text layer)."""
    images = [page_image(text, dpi) for text in pages or SCANNED_PAGES]
    buf = io.BytesIO()
    images[0].save(buf, format="PDF", save_all=True,  # type: ignore[attr-defined]
                   append_images=images[1:], resolution=dpi)
    return buf.getvalue()


def mixed_pdf(text_page: str, scanned_page: str) -> bytes:
    """Page 1 with a text layer (reportlab), page 2 an image only."""
    from reportlab.lib.pagesizes import letter
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=letter)
    c.drawString(72, 720, text_page)
    c.showPage()
    c.drawImage(ImageReader(page_image(scanned_page)), 0, 0, *letter)
    c.showPage()
    c.save()
    return buf.getvalue()


def need_tesseract() -> str:
    exe = shutil.which("tesseract")
    if exe is None:
        pytest.skip("Tesseract is not installed (apt install tesseract-ocr; .ci/run does)")
    return exe


def small_print_scan(points: float, seed: int = 44) -> tuple[bytes, list[str]]:
    """A letter page of 30 lines of random words at ``points`` size, scanned at 300 DPI,
    rotated 0.7°, blurred and noised, as an image-only PDF; and its words."""
    import random

    from PIL import Image, ImageDraw, ImageFilter, ImageFont

    words = ["the", "harbour", "ledger", "records", "copper", "kettles", "lighthouse", "keepers", "walrus", "census", "orchard", "meeting", "minutes", "quarterly", "inventory", "shipping", "manifest", "cargo", "weather", "tides", "anchor", "rope", "sail", "lantern"]
    rng, dpi = random.Random(seed), 300
    img = Image.new("L", (int(8.5 * dpi), 11 * dpi), 255)
    draw = ImageDraw.Draw(img)
    size = int(points * dpi / 72)
    font = ImageFont.load_default(size=size)
    lines = [" ".join(rng.choice(words) for _ in range(9)) for _ in range(30)]
    for n, line in enumerate(lines):
        draw.text((dpi, dpi + n * int(size * 1.5)), line, fill=0, font=font)
    img = img.rotate(0.7, fillcolor=255, resample=Image.Resampling.BICUBIC)
    img = Image.blend(img.filter(ImageFilter.GaussianBlur(1.6)),
                      Image.effect_noise(img.size, 40), 0.25)
    buf = io.BytesIO()
    img.save(buf, format="PDF", resolution=dpi)
    return buf.getvalue(), " ".join(lines).split()
