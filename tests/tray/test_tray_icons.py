"""The icon images: one per state, distinct at every size a platform asks for."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from PIL import Image, ImageChops, ImageStat

from ragd.tray.icons import (
    COLOURS,
    ICON_STATES,
    SIZES,
    TOOLTIP_MAX,
    icon_image,
    platform_size,
    tooltip,
    write_icons,
)


def _difference(a: Image.Image, b: Image.Image) -> float:
    """Mean per-channel difference (0-255) between two images of one size."""
    diff = ImageChops.difference(a.convert("RGBA"), b.convert("RGBA"))
    return sum(ImageStat.Stat(diff).mean) / 4


@pytest.mark.parametrize("size", SIZES)
def test_every_state_has_a_square_rgba_image(size: int) -> None:
    for state in ICON_STATES:
        img = icon_image(state, size)
        assert img.mode == "RGBA" and img.size == (size, size)
        assert img.getbbox() is not None  # not blank
        assert img.getchannel("A").getpixel((0, 0)) == 0  # transparent corners


@pytest.mark.parametrize("size", [16, 22, 32])
def test_states_differ_from_each_other_even_small(size: int) -> None:
    images = {s: icon_image(s, size) for s in ICON_STATES}
    for a, b in itertools.combinations(ICON_STATES, 2):
        assert _difference(images[a], images[b]) > 8, f"{a} and {b} look alike at {size} px"


def test_states_differ_in_shape_not_only_colour() -> None:
    """In greyscale (a monochrome panel, colour blindness) the glyphs still tell them apart."""
    grey = {s: icon_image(s, 32).convert("LA") for s in ICON_STATES}
    for a, b in itertools.combinations(ICON_STATES, 2):
        assert _difference(grey[a], grey[b]) > 3, f"{a} and {b} differ only by colour"


def test_disc_has_the_state_colour() -> None:
    for state, colour in COLOURS.items():
        r, g, b, a = icon_image(state, 64).getpixel((32, 7))  # type: ignore[misc]
        assert a > 200 and max(abs(r - colour[0]), abs(g - colour[1]), abs(b - colour[2])) < 30


def test_indexing_progress_changes_the_arc() -> None:
    quarter = icon_image("indexing", 64, 0.25)
    most = icon_image("indexing", 64, 0.9)
    assert _difference(quarter, most) > 2
    # Buckets of 1/16: nearby fractions share one cached image (no redraw per event).
    assert icon_image("indexing", 64, 0.500) is icon_image("indexing", 64, 0.51)


def test_unknown_state_and_tiny_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown icon state"):
        icon_image("sleepy", 32)
    with pytest.raises(ValueError, match="too small"):
        icon_image("idle", 4)


def test_platform_sizes() -> None:
    assert platform_size("win32") == 32
    assert platform_size("darwin") == 44
    assert platform_size("linux") == 64


def test_tooltip() -> None:
    assert tooltip("Indexing", "1,234 remaining") == "ragd: Indexing: 1,234 remaining"
    assert tooltip("Idle") == "ragd: Idle"
    assert tooltip("Error", "line one\nline two") == "ragd: Error: line one line two"
    long = tooltip("Error", "x" * 300)
    assert len(long) == TOOLTIP_MAX and long.endswith("…")


def test_write_icons_matches_the_packaged_icon(tmp_path: Path) -> None:
    written = write_icons(tmp_path)
    assert {p.name for p in written} == {f"ragd-{s}-64.png" for s in ICON_STATES} | {"ragd.png"}
    packaged = Path(__file__).resolve().parents[2] / "packaging" / "icons" / "ragd.png"
    assert packaged.is_file(), "regenerate with `python -m ragd.tray.icons packaging/icons`"
    with Image.open(packaged) as shipped, Image.open(tmp_path / "ragd.png") as fresh:
        assert shipped.size == (256, 256)
        assert _difference(shipped, fresh) < 1.0
