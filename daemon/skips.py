"""Stable codes for files that were skipped, or indexed with a warning.

The codes are part of the user-facing surface (CLI summary, status, tray): never rename one.
"""

from __future__ import annotations

# code -> what the user should know / do
SKIP_CODES: dict[str, str] = {
    "too_large": "file is larger than max_file_mb; raise the limit in config.toml to index it",
    "binary": "file looks binary (contains NUL bytes) although its name says text",
    "empty": "file is empty: nothing to index",
    "unreadable": "file could not be read (permissions or I/O error)",
    "symlink_loop": "symbolic link loop: the link points back at itself",
    "broken_link": "symbolic link whose target does not exist",
    "not_regular": "not a regular file (a pipe, socket or device)",
    "parse_error": "the file could not be parsed",
    "vanished": "file disappeared while it was being indexed",
    "not_mail": "a file in a mail folder that is neither an mbox nor a mail message",
    "outside_root": "symbolic link to a file or folder outside the collection's folder: "
    "ragd never reads outside it (move the target inside, or index its folder on its own)",
    "encrypted": "the document is password-protected or DRM-encrypted: ragd cannot read it "
    "(save an unprotected copy to index it)",
    "no_text": "the document holds no text to index (a scan without a text layer? an image "
    "is read only with Tesseract OCR installed)",
    "convert_timeout": "converting the document took longer than the conversion time limit "
    "(120 s) and was stopped; it is tried again after 6 hours, or when ragd restarts",
    "convert_memory": "converting the document needed more memory than the converter's limit "
    "(2 GB) and was stopped; it is tried again after 6 hours, or when ragd restarts",
    "convert_crashed": "the converter process crashed on this document (a damaged or hostile "
    "file); ragd itself kept running. It is tried again after 6 hours, or when ragd restarts",
    "ocr_unavailable": "reading text from an image needs Tesseract OCR (e.g. apt install "
    "tesseract-ocr), which is not installed; the image is read once it is",
    "message_too_large": "a mail message larger than 25 MB with its attachments: not indexed "
    "(the parser would need several times that in memory; mail services refuse such "
    "messages anyway)",
    "ebook_convert_missing": "reading a MOBI, AZW or AZW3 book needs Calibre's ebook-convert "
    "(e.g. apt install calibre, or calibre-ebook.com; on macOS put calibre.app/Contents/MacOS "
    "on the PATH), which is not installed; the book is read once it is",
    # Feeds (decision 0029)
    "not_a_feed": "a file among the feeds that is no RSS, Atom, JSON Feed or OPML document "
    "(an HTML page saved under a feed's name?)",
    "feed_empty": "the feed or OPML list holds no entries",
    "feed_entities": "an OPML file that declares XML entities (an entity bomb or an external "
    "entity): not read",
    "too_many_entries": "the feed holds more entries than [rss] max_entries: the first ones "
    "are indexed, the rest is not",
    "reader_unreadable": "a feed reader's store that is not the reader's database (or is "
    "damaged): not read",
}

# Code groups (decision 0030).
SKIP_CODES.update({
    "vendored": "a folder of third-party or built code (node_modules, vendor, ...; "
    "code.vendored lists the names): its files are not indexed",
    "generated": "a generated source file (its name, or a 'generated, do not edit' mark)",
    "minified": "a minified source file (very long lines): nothing a person would search",
    "submodule": "a git submodule: index its repository on its own (add it to the group)",
    "git_unreadable": "git could not read the repository (a corrupt .git?): its files are "
    "indexed as a plain folder, its history is not",
})

# Extraction outside the daemon (decision 0041): an item past its worker's deadline or
# memory, or whose worker died, is not read again until it changes.
SKIP_CODES.update({
    "extract_timeout": "reading this item took longer than the extraction time limit "
    "(extract.timeout_s) and its worker was stopped; it is read again when the file changes",
    "extract_memory": "reading this item needed more memory than the extraction worker's "
    "limit (extract.memory_mb) and its worker was stopped; it is read again when the file "
    "changes",
    "extract_crashed": "the worker reading this item died (a damaged or hostile file); ragd "
    "itself kept running. It is read again when the file changes",
    "git_outside": "a repository whose .git file points at a git folder outside the code "
    "group's repositories: its history and files are not read (decision 0042)",
})

