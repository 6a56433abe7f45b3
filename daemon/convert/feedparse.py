"""Feed bytes -> entries: RSS 0.9x/1.0/2.0 and Atom (feedparser), JSON Feed, OPML lists.

Runs in the conversion worker (format ``feed:<max entries>``, decision 0029): a feed is
untrusted structure, so its parse is bounded by the worker's time and memory limits and never
loads the library into the daemon. The daemon (``ragd.daemon.sources.rss``) sends the file's bytes
and receives the entries as data; the HTML of the entries it indexes goes back to the worker
as ``mail_html`` later, only for the entries that are new or changed.

feedparser is given bytes, never a string: a string may be taken as a URL or a path and
fetched. It drops a document's DOCTYPE before parsing (an entity bomb or an external entity
is never expanded: tests prove both). OPML is read with defusedxml, which refuses entity
declarations outright. Nothing here opens a file or the network.
"""

from __future__ import annotations

import calendar
import datetime as dt
import email.utils
import json
import re
from typing import Any

from ragd.daemon.convert.converted import Converted, ConvertSkip

FEED_FORMAT = "feed"  # the worker's format: "feed:<max entries>"
DEFAULT_MAX_ENTRIES = 10_000
MAX_CONTENT_CHARS = 1_000_000  # of one entry's HTML or text; a long post is ~50,000
TRUNCATED = "entry_truncated"
_SNIFF = 4096
_OPML = re.compile(rb"<opml[\s>]", re.I)
_DOCTYPE = re.compile(rb"<!DOCTYPE[^\[>]{0,1024}\[", re.I)
_SUBSET_END = re.compile(rb"\]\s{0,1024}>")
_PROLOG = 1 << 20
_ENTRY = re.compile(rb"<(?:item|entry)[\s>]")  # where a DOCTYPE may start
_JSON_FEED = re.compile(r"^https?://jsonfeed\.org/version/", re.I)


def feed_format(max_entries: int) -> str:
    """The worker's format name for a feed read up to ``max_entries`` entries."""
    return f"{FEED_FORMAT}:{max(1, int(max_entries))}"


def feed_converter(fmt: str) -> Any:
    """The worker's converter for ``feed:<n>`` (None for any other format)."""
    name, _, n = fmt.partition(":")
    if name != FEED_FORMAT:
        return None
    limit = int(n) if n.isdigit() else DEFAULT_MAX_ENTRIES
    return lambda data: convert_feed(data, max_entries=limit)


def convert_feed(data: bytes, *, max_entries: int = DEFAULT_MAX_ENTRIES) -> Converted:
    """The worker's answer: the feed's title, a one-line listing as markdown (the worker
    needs text), and the parse in ``metadata`` (``feed``, ``entries``, ``total``)."""
    parsed = parse_feed(data, max_entries=max_entries)
    feed = parsed["feed"]
    listing = f"{feed.get('title') or 'feed'}: {parsed['total']} entries"
    return Converted(str(feed.get("title") or ""), listing, parsed)


def parse_feed(data: bytes, *, max_entries: int = DEFAULT_MAX_ENTRIES) -> dict[str, Any]:
    """``{"feed": {...}, "entries": [...], "total": n}`` for the bytes of a feed file.

    An entry is a dict of ``id``, ``link``, ``title``, ``date`` (ISO 8601 in UTC, published
    else updated, "" if none), ``author``, ``tags``, ``content``, ``html`` (whether
    ``content`` is HTML) and ``truncated``; an OPML subscription has ``opml`` true. At most
    ``max_entries`` entries are returned; ``total`` counts them all. Raises ``ConvertSkip``
    (``not_a_feed``, ``feed_empty``, ``feed_entities``) for what is no feed.
    """
    head = data[:_SNIFF].lstrip(b"\xef\xbb\xbf \t\r\n")
    if head.startswith(b"{"):
        return _json_feed(data, max_entries)
    if _OPML.search(head):
        return _opml(data, max_entries)
    return _xml_feed(data, max_entries)


