"""The rss collection's kind: feed files and readers' stores are containers, entries are
documents (decisions 0015 and 0029).

A saved feed (RSS 0.9x/1.0/2.0, Atom, JSON Feed), an OPML list or a Newsboat ``cache.db`` is a
container; each entry is a document keyed by its id (guid / Atom id / JSON Feed id), else its
link, else a hash of what it shows. A feed file saved again with new items is rewritten, not
grown (feeds add at the top): its entries are all listed again, and only those whose key is new
or whose content changed are loaded and embedded. Seen keys, not a publish-date watermark,
decide what is new, so a late item with an old date is not lost. An entry that falls off the
end of a saved feed stays (``keeps_lost``): the file is a window on the feed, and the reader's
history is what people search. A reader's store is the reader's own history: what it drops is
dropped.

The feed is parsed in the conversion worker (``ragd.daemon.convert.feedparse``), bounded by its time
and memory limits and by ``[rss] max_entries``; an entry's HTML becomes text there too, only
when the entry is new or changed (``mail_html``, decision 0025).
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragd.daemon.convert.bounds import cut
from ragd.daemon.convert.converted import ConvertSkip
from ragd.daemon.convert.feedparse import DEFAULT_MAX_ENTRIES, TRUNCATED, feed_format, parse_feed
from ragd.daemon.convert.htmltext import html_text
from ragd.daemon.models import Document, Skip
from ragd.daemon.settings.feedreaders import READER_DBS
from ragd.daemon.sources.entry import Entry
from ragd.daemon.sources.files import WalkResult, read_bytes, walk_vault
from ragd.daemon.sources.mailkind import plain_text_body
from ragd.daemon.sources.newsboat import Article, read_articles, read_content

if TYPE_CHECKING:
    from ragd.daemon.convert.documents import Documents

FEED_SUFFIXES = (".xml", ".rss", ".atom", ".rdf", ".json", ".opml", ".feed")
MAX_ENTRY_CHARS = 200_000  # of one entry's text; a long essay is ~50,000
DEFAULT_MAX_FEED_BYTES = 64 * 1024 * 1024
ENTRY_SKIP = "too_many_entries"


def is_feed_name(name: str) -> bool:
    """Whether a file name is listed by the walk: a feed or OPML suffix, or a reader store."""
    return name.lower().endswith(FEED_SUFFIXES) or name in READER_DBS


def entry_key(entry: dict[str, Any], feed_ident: str) -> str:
    """An entry's lasting identity: its id, else its link, else a hash of what it shows. An
    id that is no URI (``"42"``) is only unique within its feed, so it is prefixed by the
    feed's identity."""
    ident = str(entry.get("id") or "").strip()
    if ident:
        return "id:" + (ident if ":" in ident else f"{feed_ident}#{ident}")
    link = str(entry.get("link") or "").strip()
    if link:
        return "link:" + link
    shown = [feed_ident, entry.get("title"), entry.get("date"), entry.get("content")]
    return "sha256:" + hashlib.sha256(json.dumps(shown, ensure_ascii=False)
                                      .encode("utf-8")).hexdigest()[:32]


def entry_hash(entry: dict[str, Any], feed_name: str) -> str:
    """What decides whether an entry changed: everything it shows, not where it sits."""
    shown = [entry.get(k) for k in ("title", "link", "date", "author", "tags", "content",
                                     "html", "truncated")]
    return hashlib.sha256(json.dumps([feed_name, *shown], ensure_ascii=False, default=str)
                          .encode("utf-8")).hexdigest()


