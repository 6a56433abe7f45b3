"""The `ragd` CLI as a user runs it: a real process, the real model, a vault full of bad files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ragd.daemon.cli.main import build_parser, format_report

pytestmark = pytest.mark.slow

RAGD = str(Path(sys.executable).with_name("ragd"))
# Root reads a chmod-0 file anyway; without these capabilities it cannot, as a user cannot.
DROP_ROOT_READ = ["setpriv", "--bounding-set=-dac_override,-dac_read_search",
                  "--inh-caps=-dac_override,-dac_read_search", "--"]


def _bad_vault(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "Good.md").write_text("# Good\n\nOrdinary note about lighthouses.", encoding="utf-8")
    (root / "Bad yaml.md").write_text("---\ntags: [a, b\ntitle: : :\n---\n# Body\n\nHerons fish "
                                      "in the shallows.", encoding="utf-8")
    (root / "Latin1.md").write_bytes("# Café\n\nCr\xe8me br\xfbl\xe9e recipe.".encode("latin-1"))
    (root / "Binary.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    with open(root / "Huge.md", "wb") as fh:  # 50 MB, sparse: must be rejected by its size
        fh.truncate(50 * 1024 * 1024)
    os.symlink("Loop.md", root / "Loop.md")
    (root / "Secret.md").write_text("# Secret\n\nhidden", encoding="utf-8")
    os.chmod(root / "Secret.md", 0)
    (root / "Empty.md").write_bytes(b"")
    (root / '🗂️ Plugins "quoted" & it\'s.md').write_text(
        "# Plugins\n\nThe quokka plugin list.", encoding="utf-8")
    return root


def _run(args: list[str], home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RAGD_HOME": str(home), "HF_HUB_OFFLINE": "1", "RAGD_PROGRESS": "1"}
    prefix = DROP_ROOT_READ if os.geteuid() == 0 else []
    return subprocess.run([*prefix, RAGD, *args], env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def test_bad_input_is_indexed_or_skipped_with_a_code(tmp_path: Path) -> None:
    vault = _bad_vault(tmp_path / "vault")
    home = tmp_path / "home"

    proc = _run(["index", str(vault), "--json"], home)
    assert proc.returncode == 0, proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout)
    # RAGD_PROGRESS=1 draws the bar on stderr: in chunks embedded, ending full.
    assert "indexing obsidian" in proc.stderr and "chunk" in proc.stderr
    assert "100%" in proc.stderr, proc.stderr
    report = out["reports"][0]
    skipped = {f["path"]: f["code"] for f in report["skipped_files"]}
    assert skipped == {"Binary.md": "binary", "Huge.md": "too_large", "Loop.md": "symlink_loop",
                       "Secret.md": "unreadable", "Empty.md": "empty"}
    warnings = {(w["path"], w["code"]) for w in report["warnings"]}
    assert warnings == {("Bad yaml.md", "bad_frontmatter"), ("Latin1.md", "invalid_utf8")}
    assert report["indexed"] == 4 and report["errors"] == []
    assert out["consistency"]["ok"]
    assert "indexing obsidian" in proc.stderr and "8/8" in proc.stderr  # the progress bar

    # The human summary names each skipped file with its code.
    proc = _run(["index", str(vault)], home)
    assert proc.returncode == 0, proc.stderr
    assert "indexed 0" in proc.stdout and "deleted 0" in proc.stdout
    for path, code in skipped.items():
        assert any(code in line and path in line for line in proc.stdout.splitlines()), (
            path, proc.stdout)

    for query, title in (("quokka", "Plugins"), ("herons", "Body"), ("crème brûlée", "Café")):
        proc = _run(["search", query, "--json", "--mode", "keyword"], home)
        assert proc.returncode == 0, proc.stderr
        results = json.loads(proc.stdout)["results"]
        assert results and results[0]["title"] in (title, Path(results[0]["source_path"]).stem)

    proc = _run(["doctor", "--json"], home)
    checks = {c["name"]: c for c in json.loads(proc.stdout)}
    assert proc.returncode == 0, proc.stdout
    assert checks["model"]["status"] == "ok" and "384 dimensions" in checks["model"]["detail"]
    assert checks["indexes"]["status"] == "ok" and checks["vault"]["status"] == "ok"
    assert "4 sources" in checks["collection obsidian"]["detail"]


def test_errors_print_a_hint_and_exit_non_zero(tmp_path: Path) -> None:
    proc = _run(["search", "anything", "--date-from", "31/12/2024"], tmp_path)
    assert proc.returncode == 1
    assert "date_from" in proc.stderr and "hint: use the form YYYY-MM-DD" in proc.stderr
    proc = _run(["index", str(tmp_path / "missing")], tmp_path)
    assert proc.returncode == 1 and "does not exist" in proc.stderr and "hint:" in proc.stderr


def test_parser_and_report_format() -> None:
    args = build_parser().parse_args(["search", "a", "b", "--tag", "x", "--tag", "y", "-k", "3"])
    assert args.query == ["a", "b"] and args.tag == ["x", "y"] and args.top_k == 3
    from ragd.daemon.indexer.pipeline import IndexReport

    r = IndexReport("obsidian", total_found=3, indexed=1)
    r.skipped_files.append(("x.md", "binary", "file looks binary"))
    text = format_report(r)
    assert "skipped 1" in text and "binary" in text and "x.md" in text
    mail = IndexReport("email", total_found=2, indexed=40, unchanged=1, containers=True)
    text = format_report(mail)
    assert "2 mail files found" in text and "messages indexed 40" in text
    assert "notes read" not in text


def test_convert_prints_markdown_caches_and_explains_what_it_cannot(
        tmp_path: Path, ragd_home: Path) -> None:
    from document_fixtures import docx_bytes

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "report.docx").write_bytes(docx_bytes())
    env = {**os.environ, "RAGD_HOME": str(ragd_home), "HF_HUB_OFFLINE": "1",
           "RAGD_DOCUMENTS_TIMEOUT_S": "60"}

    def ragd(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([RAGD, *args], env={**env, **extra}, capture_output=True,
                              text=True, timeout=120, check=False, cwd=tmp_path)

    first = ragd("convert", "docs/report.docx")  # relative to the user's own folder
    assert first.returncode == 0, first.stderr
    assert "# Quarterly Report" in first.stdout and "4242" in first.stdout
    # Outside the collections a conversion is not kept unless asked (decision 0023).
    report = str(tmp_path / "docs" / "report.docx")
    again = json.loads(ragd("convert", "--json", report).stdout)
    assert (again["cached"], again["kept"], again["source_type"]) == (False, False, "docx")
    ragd("convert", report, RAGD_CONVERT_KEEP_OUTSIDE="true")
    kept = json.loads(ragd("convert", "--json", report, RAGD_CONVERT_KEEP_OUTSIDE="true").stdout)
    assert kept["cached"] is True and kept["kept"] is True
    (tmp_path / "docs" / "broken.docx").write_bytes(b"PK\x03\x04 not really a zip")
    bad = ragd("convert", "docs/broken.docx")
    assert bad.returncode != 0 and "broken.docx" in bad.stderr and "Traceback" not in bad.stderr
    folder = ragd("convert", "docs")
    assert folder.returncode != 0 and "Traceback" not in folder.stderr