# -- RSS, RDF and Atom -------------------------------------------------------------------------
def _xml_feed(data: bytes, max_entries: int) -> dict[str, Any]:
    import feedparser

    data, counted = first_entries(without_entities(data), max_entries)
    # Bytes, never a string: a string may be fetched as a URL or opened as a path.
    parsed = feedparser.parse(data, sanitize_html=False, resolve_relative_uris=False)
    entries = parsed.entries
    if not parsed.version and not entries:
        what = "HTML page" if re.search(rb"<html[\s>]", data[:_SNIFF], re.I) else "file"
        raise ConvertSkip("not_a_feed", f"a {what} that is no RSS, Atom, JSON Feed or OPML "
                          "document" + _bozo(parsed))
    if not entries:
        raise ConvertSkip("feed_empty", "the feed holds no entries")
    f = parsed.feed
    feed = {"title": _text(f.get("title")), "link": str(f.get("link") or ""),
            "id": str(f.get("id") or ""), "version": str(parsed.version or ""),
            "malformed": bool(parsed.bozo) and not _encoding_only(parsed)}
    out = [_xml_entry(e) for e in entries[:max_entries]]
    return {"feed": feed, "entries": out, "total": max(len(entries), counted)}


def first_entries(data: bytes, max_entries: int) -> tuple[bytes, int]:
    """``data`` cut before its entry number ``max_entries + 1``, closed as its root needs, and
    the number of entry tags it holds: feedparser takes ~0.5 ms an entry on these machines,
    so 100,000 entries cost a minute of the worker's time limit for entries never kept. The
    count of ``<item``/``<entry`` tags is what the skip record reports."""
    starts = _ENTRY.finditer(data)
    count = 0
    cut = -1
    for m in starts:
        count += 1
        if count == max_entries + 1:
            cut = m.start()
    if cut < 0:
        return data, count
    head = data[:_SNIFF * 4]
    close = (b"</rdf:RDF>" if b"<rdf:RDF" in head else
             b"</feed>" if re.search(rb"<feed[\s>]", head) else b"</channel></rss>")
    return data[:cut] + close, count


def _xml_entry(e: Any) -> dict[str, Any]:
    content, html = "", False
    for part in e.get("content") or ():
        value = str(part.get("value") or "")
        if len(value) > len(content):
            content, html = value, "html" in str(part.get("type") or "")
    summary = str(e.get("summary") or "")
    if len(summary) > len(content):  # RSS description; Atom summary when there is no content
        detail = e.get("summary_detail") or {}
        content, html = summary, "html" in str(detail.get("type") or "text/html")
    when = e.get("published_parsed") or e.get("updated_parsed")
    date = ""
    if when:
        date = dt.datetime.fromtimestamp(calendar.timegm(when), tz=dt.UTC).isoformat()
    tags = [str(t.get("term") or t.get("label") or "").strip() for t in e.get("tags") or ()]
    content, cut = _bounded(content)
    return {"id": str(e.get("id") or ""), "link": str(e.get("link") or ""),
            "title": _text(e.get("title")), "date": date,
            "author": _text(e.get("author")), "tags": [t for t in tags if t][:50],
            "content": content, "html": html, "truncated": cut}


def without_entities(data: bytes) -> bytes:
    """``data`` with its DOCTYPE's internal subset removed: a feed has no business declaring
    entities, and expat expands a billion-laughs bomb up to its own limit (8 MiB, then 100
    times the input) before it refuses it, which cost 1.4 s for a 1 KB bomb. An external DTD
    is never fetched; an entity left undefined is read as text by feedparser's loose parser."""
    m = _DOCTYPE.search(data, 0, _PROLOG)
    if m is None:
        return bytes(data)
    end = _SUBSET_END.search(data, m.end())
    if end is None:
        return bytes(data)
    return data[:m.end() - 1] + b">" + data[end.end():]


def _bozo(parsed: Any) -> str:
    exc = parsed.get("bozo_exception")
    return f" ({str(exc)[:160]})" if exc else ""


def _encoding_only(parsed: Any) -> bool:
    """A bozo that is only a charset declared wrongly (the text was still read)."""
    import feedparser

    exc = parsed.get("bozo_exception")
    return isinstance(exc, feedparser.CharacterEncodingOverride)


# -- JSON Feed (jsonfeed.org 1.0 and 1.1) ------------------------------------------------------
def _json_feed(data: bytes, max_entries: int) -> dict[str, Any]:
    try:
        doc = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ConvertSkip("not_a_feed", f"not JSON: {str(exc)[:160]}") from None
    if not isinstance(doc, dict) or not _JSON_FEED.match(str(doc.get("version") or "")) \
            or not isinstance(doc.get("items"), list):
        raise ConvertSkip("not_a_feed", "a JSON file that is no JSON Feed (no jsonfeed.org "
                          "version and items)")
    items = [i for i in doc["items"] if isinstance(i, dict)]
    if not items:
        raise ConvertSkip("feed_empty", "the feed holds no entries")
    feed = {"title": _text(doc.get("title")), "link": str(doc.get("home_page_url") or ""),
            "id": str(doc.get("feed_url") or ""),
            "version": "json" + str(doc["version"]).rsplit("/", 1)[-1],
            "malformed": False}
    authors = _json_authors(doc)
    return {"feed": feed, "entries": [_json_item(i, authors) for i in items[:max_entries]],
            "total": len(items)}