# Problems that did not stop a file from being indexed.
WARNING_CODES: dict[str, str] = {
    "commit_files_truncated": "a commit touching more files than code.max_commit_files: "
    "the first ones are indexed",
    "bad_frontmatter": "frontmatter is not valid YAML: indexed the text without its metadata",
    "invalid_utf8": "file is not valid UTF-8: it was read as Windows-1252 (or Latin-1)",
    "frontmatter_too_large": "frontmatter is too large or too complex (YAML merges) to read "
    "safely: indexed the text without its metadata",
    "mime_defects": "a mail whose MIME structure is broken: what could be read is indexed",
    "bad_header": "a mail header that could not be decoded: its raw text is used",
    "unknown_charset": "a mail part in an unknown or wrong charset, or in one ragd does not "
    "decode (punycode, idna: no mail charsets, and slow to decode): read as UTF-8 or "
    "Windows-1252",
    "charset_mismatch": "a mail part declares UTF-16 or UTF-32 but holds plain ASCII text: "
    "read as ASCII, not as the charset it names",
    "header_truncated": "a mail header longer than 16,384 characters: the rest of it is not "
    "read",
    "mime_truncated": "a mail with more than 500 MIME parts: the parts after those are not read",
    "metadata_truncated": "the note has more tags, aliases, links or properties than ragd "
    "keeps: the first ones are kept",
    "text_truncated": "the document converts to more text than a file of its size may "
    "produce (20 characters per byte, 8 million at most): it is indexed up to the cut",
    "body_truncated": "a mail body longer than 2 million characters: the rest is not indexed",
    "html_body_stripped": "an HTML mail body too complex for the HTML converter (more than "
    "200,000 tags, or past its time or memory limit): read with its tags stripped instead",
    "attachment_truncated": "a mail's body and attachments give more than 2 million "
    "characters together: the attachments are indexed up to the cut",
    "attachment_time_budget": "converting a mail's attachments took longer than the "
    "conversion time limit (documents.timeout_s, 120 s) all together: the remaining "
    "attachments are not indexed (the message is)",
    "attachment_too_large": "a mail attachment larger than documents.max_file_mb: not "
    "converted (the message is indexed)",
    "mbox_unquoted_from": "a line starting with 'From ' inside an mbox message was not quoted "
    "('>From ') and does not open another message (no date, or no header after it): it is "
    "kept in this message",
    "description_truncated": "a Calibre book's description is longer than ragd keeps "
    "(100,000 characters): the rest is not indexed",
    "description_stripped": "a Calibre book's HTML description too complex for the HTML "
    "converter: read with its tags stripped instead",
    "feed_malformed": "the feed is not well-formed XML: what the feed parser could read is "
    "indexed",
    "entry_truncated": "a feed entry's text is longer than ragd keeps (200,000 characters, "
    "from at most 1 million of its HTML): the rest is not indexed",
    "entry_html_stripped": "a feed entry's HTML too complex for the HTML converter: read with "
    "its tags stripped instead",
    "calibre_no_readable_format": "none of the book's formats can be read (install Calibre's "
    "ebook-convert for ODT, RTF, FB2, MOBI, ...): the book is found by its metadata and "
    "description only",
}


# A warning about one part of a source: a mail's attachment, a Calibre book's file.
_PARTS = {"attachment_": "a mail attachment was not indexed: ",
          "text_": "the book's text was not indexed (its metadata is): "}


def describe(code: str) -> str:
    """Return the explanation of a skip or warning code."""
    found = SKIP_CODES.get(code) or WARNING_CODES.get(code)
    if found:
        return found
    for prefix, what in _PARTS.items():
        rest = code.removeprefix(prefix)
        if rest != code and (rest in SKIP_CODES or rest in WARNING_CODES):
            return what + describe(rest)
    return code
