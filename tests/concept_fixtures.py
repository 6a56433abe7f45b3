"""Long generated documents on three topics, for the concept tests (decision 0033)."""

from __future__ import annotations

import random
from pathlib import Path

TOPICS = {
    "astronomy": ["telescope mirror", "neutron star", "spectral line", "dark matter",
                  "orbital period", "red giant", "galaxy cluster", "light curve"],
    "baking": ["sourdough starter", "bread flour", "proofing basket", "oven spring",
               "gluten network", "wild yeast", "crumb structure", "baking stone"],
    "sailing": ["mainsail trim", "jib sheet", "apparent wind", "keel boat", "tacking angle",
                "storm jib", "boat hull", "wind shift"],
}
FRAMES = [
    "The {a} matters because the {b} changes how every observer reads the result.",
    "Careful notes on the {a} show that the {b} is rarely what beginners expect.",
    "When the {a} is measured twice, the {b} explains most of the difference.",
    "A practical guide to the {a} starts with the {b} and the habits around it.",
    "Experts argue that the {a} and the {b} belong together in any serious study.",
]


def topic_text(topic: str, seed: int, sentences: int = 90) -> str:
    """Paragraphs of sentences built from one topic's phrases (about 9,000 characters)."""
    rng = random.Random(seed)
    words = TOPICS[topic]
    out = [f"# {topic.title()} notes {seed}", ""]
    for i in range(sentences):
        a, b = rng.sample(words, 2)
        out.append(rng.choice(FRAMES).format(a=a, b=b))
        if i % 6 == 5:
            out.append("")
    return "\n".join(out) + "\n"


def write_library(folder: Path, per_topic: int = 2) -> dict[str, Path]:
    """``per_topic`` long notes per topic; name -> path."""
    folder.mkdir(parents=True, exist_ok=True)
    made = {}
    for n, topic in enumerate(TOPICS):
        for k in range(per_topic):
            path = folder / f"{topic}-{k}.md"
            path.write_text(topic_text(topic, 10 * n + k), encoding="utf-8")
            made[path.stem] = path
    return made



ADJECTIVES = [
    "amber", "brisk", "coastal", "dusty", "eastern", "frozen", "gilded", "hollow", "iron",
    "jagged", "lunar", "misty", "northern", "olive", "painted", "quiet", "rusty", "silent",
    "tidal", "upper", "velvet", "winding", "yellow", "ancient", "bitter", "copper",
    "distant", "empty", "feral", "granite", "hidden", "idle",
]
NOUNS = [
    "lantern", "harbour", "orchard", "quarry", "beacon", "cellar", "meadow", "foundry",
    "glacier", "lighthouse", "monastery", "observatory", "pavilion", "reservoir", "sawmill",
    "tannery", "vineyard", "windmill", "archive", "bridge", "canal", "dockyard", "estate",
    "ferry", "garrison", "hamlet", "isthmus", "junction",
]


def book_text(seed: int, chars: int = 8_000) -> str:
    """A generated book's text: chapters of framed sentences over a vocabulary of its own
    (adjective-noun phrases drawn for this seed), so that its analysis embeds new phrases as a
    real book's would. Plain words: cheap to embed for their length."""
    rng = random.Random(seed)
    phrases = list({f"{rng.choice(ADJECTIVES)} {rng.choice(NOUNS)}" for _ in range(40)})
    out: list[str] = []
    size, chapter = 0, 0
    while size < chars:
        if size >= chapter * chars / 3:
            chapter += 1
            out.append(f"\n## Chapter {chapter}: the {rng.choice(phrases)}\n")
        a, b = rng.sample(phrases, 2)
        line = rng.choice(FRAMES).format(a=a, b=b)
        out.append(line)
        size += len(line) + 1
    return "\n".join(out) + "\n"


def write_epub(path: Path, title: str, text: str) -> Path:
    """A minimal EPUB 3 (its chapters from the text's ``## `` headings): a book by format."""
    import zipfile
    from html import escape

    chapters = [c for c in text.split("\n## ") if c.strip()]
    body = []
    for n, chapter in enumerate(chapters, 1):
        head, _, rest = chapter.strip().lstrip("# ").partition("\n")
        paras = "".join(f"<p>{escape(p)}</p>" for p in rest.split("\n") if p.strip())
        body.append((f"c{n}.xhtml", head, f'<?xml version="1.0" encoding="utf-8"?>\n'
                     f'<html xmlns="http://www.w3.org/1999/xhtml"><head><title>{escape(head)}'
                     f"</title></head><body><h1>{escape(head)}</h1>{paras}</body></html>"))
    items = "".join(f'<item id="c{n}" href="{f}" media-type="application/xhtml+xml"/>'
                    for n, (f, _, _) in enumerate(body, 1))
    spine = "".join(f'<itemref idref="c{n}"/>' for n in range(1, len(body) + 1))
    links = "".join(f'<li><a href="{f}">{escape(h)}</a></li>' for f, h, _ in body)
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        z.writestr("META-INF/container.xml",
                   '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:'
                   'opendocument:xmlns:container"><rootfiles><rootfile full-path="content.opf"'
                   ' media-type="application/oebps-package+xml"/></rootfiles></container>')
        z.writestr("content.opf",
                   '<?xml version="1.0" encoding="utf-8"?><package xmlns="http://www.idpf.org/'
                   '2007/opf" version="3.0" unique-identifier="id"><metadata xmlns:dc="http://'
                   f'purl.org/dc/elements/1.1/"><dc:identifier id="id">{escape(title)}'
                   f"</dc:identifier><dc:title>{escape(title)}</dc:title><dc:language>en"
                   '</dc:language></metadata><manifest><item id="nav" href="nav.xhtml" '
                   f'media-type="application/xhtml+xml" properties="nav"/>{items}</manifest>'
                   f"<spine>{spine}</spine></package>")
        z.writestr("nav.xhtml",
                   '<?xml version="1.0" encoding="utf-8"?><html xmlns="http://www.w3.org/1999/'
                   'xhtml" xmlns:epub="http://www.idpf.org/2007/ops"><head><title>Contents'
                   '</title></head><body><nav epub:type="toc"><ol>' + links + "</ol></nav>"
                   "</body></html>")
        for f, _, xhtml in body:
            z.writestr(f, xhtml)
    return path
