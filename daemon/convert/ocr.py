"""The Tesseract command: found on the PATH, and run on one image under a time limit.

Images (``converters.convert_image``) and a PDF's scanned pages (``pdf_ocr``) are read
through it.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from ragd.daemon.convert.converted import ConvertSkip

OCR_TIMEOUT_S = 120.0


def tesseract() -> str | None:
    return shutil.which("tesseract")


OCR_MISSING = ("reading text from images needs Tesseract OCR (e.g. apt install "
               "tesseract-ocr), which is not installed")


def ocr_text(exe: str, image: bytes, *, timeout_s: float = OCR_TIMEOUT_S,
             dpi: int | None = None) -> str:
    """The text Tesseract (``exe``) reads in an image (any format it reads: PNG, JPEG, PNM,
    ...); ``dpi`` when the image does not say its own. ConvertSkip on a timeout or an
    unreadable image."""
    env = dict(os.environ, OMP_THREAD_LIMIT="1")  # one core: the laptop stays usable
    args = [exe, "stdin", "stdout"] + (["--dpi", str(dpi)] if dpi else [])
    try:
        proc = subprocess.run(args, input=image, capture_output=True, timeout=timeout_s,
                              env=env, check=False)
    except subprocess.TimeoutExpired:
        raise ConvertSkip("convert_timeout", f"OCR took over {timeout_s:g} s") from None
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise ConvertSkip("parse_error", "not a readable image: "
                          + (err[-1] if err else f"tesseract exit {proc.returncode}"))
    return proc.stdout.decode("utf-8", "replace").strip()
