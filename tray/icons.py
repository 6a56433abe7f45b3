"""The tray icon's images, one per state, drawn with Pillow at whatever size a platform wants.

Each state differs in colour *and* shape (a check, an arc, two bars, an exclamation mark, a
slash, three dots), so the states stay apart for colour-blind users and in monochrome panels.
Pillow is imported inside :func:`icon_image` only: the view model imports :func:`tooltip` from
here without paying for it.

``python -m ragd.tray.icons DIR`` writes the PNGs of every state and size (packaging/icons/).
"""

from __future__ import annotations

import math
import sys
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PIL import ImageDraw
    from PIL.Image import Image

ICON_STATES: tuple[str, ...] = ("idle", "indexing", "paused", "error", "unreachable", "starting")
# 16/32: Windows notification area (100 % / 200 %); 22/44: the macOS menu bar (1x / 2x);
# 24/48: GNOME/KDE panels; 64+: appindicator scales down itself and the desktop entry icon.
SIZES: tuple[int, ...] = (16, 22, 24, 32, 44, 48, 64, 128, 256)
TOOLTIP_MAX = 127  # Windows keeps 128 characters of a notification-area tip, NUL included

# Material palette: dark enough for a white glyph on a light or a dark panel.
COLOURS: dict[str, tuple[int, int, int]] = {
    "idle": (46, 125, 50),
    "indexing": (21, 101, 192),
    "paused": (230, 145, 0),
    "error": (198, 40, 40),
    "unreachable": (117, 117, 117),
    "starting": (84, 110, 122),
}
_WHITE = (255, 255, 255, 255)
_SUPERSAMPLE = 4  # draw large, then shrink: Pillow's shapes have no antialiasing


def platform_size(platform: str | None = None) -> int:
    """The image size to hand pystray on ``platform`` (a ``sys.platform`` value)."""
    platform = platform or sys.platform
    if platform == "win32":
        return 32
    if platform == "darwin":
        return 44
    return 64


def icon_image(state: str, size: int = 64, progress: float | None = None) -> Image:
    """The RGBA image of ``state`` (one of :data:`ICON_STATES`) at ``size`` x ``size``.

    ``progress`` (0-1) draws the indexing arc that far round; ``None`` draws a quarter arc.
    Images are cached: treat them as read-only.
    """
    if state not in COLOURS:
        raise ValueError(f"unknown icon state {state!r}; expected one of {ICON_STATES}")
    if size < 8:
        raise ValueError(f"icon size {size} is too small")
    bucket = None if progress is None else round(max(0.0, min(1.0, progress)) * 16) / 16
    return _render(state, size, bucket)


@lru_cache(maxsize=128)
def _render(state: str, size: int, progress: float | None) -> Image:
    from PIL import Image, ImageDraw

    big = size * _SUPERSAMPLE
    img = Image.new("RGBA", (big, big), (0, 0, 0, 0))
    draw = ImageDraw.Draw(img)
    colour = (*COLOURS[state], 255)
    pad = big * 0.04
    box = (pad, pad, big - pad, big - pad)
    line = max(_SUPERSAMPLE, round(big * 0.12))
    if state == "unreachable":
        draw.ellipse(box, outline=colour, width=line)  # hollow: nothing is there
    else:
        draw.ellipse(box, fill=colour)
    _GLYPHS[state](draw, big, line, colour, progress)
    return img.resize((size, size), Image.Resampling.LANCZOS)


def _check(draw: ImageDraw.ImageDraw, s: int, w: int, colour: tuple, progress: object) -> None:
    draw.line([(s * 0.27, s * 0.52), (s * 0.44, s * 0.69), (s * 0.74, s * 0.33)], fill=_WHITE,
              width=w, joint="curve")


def _arc(draw: ImageDraw.ImageDraw, s: int, w: int, colour: tuple, progress: object) -> None:
    inset = s * 0.22
    box = (inset, inset, s - inset, s - inset)
    # The track: white blended into the disc (drawing with alpha would punch a hole in it).
    track = tuple(round(c * 0.6 + 255 * 0.4) for c in colour[:3]) + (255,)
    draw.ellipse(box, outline=track, width=w)
    sweep = 100.0 if progress is None else max(24.0, 360.0 * float(progress))  # type: ignore[arg-type]
    draw.arc(box, start=-90, end=-90 + sweep, fill=_WHITE, width=w)
    # Round the two ends of the arc so it reads as a stroke, not a wedge.
    r = (s - 2 * inset) / 2 - w / 2
    for angle in (-90.0, -90.0 + sweep):
        x = s / 2 + r * math.cos(math.radians(angle))
        y = s / 2 + r * math.sin(math.radians(angle))
        draw.ellipse((x - w / 2, y - w / 2, x + w / 2, y + w / 2), fill=_WHITE)


def _bars(draw: ImageDraw.ImageDraw, s: int, w: int, colour: tuple, progress: object) -> None:
    top, bottom, width = s * 0.28, s * 0.72, s * 0.13
    for left in (s * 0.33, s * 0.54):
        draw.rectangle((left, top, left + width, bottom), fill=_WHITE)


def _bang(draw: ImageDraw.ImageDraw, s: int, w: int, colour: tuple, progress: object) -> None:
    half = s * 0.07
    draw.rectangle((s / 2 - half, s * 0.2, s / 2 + half, s * 0.58), fill=_WHITE)
    draw.ellipse((s / 2 - half * 1.1, s * 0.66, s / 2 + half * 1.1, s * 0.66 + half * 2.2),
                 fill=_WHITE)


def _slash(draw: ImageDraw.ImageDraw, s: int, w: int, colour: tuple, progress: object) -> None:
    draw.line([(s * 0.24, s * 0.76), (s * 0.76, s * 0.24)], fill=colour, width=w)


def _dots(draw: ImageDraw.ImageDraw, s: int, w: int, colour: tuple, progress: object) -> None:
    r = s * 0.075
    for cx in (s * 0.28, s * 0.5, s * 0.72):
        draw.ellipse((cx - r, s / 2 - r, cx + r, s / 2 + r), fill=_WHITE)


_GLYPHS = {"idle": _check, "indexing": _arc, "paused": _bars, "error": _bang,
           "unreachable": _slash, "starting": _dots}


def tooltip(label: str, detail: str = "") -> str:
    """The icon's tooltip/title: ``ragd: Indexing: 1,234 remaining``, cut to fit Windows."""
    text = f"ragd: {label}: {detail}" if detail else f"ragd: {label}"
    text = " ".join(text.split())  # one line: tips and menu bar titles do not wrap
    return text if len(text) <= TOOLTIP_MAX else text[:TOOLTIP_MAX - 1] + "…"


def write_icons(directory: Path, sizes: tuple[int, ...] = (64,)) -> list[Path]:
    """Write ``ragd-<state>-<size>.png`` for every state and size, and ``ragd.png`` (256 px)."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for state in ICON_STATES:
        for size in sizes:
            path = directory / f"ragd-{state}-{size}.png"
            icon_image(state, size).save(path, optimize=True)
            written.append(path)
    main = directory / "ragd.png"
    icon_image("idle", 256).save(main, optimize=True)
    return [*written, main]


if __name__ == "__main__":  # pragma: no cover - a maintenance command
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "packaging/icons")
    for p in write_icons(target):
        print(p)
