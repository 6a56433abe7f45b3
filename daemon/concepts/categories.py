"""Categories: documents clustered by their embeddings, named by their most distinctive
concepts, with ids that survive re-clustering (decision 0033). Pure functions over numpy."""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

from ragd.daemon.stores.concepts import Category  # the store's row: stores sit below concepts

MAX_CATEGORIES = 40
KEEP_ID_JACCARD = 0.34  # a new cluster sharing this much with an old one keeps its id
SPLIT_MIN_DOCS = 6  # a category this large is split into narrower ones ...
SPLIT_MIN_SILHOUETTE = 0.05  # ... when its documents fall apart at least this clearly


def silhouette(vectors: np.ndarray, labels: Sequence[int]) -> float:
    """Mean silhouette (cosine distance) of a clustering: how well each document sits in
    its cluster rather than the next one."""
    lab = np.asarray(labels)
    dist = 1 - vectors @ vectors.T
    out = []
    for i in range(len(lab)):
        same = lab == lab[i]
        if same.sum() < 2:
            out.append(0.0)
            continue
        a = dist[i, same].sum() / (same.sum() - 1)
        b = min(dist[i, lab == c].mean() for c in set(lab.tolist()) if c != lab[i])
        out.append((b - a) / max(a, b, 1e-9))
    return float(np.mean(out))


def choose(vectors: np.ndarray) -> list[int]:
    """Cluster with the number of clusters of the best silhouette (2 .. 3 sqrt(n), at most
    MAX_CATEGORIES); fewer than 3 documents make one category."""
    return best_split(vectors)[0]


def best_split(vectors: np.ndarray) -> tuple[list[int], float]:
    """(labels, silhouette) of :func:`choose` (silhouette -1 when nothing was split)."""
    n = len(vectors)
    if n < 3:
        return [0] * n, -1.0
    if n > 3000:  # silhouette is quadratic: past this, the rule of thumb
        return cluster(vectors, max(2, min(MAX_CATEGORIES, round(math.sqrt(n / 2))))), 0.0
    best, best_s = [0] * n, -1.0
    for k in range(2, min(n - 1, MAX_CATEGORIES, int(3 * math.sqrt(n))) + 1):
        labels = cluster(vectors, k)
        if len(set(labels)) < 2:
            continue
        s = silhouette(vectors, labels)
        if s > best_s + 1e-6:
            best, best_s = labels, s
    return best, best_s


def centred(vectors: np.ndarray) -> np.ndarray:
    """The vectors less their mean, normalised: what all the documents share (the language,
    the register of prose) would otherwise outweigh what sets them apart."""
    if len(vectors) < 3:
        return vectors
    out = vectors - vectors.mean(axis=0)
    return (out / np.linalg.norm(out, axis=1, keepdims=True).clip(1e-9)).astype(np.float32)


def hierarchy(ids: Sequence[int], vectors: np.ndarray,
              doc_concepts: Mapping[str, Sequence[str]], old: Sequence[Category],
              display: Mapping[str, str]) -> list[Category]:
    """Top categories (the clusters of :func:`choose` over the :func:`centred` vectors), and
    below each one of at least SPLIT_MIN_DOCS documents that falls apart clearly, narrower
    ones named by what sets them apart inside it. A document belongs to every category on
    its path."""
    members = [str(i) for i in ids]
    labels = choose(centred(vectors)) if len(ids) else []
    used: set[str] = set()
    tops = stable(name_clusters(labels, members, doc_concepts),
                  [c for c in old if c.parent is None], display, used)
    out = list(tops)
    row = {m: i for i, m in enumerate(members)}
    for top in tops:
        if len(top.members) < SPLIT_MIN_DOCS:
            continue
        sub, score = best_split(centred(vectors[[row[m] for m in top.members]]))
        if len(set(sub)) < 2 or score < SPLIT_MIN_SILHOUETTE:
            continue
        children = stable(name_clusters(sub, top.members, doc_concepts),
                          [c for c in old if c.parent is not None], display, used)
        for child in children:
            child.parent = top.id
        out += children
    return out


