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