class RssKind:
    """Feed files, folders of them, OPML lists and Newsboat stores."""

    kind = "rss"
    newest_by_date = True  # the backlog embeds recent entries first

    def __init__(self, docs: Documents | None = None, *, only: str | None = None,
                 max_entries: int = DEFAULT_MAX_ENTRIES,
                 max_feed_bytes: int = DEFAULT_MAX_FEED_BYTES,
                 html_to_text: Callable[[str], str] | None = None) -> None:
        self.docs = docs
        self.only = only  # one file of the root, when [rss] paths names a file
        self.max_entries = max_entries
        self.max_feed_bytes = max_feed_bytes
        self.html_to_text = html_to_text  # None: the conversion worker (bounded)

    # -- containers -----------------------------------------------------------------------------
    def walk(self, root: Path, *, should_stop: Callable[[], bool] | None = None,
             max_entries: int | None = None) -> WalkResult:
        walked = walk_vault(root, exclude=(), should_stop=should_stop, max_entries=max_entries,
                            accept=is_feed_name)
        if self.only is None:
            return walked
        return WalkResult([f for f in walked.files if f.path == self.only],
                          [s for s in walked.skipped if s[0] == self.only])

    def appendable(self, rel: str) -> bool:
        return False  # a feed adds at its top: saved again, it is read again

    @staticmethod
    def is_store(rel: str) -> bool:
        return posixpath.basename(rel) in READER_DBS

    def keeps_lost(self, rel: str, key: str) -> bool:
        """Whether an entry that left this container stays indexed: yes for a saved feed (a
        window on it), no for a reader's store (its history is the reader's to keep) nor for
        a skip record (the file reads now)."""
        return not self.is_store(rel) and not key.startswith("skip:")

    def entries(self, root: Path, rel: str, start: int) -> Iterator[Entry]:
        if self.is_store(rel):
            yield from self._store_entries(root, rel)
            return
        data = read_bytes(root, rel, self.max_feed_bytes)
        parsed = self.parse(data) if isinstance(data, bytes) else data
        if isinstance(parsed, Skip):
            yield _skipped(rel, "", parsed)
            return
        yield from self._feed_entries(root, rel, parsed)

    def parse(self, data: bytes) -> dict[str, Any] | Skip:
        """The feed's parse: in the conversion worker (bounded) when there is one, else here
        (tests, tools)."""
        converter = self.docs.store.converter if self.docs is not None else None
        if converter is not None:
            answer = converter.convert(feed_format(self.max_entries), data)
            if isinstance(answer, Skip):
                return answer
            meta = answer.get("metadata") or {}
            return meta if isinstance(meta, dict) else Skip("parse_error", "no entries")
        try:
            return parse_feed(data, max_entries=self.max_entries)
        except ConvertSkip as skip:
            return Skip(skip.code, skip.detail)

    def _feed_entries(self, root: Path, rel: str, parsed: dict[str, Any]) -> Iterator[Entry]:
        feed = parsed.get("feed") or {}
        feed_name = str(feed.get("title") or "") or posixpath.basename(rel)
        ident = str(feed.get("id") or feed.get("link") or "") or f"file:{rel}"
        warnings = ("feed_malformed",) if feed.get("malformed") else ()
        location = self.location_metadata(root, "", rel, "")
        used: set[str] = set()
        for n, entry in enumerate(parsed.get("entries") or ()):
            key = entry_key(entry, ident)
            digest = entry_hash(entry, feed_name)
            if key in used:  # the same id twice in one feed: both are kept, apart
                key = f"{key}#{digest[:16]}"
                if key in used:
                    key = f"{key}#{n}"
            used.add(key)
            yield Entry(key, "", digest, 0,
                        _bind(self.document, entry, feed, feed_name, location, warnings),
                        location)
        total = int(parsed.get("total") or 0)
        kept = len(parsed.get("entries") or ())
        if total > kept:
            yield _skipped(rel, "more", Skip(ENTRY_SKIP, (
                f"the feed holds {total:,} entries; the first {kept:,} are indexed "
                "([rss] max_entries)")))

    def _store_entries(self, root: Path, rel: str) -> Iterator[Entry]:
        found = read_articles(str(root), rel)
        if isinstance(found, Skip):
            yield _skipped(rel, "", found)
            return
        location = self.location_metadata(root, "", rel, "")
        for art in found:
            ident = art.feed_url or f"file:{rel}"
            key = entry_key({"id": art.guid, "link": art.link, "title": art.title,
                             "date": art.date, "content": str(art.rowid)}, ident)
            yield Entry(key, str(art.rowid), art.content_hash, 0,
                        _bind(self._article, root, rel, art, location), location)

    def _article(self, root: Path, rel: str, art: Article,
                 location: dict[str, Any]) -> Document | Skip:
        content = read_content(str(root), rel, art.rowid)
        if isinstance(content, Skip):
            return content
        entry = {"id": art.guid, "link": art.link, "title": art.title, "date": art.date,
                 "author": art.author, "tags": [], "content": content, "html": art.html,
                 "truncated": art.truncated}
        feed = {"title": art.feed_name, "link": art.feed_url}
        return self.document(entry, feed, art.feed_name, location, ())

    def location_metadata(self, root: Path, key: str, container: str,
                          locator: str) -> dict[str, Any]:
        """Where an entry is read from: its feed file (or store) and that file's folder."""
        return {"feed_file": container, "folder": posixpath.dirname(container)}

    # -- documents ------------------------------------------------------------------------------
    def document(self, entry: dict[str, Any], feed: dict[str, Any], feed_name: str,
                 location: dict[str, Any], warnings: tuple[str, ...]) -> Document:
        """An entry as the pipeline chunks it: the feed and date on a first line, then its
        text (HTML through the conversion worker), at most ``MAX_ENTRY_CHARS``."""
        notes = list(warnings)
        content = str(entry.get("content") or "")
        if entry.get("html"):
            content = self._html(content, notes)
        text, was_cut = cut(plain_text_body(content.strip()), MAX_ENTRY_CHARS)
        if was_cut or entry.get("truncated"):
            notes.append(TRUNCATED)
        date = str(entry.get("date") or "")
        author = str(entry.get("author") or "")
        head = " · ".join(p for p in (feed_name, date[:10], author) if p)
        link = str(entry.get("link") or "")
        tags = [str(t).strip().lower() for t in entry.get("tags") or () if str(t).strip()]
        metadata: dict[str, Any] = {
            **location, "feed_name": feed_name, "url": link or None, "date": date or None,
            "author": author or None, "tags": list(dict.fromkeys(tags)),
            "feed_url": str(feed.get("link") or "") or None, "entry_id": entry.get("id") or None,
            "source_uri": link or None}
        if entry.get("opml"):
            metadata["subscription"] = True
        title = str(entry.get("title") or "").strip() or (text[:80].strip() or "(untitled)")
        # A subscription an OPML list records is no entry: its own type keeps it out of
        # source_type="rss" searches and date filters.
        return Document(title=title, text="\n\n".join(p for p in (head, text) if p),
                        source_type="opml" if entry.get("opml") else "rss", metadata=metadata,
                        date=date[:10] if date else None,
                        warnings=tuple(dict.fromkeys(notes)))

    def _html(self, html: str, warnings: list[str]) -> str:
        if self.html_to_text is not None:
            return self.html_to_text(html)
        converter = self.docs.store.converter if self.docs is not None else None
        return html_text(html, converter, warnings=warnings, stripped="entry_html_stripped")


def _bind(fn: Callable[..., Document | Skip], *args: Any) -> Callable[[], Document | Skip]:
    return lambda: fn(*args)


def _skipped(rel: str, locator: str, skip: Skip) -> Entry:
    key = f"skip:{rel}" + (f"#{locator}" if locator else "")
    return Entry(key, locator, "", 0, lambda: skip)

