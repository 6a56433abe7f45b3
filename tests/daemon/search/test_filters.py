import sqlite3

import pytest

from ragd.daemon.errors import InvalidArgument
from ragd.daemon.models import Filters
from ragd.daemon.search.filters import clean_folder, parse_date, to_sql, to_whoosh


def test_parse_date_accepts_iso_and_names_the_parameter() -> None:
    assert parse_date("date_from", "2024-02-29") == 20240229
    assert parse_date("date_from", None) is None
    with pytest.raises(InvalidArgument) as err:
        parse_date("date_to", "31/12/2024")
    assert err.value.param == "date_to" and "YYYY-MM-DD" in err.value.hint


def test_clean_folder() -> None:
    assert clean_folder("/Projects/Alpha/") == "Projects/Alpha"
    assert clean_folder("a\\b") == "a/b"
    assert clean_folder("  /  ") is None


def _db() -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    db.executescript("""
        CREATE TABLE collections (id INTEGER PRIMARY KEY, name TEXT, type TEXT);
        CREATE TABLE sources (id INTEGER PRIMARY KEY, collection_id INT, path TEXT,
            source_type TEXT, date INT, metadata TEXT);
        CREATE TABLE source_tags (source_id INT, tag TEXT);
        INSERT INTO collections VALUES (1, 'obsidian', 'system'), (2, 'work', 'project');
        INSERT INTO sources VALUES
            (1, 1, 'Projects/a.md', 'markdown', 20240105, '{"sender": "Ann <ann@x.org>"}'),
            (2, 1, 'Projects_old/b.md', 'markdown', 20230101, '{}'),
            (3, 2, 'c.txt', 'txt', NULL, '{"authors": ["Lewis Carroll"]}');
        INSERT INTO source_tags VALUES (1, 'project/alpha'), (2, 'project'), (3, 'books');
    """)
    return db


def _ids(f: Filters) -> list[int]:
    where, args = to_sql(f)
    sql = ("SELECT s.id FROM sources s JOIN collections c ON c.id = s.collection_id WHERE "
           + where + " ORDER BY s.id")
    return [r[0] for r in _db().execute(sql, args)]


def test_sql_filters() -> None:
    assert _ids(Filters()) == [1, 2, 3]
    assert _ids(Filters(collections=("work",))) == [3]
    assert _ids(Filters(collections=())) == []
    assert _ids(Filters(source_type="markdown")) == [1, 2]
    assert _ids(Filters(date_from=20240101)) == [1]
    assert _ids(Filters(date_to=20231231)) == [2]
    # '_' in a folder name is literal, not a LIKE wildcard; the folder is a prefix of paths
    assert _ids(Filters(folder="Projects")) == [1]
    assert _ids(Filters(folder="Projects_old")) == [2]
    # a parent tag matches nested tags, never a tag that merely starts the same
    assert _ids(Filters(tags=("project",))) == [1, 2]
    assert _ids(Filters(tags=("project/alpha",))) == [1]
    assert _ids(Filters(tags=("proj",))) == []
    assert _ids(Filters(sender="ANN@")) == [1]
    assert _ids(Filters(author="carroll")) == [3]


def test_whoosh_filter_built_only_when_needed() -> None:
    assert to_whoosh(Filters()) is None
    q = to_whoosh(Filters(source_type="markdown", tags=("a", "b"), date_from=20240101))
    text = repr(q)
    assert "source_type" in text and "'a'" in text and "'b'" in text and "date" in text
    assert Filters(tags=("x",)).active and not Filters().active


def test_a_system_name_means_its_family() -> None:
    from ragd.daemon.search.filters import system_family

    colls = [("obsidian", "system"), ("email", "system"), ("email-work", "system"),
             ("email-notes", "project"), ("proj", "project"), ("obsidian-2", "system")]
    assert system_family("email", colls) == ("email", "email-work")
    assert system_family("email-work", colls) == ("email-work",)
    assert system_family("obsidian", colls) == ("obsidian", "obsidian-2")
    assert system_family("proj", colls) == ("proj",)
    assert system_family("calibre", colls) == ()
