from ragd.daemon.runtime.watch import hint_bytes, hints_from_changes, is_ignored


def test_events_map_to_collections_and_relative_paths() -> None:
    roots = {"obsidian": "/v", "proj": "/v/work/proj", "other": "/x"}
    changes = [(1, "/v/a.md"), (2, "/v/work/proj/b.md"), (3, "/x/sub/c.txt"), (1, "/elsewhere")]
    assert hints_from_changes(changes, roots, []) == {
        "obsidian": {"a.md"}, "proj": {"b.md"}, "other": {"sub/c.txt"}}


def test_ignored_paths_give_no_hint_but_folders_do() -> None:
    roots = {"obsidian": "/v"}
    changes = [(1, "/v/.obsidian/workspace.json"), (1, "/v/.trash/x.md"), (1, "/v/n.md~"),
               (1, "/v/.n.md.swp"), (1, "/v/node_modules/a.md"), (1, "/v/Moved folder")]
    assert hints_from_changes(changes, roots, ["node_modules"]) == {"obsidian": {"Moved folder"}}


def test_root_event_means_look_at_everything() -> None:
    assert hints_from_changes([(1, "/v")], {"obsidian": "/v"}, []) == {"obsidian": {""}}


def test_is_ignored() -> None:
    assert is_ignored("a/.hidden/b.md", [])
    assert is_ignored("#draft.md#", [])
    assert not is_ignored("Notes/Plan.md", [".git"])


def test_hint_bytes_weighs_files_only(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "feed.xml").write_bytes(b"x" * 5000)
    (tmp_path / "Inbox").mkdir()
    (tmp_path / "Inbox" / "note.md").write_text("hello", encoding="utf-8")
    assert hint_bytes(str(tmp_path), ["feed.xml", "Inbox", "Inbox/note.md", "gone.md"]) == 5005
    assert hint_bytes(str(tmp_path), []) == 0
