"""A small generated vault with distinct topics, for tests that use the real model."""

from __future__ import annotations

from pathlib import Path

NOTES: dict[str, str] = {
    "Baking/Levain care.md": """---
tags: [kitchen, bread/levain]
aliases: [Leaven]
date: 2024-03-02
---
# Levain care

Feed the levain every day with equal weights of flour and water. Discard half before each
feeding so the culture stays lively, and store the jar somewhere warm.
""",
    "Astronomy/Observing Jupiter.md": """---
tags: [astronomy]
date: 2023-07-15
---
# Observing Jupiter

Through a small telescope the giant planet shows cloud belts and its four large moons.
Io, Europa, Ganymede and Callisto change position from night to night.
""",
    "Cycling/Chain maintenance.md": """# Chain maintenance

Clean the chain with degreaser, dry it, then apply lubricant to each link and wipe off the
excess. A worn chain wears out cassette cogs, so measure its stretch every few months.
""",
    "Finance/Budget 2024.md": """---
tags: [money]
---
# Budget 2024

Rent, groceries and the train pass are the fixed costs. Put a fifth of each salary into the
savings account on payday, before anything else is spent.
""",
    "Garden/Tomatoes.md": """# Tomatoes

Pinch out side shoots on cordon varieties and water at the base in the morning.
Feed with potash once the first truss sets fruit. #garden/vegetables
""",
    "Music/Practice routine.md": """# Practice routine

Start with ten minutes of scales, then slow work on the hardest bars of the piece with a
metronome, raising the tempo only when a passage is clean three times in a row.
""",
    "Projects/Xylofrabic protocol.md": """# Xylofrabic protocol

The xylofrabic handshake is an invented word that appears in exactly one note, so a keyword
search for it has a single right answer.
""",
    "Travel/Packing list.md": """# Packing list

Passport, charger, a light rain jacket and comfortable walking shoes. Roll clothes instead
of folding them to save space in a carry-on bag.
""",
}


def write_vault(root: Path, notes: dict[str, str] | None = None) -> Path:
    for rel, text in (notes or NOTES).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (root / ".obsidian").mkdir(exist_ok=True)
    (root / ".obsidian" / "app.json").write_text("{}", encoding="utf-8")
    return root


def write_plain_notes(root: Path, files: int) -> None:
    """``files`` notes of distinct text, two chunks each: bulk work for a daemon to read and
    embed (a project folder)."""
    words = ("river", "stone", "lantern", "orbit", "copper", "meadow", "signal", "harbor",
             "cinder", "velvet", "quarry", "thistle", "ember", "glacier", "saddle", "prism")
    root.mkdir(parents=True)
    for n in range(files):
        body = "\n\n".join(" ".join(words[(n * 7 + i * 3 + k) % len(words)] + str(n % 13)
                                    for k in range(150)) for i in range(2))
        (root / f"doc {n:04}.md").write_text(f"# Document {n}\n\n{body}\n", encoding="utf-8")