def cluster(vectors: np.ndarray, k: int, iterations: int = 30) -> list[int]:
    """Spherical k-means with a deterministic farthest-point start: the same input gives the
    same clusters, so categories do not shuffle between passes."""
    n = len(vectors)
    if n == 0 or k <= 1:
        return [0] * n
    k = min(k, n)
    centre = vectors.mean(axis=0)
    first = int(np.argmax(vectors @ centre))
    seeds = [first]
    dist = 1 - vectors @ vectors[first]
    for _ in range(1, k):
        nxt = int(np.argmax(dist))
        seeds.append(nxt)
        dist = np.minimum(dist, 1 - vectors @ vectors[nxt])
    cents = vectors[seeds].copy()
    labels = np.zeros(n, dtype=int)
    for _ in range(iterations):
        new = np.argmax(vectors @ cents.T, axis=1)
        if _ and np.array_equal(new, labels):
            break
        labels = new
        for c in range(k):
            members = vectors[labels == c]
            if len(members):
                m = members.sum(axis=0)
                cents[c] = m / (np.linalg.norm(m) or 1.0)
    return [int(x) for x in labels]


def name_clusters(labels: Sequence[int], members: Sequence[str],
                  doc_concepts: Mapping[str, Sequence[str]]) -> list[tuple[list[str], list[str]]]:
    """Per cluster: (members, distinctive concept keys). Distinctive: frequent in the
    cluster, rare outside it (share inside times log inverse share overall)."""
    n = len(members)
    overall: Counter[str] = Counter()
    for m in members:
        overall.update(set(doc_concepts.get(m, ())))
    out = []
    for c in sorted(set(labels)):
        mine = [members[i] for i in range(n) if labels[i] == c]
        inside: Counter[str] = Counter()
        rank_bonus: dict[str, float] = {}
        for m in mine:
            keys = list(doc_concepts.get(m, ()))
            inside.update(set(keys))
            for r, key in enumerate(keys[:40]):
                rank_bonus[key] = rank_bonus.get(key, 0.0) + 1.0 / (1 + r)
        scored = sorted(inside, key=lambda k: (-(inside[k] / len(mine))
                                               * math.log(1 + n / overall[k])
                                               * (1 + rank_bonus.get(k, 0.0)), k))
        out.append((mine, scored[:12]))
    return out


def stable(groups: Sequence[tuple[list[str], list[str]]], old: Sequence[Category],
           display: Mapping[str, str], used_names: set[str] | None = None) -> list[Category]:
    """Categories with ids carried over from ``old`` by member overlap (greedy, best first);
    a renamed category keeps its former name as an alias. Names are unique within
    ``used_names`` (which grows)."""
    pairs = []
    for gi, (members, _) in enumerate(groups):
        for oi, cat in enumerate(old):
            a, b = set(members), set(cat.members)
            j = len(a & b) / len(a | b) if a | b else 0.0
            if j >= KEEP_ID_JACCARD:
                pairs.append((j, gi, oi))
    taken_g: dict[int, int] = {}
    taken_o: set[int] = set()
    for _, gi, oi in sorted(pairs, reverse=True):
        if gi not in taken_g and oi not in taken_o:
            taken_g[gi] = oi
            taken_o.add(oi)
    used_names = set() if used_names is None else used_names
    out = []
    for gi, (mine, keys) in enumerate(groups):
        names = [display.get(k, k) for k in keys]
        name = next((x for x in names if x not in used_names), names[0] if names else "misc")
        used_names.add(name)
        aliases = [x for x in names if x != name][:4]
        if gi in taken_g:
            prev = old[taken_g[gi]]
            cid = prev.id
            for former in [prev.name, *prev.aliases]:
                if former != name and former not in aliases:
                    aliases.append(former)
        else:
            cid = "cat-" + hashlib.sha256("\n".join(sorted(mine)).encode()).hexdigest()[:10]
        out.append(Category(cid, name, aliases[:8], sorted(mine), list(keys)))
    return out
