"""Pure parts of the calibre collection: finding the library from Calibre's settings in fake
homes (Linux, macOS, Windows, the override variable, the pre-1.0 settings file), choosing a
book's format, Calibre's timestamps and library ids, and the read-only, patient reader."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from ragd.daemon.settings.calibrelib import calibre_config_candidates, discover_libraries
from ragd.daemon.sources.calibre import CalibreKind, book_tags
from ragd.daemon.sources.calibredb import (
    Book,
    LibraryBusy,
    LibraryUnreadable,
    book_uri,
    library_id,
    pub_day,
    read_library,
    timestamp_ns,
)


def _library(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "metadata.db").write_bytes(b"")
    return path


def _settings(folder: Path, library: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "global.py.json").write_text(json.dumps({"library_path": str(library)}),
                                           encoding="utf-8")


def test_linux_reads_global_py_json_under_xdg_config(tmp_path: Path) -> None:
    home = tmp_path / "home"
    lib = _library(tmp_path / "Calibre Library")
    _settings(home / ".config" / "calibre", lib)
    assert discover_libraries("linux", {}, home) == [lib]
    xdg = tmp_path / "xdg"
    other = _library(tmp_path / "Other")
    _settings(xdg / "calibre", other)
    assert discover_libraries("linux", {"XDG_CONFIG_HOME": str(xdg)}, home) == [other]
    # A relative XDG_CONFIG_HOME is invalid and ignored.
    assert discover_libraries("linux", {"XDG_CONFIG_HOME": "rel"}, home) == [lib]


def test_macos_windows_and_the_override(tmp_path: Path) -> None:
    home = tmp_path / "home"
    lib = _library(tmp_path / "Books")
    _settings(home / "Library" / "Preferences" / "calibre", lib)
    assert discover_libraries("darwin", {}, home) == [lib]
    appdata = tmp_path / "AppData" / "Roaming"
    _settings(appdata / "calibre", lib)
    assert discover_libraries("win32", {"APPDATA": str(appdata)}, home) == [lib]
    assert calibre_config_candidates("win32", {}, home) == [
        home / "AppData" / "Roaming" / "calibre"]
    custom = tmp_path / "custom"
    _settings(custom, lib)
    assert discover_libraries("linux", {"CALIBRE_CONFIG_DIRECTORY": str(custom)}, home) == [lib]


def test_old_settings_file_broken_files_and_missing_libraries(tmp_path: Path) -> None:
    home = tmp_path / "home"
    folder = home / ".config" / "calibre"
    folder.mkdir(parents=True)
    lib = _library(tmp_path / "Old Library")
    (folder / "global.py").write_text(f"database_path = 'x'\nlibrary_path = {str(lib)!r}\n",
                                      encoding="utf-8")
    assert discover_libraries("linux", {}, home) == [lib]
    (folder / "global.py.json").write_text("{broken", encoding="utf-8")
    assert discover_libraries("linux", {}, home) == [lib]  # falls back to global.py
    (folder / "global.py").write_text("library_path = os.getcwd()\n", encoding="utf-8")
    assert discover_libraries("linux", {}, home) == []  # not a literal: never evaluated
    _settings(folder, tmp_path / "gone")
    assert discover_libraries("linux", {}, home) == []
    assert discover_libraries("linux", {}, tmp_path / "nobody") == []


def _book(**formats: str) -> Book:
    return Book(id=7, title="T", path="A/T (7)", last_modified="", formats=dict(formats))


def test_format_choice_follows_the_configured_order() -> None:
    kind = CalibreKind(None, ebook_convert="")
    assert kind.choose_format(_book(PDF="t", EPUB="t", MOBI="t")) == "EPUB"
    assert kind.choose_format(_book(PDF="t", MOBI="t")) == "PDF"  # no ebook-convert
    assert CalibreKind(None, ebook_convert="/usr/bin/ebook-convert").choose_format(
        _book(PDF="t", MOBI="t")) == "MOBI"
    assert kind.choose_format(_book(JPG="t")) is None
    assert kind.choose_format(_book(DOCX="t", DJVU="t")) == "DOCX"  # one the doc store reads
    assert kind.choose_format(_book(DJVU="t")) is None  # metadata only
    assert CalibreKind(None, ebook_convert="/usr/bin/ebook-convert").choose_format(
        _book(DJVU="t")) == "DJVU"
    pdf_first = CalibreKind(None, formats=["pdf", "epub"], ebook_convert="")
    assert pdf_first.choose_format(_book(PDF="t", EPUB="t")) == "PDF"
    assert _book(EPUB="Title - Author").file_rel("EPUB") == "A/T (7)/Title - Author.epub"


def test_tags_series_timestamps_and_links() -> None:
    book = Book(id=3, title="T", path="p", last_modified="", tags=("Sci-Fi", "sci-fi", " "),
                series="The Long Road")
    assert book_tags(book) == ["sci-fi", "series/the long road"]
    assert timestamp_ns("2024-05-01 10:00:00+00:00") == 1714557600 * 10**9
    assert timestamp_ns("2024-05-01 10:00:00.500000+00:00") == 1714557600 * 10**9 + 5 * 10**8
    assert timestamp_ns("garbage") == 0
    assert pub_day("2019-02-03 00:00:00+00:00") == "2019-02-03"
    assert pub_day("0101-01-01 00:00:00+00:00") is None  # Calibre's "undefined"
    assert library_id(Path("/x/Calibre Library")) == "Calibre_Library"
    assert library_id(Path("/x/Bücher")) == "_hex_-" + "Bücher".encode().hex()
    assert book_uri(Path("/x/Calibre Library"), 3, "EPUB") \
        == "calibre://view-book/Calibre_Library/3/EPUB"
    assert book_uri(Path("/x/L"), 3, None) == "calibre://show-book/L/3"


def test_reader_is_read_only_and_gives_up_on_a_held_lock(tmp_path: Path) -> None:
    with pytest.raises(LibraryUnreadable):
        read_library(tmp_path)
    db = sqlite3.connect(tmp_path / "metadata.db", isolation_level=None)
    db.execute("CREATE TABLE books (id INTEGER PRIMARY KEY)")
    with pytest.raises(LibraryUnreadable):  # not Calibre's: no such table
        read_library(tmp_path)
    db.execute("BEGIN EXCLUSIVE")
    waits: list[float] = []
    try:
        with pytest.raises(LibraryBusy):
            read_library(tmp_path, attempts=3, timeout_s=0.01, sleep=waits.append)
    finally:
        db.execute("ROLLBACK")
        db.close()
    assert waits == [0.01, 0.01]


def test_chapter_headings_are_page_numbers_of_reflowable_books() -> None:
    from ragd.daemon.convert.formats import page_number

    assert page_number("epub", ("Chapter 3", "Loomings")) == 3
    assert page_number("pdf", ("Page 2",)) == 2
    assert page_number("epub", ("Description",)) is None
    assert page_number("book", ("Chapter 3",)) is None


def test_a_metadata_db_linked_from_outside_the_library_is_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.db"
    sqlite3.connect(outside).close()
    library = tmp_path / "Library"
    library.mkdir()
    (library / "metadata.db").symlink_to(outside)
    with pytest.raises(LibraryUnreadable, match="not a file inside the library"):
        read_library(library)
