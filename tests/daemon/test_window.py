"""ragd's window (issue 38, decision 0053): a real daemon on a copy of the shared kepano vault,
its page and API over real HTTP; the same daemon serves the browser tests of
``test_window_browser.py`` (one start for both, through ``window_daemon``).

What is checked: the opening URL trades its token for an HttpOnly SameSite=Strict cookie and
a redirect; without the cookie, with a wrong Host, with a foreign or missing Origin on a
change, the answer is 401/403 and nothing changed; every answer carries the CSP and no CORS
header; search, skipped files (with code, reason and hint), retry, a project folder added and
found and removed, opening a file outside the indexed folders refused."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from daemon_proc import wait_for
from window_fixture import Window

from ragd.daemon.web import api, guard

pytestmark = pytest.mark.slow


# -- unit: the guard's rules, the links a result opens with ------------------------------------


def _verdict(**over: object) -> tuple[int, str]:
    request: dict[str, object] = {"method": "GET", "path": "/", "host": "127.0.0.1:8000",
                                  "origin": None, "cookie": "tok", "query_token": None,
                                  "token": "tok", "port": 8000}
    request.update(over)
    return guard.verdict(**request)  # type: ignore[arg-type]


def test_the_guard_serves_its_page_and_refuses_the_rest() -> None:
    assert _verdict()[0] == 0
    assert _verdict(host="localhost:8000")[0] == 0
    assert _verdict(query_token="tok", cookie=None)[0] == 1  # the opening URL
    assert _verdict(query_token="nope", cookie=None)[0] == 401
    assert _verdict(cookie=None)[0] == 401
    assert _verdict(cookie="toke")[0] == 401
    assert _verdict(host="evil.example:8000")[0] == 403  # DNS rebinding
    assert _verdict(host="127.0.0.1:8001")[0] == 403
    assert _verdict(host=None)[0] == 403
    post = {"method": "POST", "path": "/api/pause"}
    assert _verdict(**post, origin="http://127.0.0.1:8000")[0] == 0
    assert _verdict(**post, origin="http://evil.example")[0] == 403
    assert _verdict(**post, origin=None)[0] == 403
    assert _verdict(**post, origin="http://127.0.0.1:8000", cookie=None)[0] == 401
    assert _verdict(method="PUT")[0] == 405
    assert guard.set_cookie("ragd_8000", "tok") == \
        "ragd_8000=tok; HttpOnly; SameSite=Strict; Path=/"


def test_a_result_opens_in_obsidian_on_the_web_or_with_the_system(tmp_path: Path) -> None:
    note = {"source_uri": "obsidian://open?vault=v&file=A", "source_path": "/v/A.md"}
    assert api.opener(note) == {"kind": "obsidian", "href": note["source_uri"]}
    assert api.wikilink(note) == "[[A]]"
    feed = {"source_uri": "https://example.org/post", "source_path": "/feeds/f.xml"}
    assert api.opener(feed)["kind"] == "url" and api.wikilink(feed) is None
    pdf = tmp_path / "b.pdf"
    pdf.write_bytes(b"%PDF")
    assert api.opener({"source_uri": pdf.as_uri(), "source_path": str(pdf)}) == {"kind": "file"}
    assert api.opener({"source_uri": "", "source_path": str(tmp_path / "gone")}) == \
        {"kind": "none"}
    ran: list[list[str]] = []
    api.system_open("/x/b.pdf", "linux", lambda args, **_: ran.append(args))
    api.system_open("/x/b.pdf", "darwin", lambda args, **_: ran.append(args))
    assert ran == [["xdg-open", "/x/b.pdf"], ["open", "--", "/x/b.pdf"]]


# -- a real daemon ------------------------------------------------------------------------------


def test_the_opening_url_becomes_a_cookie_and_a_clean_address(window: Window) -> None:
    with httpx.Client(follow_redirects=False, timeout=10) as http:
        opened = http.get(window.url)
        assert opened.status_code == 303 and opened.headers["location"] == "/"
        cookie = opened.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert cookie.startswith(f"ragd_{window.port}=")
        page = http.get(window.base + "/")  # the client keeps the cookie, like a browser
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        assert "<script" in page.text and 'src="/static/app.js"' in page.text
        for asset in ("/static/app.js", "/static/app.css"):
            assert http.get(window.base + asset).status_code == 200, asset
        for answer in (opened, page):
            assert "script-src 'self'" in answer.headers["content-security-policy"]
            assert "access-control-allow-origin" not in answer.headers


def test_without_the_token_a_wrong_host_or_a_foreign_origin_nothing_happens(
        window: Window) -> None:
    base = window.base
    with httpx.Client(timeout=10) as stranger:
        assert stranger.get(base + "/").status_code == 401
        assert stranger.get(base + "/static/app.js").status_code == 401
        assert stranger.get(base + "/?token=not-the-token").status_code == 401
        refused = stranger.post(base + "/api/pause", json={},
                                headers={"Origin": base})
        assert refused.status_code == 401 and refused.json()["error"]["message"]
    session = window.session()
    assert session.get(base + "/", headers={"Host": f"evil.example:{window.port}"}
                       ).status_code == 403
    assert session.post(base + "/api/pause", json={},
                        headers={"Origin": "http://evil.example"}).status_code == 403
    assert session.post(base + "/api/pause", json={}).status_code == 403  # no Origin
    assert session.post(base + "/api/pause", json={}, headers={
        "Origin": base, "Host": f"evil.example:{window.port}"}).status_code == 403
    assert not window.daemon.call("status")["paused"], "a refused request paused indexing"
    assert session.request("DELETE", base + "/api/pause").status_code == 405


def test_search_answers_with_snippets_and_the_links_to_open(window: Window) -> None:
    t0 = time.perf_counter()
    answer = window.api("search", {"query": "daily notes template"})
    took = time.perf_counter() - t0
    hits = answer["results"]
    assert hits, answer
    top = hits[0]
    assert top["metadata"]["snippet"] and "content" not in top
    assert top["open"]["kind"] == "obsidian" and top["open"]["href"].startswith("obsidian://")
    assert top["wikilink"].startswith("[[") and top["wikilink"].endswith("]]")
    assert took < 10
    bad = window.session().post(window.base + "/api/search", json={"query": 3},
                                headers={"Origin": window.base})
    assert bad.status_code == 400 and bad.json()["error"]["message"]
    huge = window.session().post(window.base + "/api/search", headers={"Origin": window.base},
                                 content=b'{"query": "' + b"x" * (2 << 20) + b'"}')
    assert huge.status_code == 413  # refused as it is read, never held whole
    chunked = window.session().post(window.base + "/api/search",
                                    headers={"Origin": window.base},
                                    content=iter([b'{"query": "', b"y" * (2 << 20), b'"}']))
    assert chunked.status_code == 413  # no Content-Length: counted while read


def test_skipped_files_show_code_reason_and_hint_and_retry(window: Window) -> None:
    rows = window.api("skipped", {})
    broken = [r for r in rows if r["path"] == window.broken]
    assert broken and broken[0]["skip_code"] == "binary", rows
    assert broken[0]["reason"] and broken[0]["hint"]
    assert window.api("retry", {"collection": broken[0]["collection"],
                                "path": window.broken}) == {"queued": True}
    missing = window.session().post(window.base + "/api/retry", headers={"Origin": window.base},
                                    json={"collection": "obsidian", "path": "nope.md"})
    assert missing.status_code == 404


def test_a_project_folder_added_in_the_window_is_searchable(window: Window, tmp_path: Path
                                                           ) -> None:
    project = tmp_path / "garden-project"
    project.mkdir()
    (project / "plan.md").write_text("# Plan\n\nThe quokkagarden plan for spring.\n",
                                     encoding="utf-8")
    added = window.api("add_source", {"path": str(project)})
    assert added["queued"] and added["collection"] == "garden-project"

    def found() -> list[dict[str, object]]:
        return window.api("search", {"query": "quokkagarden", "mode": "keyword"})["results"]

    hits = wait_for(found, 60, "the project's file in a search")
    assert hits[0]["source_path"] == str(project / "plan.md")
    watched = window.api("sources", {})["watched"]
    assert any(w["name"] == "garden-project" and w["removable"] for w in watched)
    refused = window.session().post(window.base + "/api/add_source",
                                    headers={"Origin": window.base},
                                    json={"path": str(Path.home() / ".ssh")})
    assert refused.status_code == 400 and refused.json()["error"]["hint"]
    removed = window.api("remove_source", {"name": "garden-project"})
    assert removed["removed"] == "garden-project" and removed["sources"] == 1
    assert not found(), "a removed project's file is still found"
    assert all(w["name"] != "garden-project" for w in window.api("sources", {})["watched"])
    vault = window.session().post(window.base + "/api/remove_source",
                                  headers={"Origin": window.base}, json={"name": "obsidian"})
    assert vault.status_code == 400 and "config.toml" in vault.json()["error"]["hint"]


def test_only_indexed_files_are_opened(window: Window, tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("x", encoding="utf-8")
    refused = window.session().post(window.base + "/api/open", headers={"Origin": window.base},
                                    json={"source_path": str(outside)})
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "path_refused"
    status = window.api("status", {})
    assert status["collections"] and "state" in status


def test_the_type_filter_offers_every_source_type_a_search_takes() -> None:
    import re

    from ragd.daemon.search.params import SOURCE_TYPES
    from ragd.daemon.web.server import STATIC

    page = (STATIC / "index.html").read_text(encoding="utf-8")
    select = page[page.index('id="f-type"'):page.index("</select>", page.index('id="f-type"'))]
    offered = set(re.findall(r'<option value="([^"]+)"', select))
    assert offered == set(SOURCE_TYPES) - {"opml"}  # an OPML list is a reader's settings


def test_ragd_open_and_status_give_the_window_url(window: Window) -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "RAGD_HOME": str(window.home)}

    def ragd(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "ragd.daemon.cli.main", *args], env=env,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert window.url in ragd("open", "--print")
    assert f"window: {window.url}" in ragd("status")
    assert '"window": "' + window.url in ragd("status", "--json")