def _json_authors(obj: dict[str, Any]) -> str:
    found = obj.get("authors")
    if not isinstance(found, list):
        found = [obj.get("author")] if isinstance(obj.get("author"), dict) else []
    return ", ".join(str(a.get("name")) for a in found if isinstance(a, dict) and a.get("name"))


def _json_item(item: dict[str, Any], feed_authors: str) -> dict[str, Any]:
    html = isinstance(item.get("content_html"), str) and bool(item["content_html"])
    content = str(item.get("content_html") if html else item.get("content_text")
                  or item.get("summary") or "")
    content, cut = _bounded(content)
    found = item.get("tags")
    tags: list[Any] = found if isinstance(found, list) else []
    return {"id": str(item.get("id") or ""),
            "link": str(item.get("url") or item.get("external_url") or ""),
            "title": _text(item.get("title")),
            "date": _iso(item.get("date_published") or item.get("date_modified")),
            "author": _json_authors(item) or feed_authors,
            "tags": [str(t) for t in tags if isinstance(t, str | int)][:50],
            "content": content, "html": html, "truncated": cut}


def _iso(value: Any) -> str:
    """An RFC 3339 date as ISO 8601 in UTC ("" when there is none or it is unreadable)."""
    if not isinstance(value, str) or not value.strip():
        return ""
    try:
        when = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        try:  # RFC 822, as some JSON Feeds write it
            when = email.utils.parsedate_to_datetime(value.strip())
        except (TypeError, ValueError, IndexError):
            return ""
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.astimezone(dt.UTC).isoformat()


# -- OPML subscription lists -------------------------------------------------------------------
def _opml(data: bytes, max_entries: int) -> dict[str, Any]:
    """Each subscription (an outline with ``xmlUrl``) is recorded as an entry: nothing it
    lists is fetched (there is no network)."""
    from defusedxml import DefusedXmlException
    from defusedxml.ElementTree import ParseError, fromstring

    try:
        root = fromstring(data, forbid_dtd=False, forbid_entities=True, forbid_external=True)
    except DefusedXmlException as exc:
        raise ConvertSkip("feed_entities", f"the OPML file declares XML entities "
                          f"({type(exc).__name__}): not read") from None
    except ParseError as exc:
        raise ConvertSkip("not_a_feed", f"not a readable OPML file: {exc}") from None
    title = _text(root.findtext("head/title"))
    subs: list[dict[str, Any]] = []
    total = 0

    def walk(node: Any, path: tuple[str, ...]) -> None:
        nonlocal total
        for child in node.findall("outline"):
            name = _text(child.get("title") or child.get("text"))
            url = str(child.get("xmlUrl") or "")
            if url:
                total += 1
                if len(subs) < max_entries:
                    subs.append(_subscription(child, name, url, path))
            walk(child, (*path, name) if not url and name else path)

    body = root.find("body")
    if body is not None:
        walk(body, ())
    if not subs:
        raise ConvertSkip("feed_empty", "the OPML file lists no feeds")
    feed = {"title": title or "Subscriptions", "link": "", "id": "", "version": "opml",
            "malformed": False}
    return {"feed": feed, "entries": subs, "total": total}


def _subscription(node: Any, name: str, url: str, path: tuple[str, ...]) -> dict[str, Any]:
    site = str(node.get("htmlUrl") or "")
    lines = [f"Subscribed feed: {name or url}", f"Feed address: {url}"]
    if site:
        lines.append(f"Site: {site}")
    if path:
        lines.append("Folder: " + " / ".join(path))
    if node.get("description"):
        lines.append(_text(node.get("description")))
    return {"id": url, "link": site or url, "title": name or url, "date": "",
            "author": "", "tags": [p for p in path if p][:50], "content": "\n".join(lines),
            "html": False, "truncated": False, "opml": True}


# -- shared ------------------------------------------------------------------------------------
def _text(value: Any) -> str:
    return " ".join(str(value or "").split())[:2000]


def _bounded(content: str) -> tuple[str, bool]:
    if len(content) <= MAX_CONTENT_CHARS:
        return content, False
    return content[:MAX_CONTENT_CHARS], True
