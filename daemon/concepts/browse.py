"""Reference 003's concept and category tools (decision 0033): concept_search,
extract_concepts, source_concepts, concept_sources, category_search, list_categories,
list_concepts_in_category."""

from __future__ import annotations

import json
from typing import Any

from ragd.daemon.concepts.extract import normalise, sentences
from ragd.daemon.concepts.queries import ConceptTable, Library, not_found, validation
from ragd.daemon.stores.concepts import Category


def _doc_brief(d: dict[str, Any], metadata: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"title": d["title"], "source": d["source"]}
    if metadata:
        out.update(summary=d["summary"], categories=d["categories"],
                   concepts=d["concept_names"][:10], metadata=d["metadata"])
    return out


def concept_search(lib: Library, concept: str, limit: int = 20,
                   source_filter: str | None = None, debug: bool = False) -> dict[str, Any]:
    table = lib.table()
    idx, why = lib.resolve(concept, table)
    if idx is None:
        answer: dict[str, Any] = {"concept": concept, "found": False, "sources": [],
                                  "total_chunks": 0}
        if debug:
            answer["debug"] = why
        return answer
    cid = table.ids[idx]
    with lib.store.reading() as db:
        links = db.execute("SELECT source_id, chunk_ids, count, score FROM doc_concepts"
                           " WHERE concept_id=? ORDER BY score DESC", (cid,)).fetchall()
    docs = {d["source_id"]: d for d in lib.documents()}
    sources = []
    total = 0
    summary = ""
    for sid, chunk_json, count, score in links:
        d = docs.get(sid)
        if d is None or (source_filter and source_filter.lower() not in d["source"].lower()):
            continue
        chunk_ids = json.loads(chunk_json)
        rows = lib.catalog.execute(
            "SELECT id, text, heading_path FROM chunks WHERE id IN ({})".format(
                ",".join("?" * len(chunk_ids))), chunk_ids).fetchall() if chunk_ids else []
        key = table.keys[idx].rstrip("y")
        chunks = []
        for ch_id, text, heading in rows:
            low = text.lower()
            density = low.count(key) / max(1, len(low.split())) * 100
            chunks.append({"chunk_id": ch_id, "text": text,
                           "heading_path": json.loads(heading),
                           "concept_density": round(density, 3)})
        chunks.sort(key=lambda c: -c["concept_density"])
        if not summary:
            summary = next((s for c in chunks for s in sentences(c["text"])
                            if key in s.lower()), "")
        pages = sorted({int(h.split()[-1]) for c in chunks for h in c["heading_path"]
                        if h.startswith("Page ") and h.split()[-1].isdigit()})
        total += len(chunks)
        sources.append({"title": d["title"], "source": d["source"], "pages": pages,
                        "concept_count": count, "score": score, "chunks": chunks[:10]})
        if len(sources) >= limit:
            break
    answer = {"concept": table.names[idx], "found": True, "summary": summary,
              **lib.relations(idx, table), "sources": sources, "total_chunks": total}
    if debug:
        answer["debug"] = why
    return answer


def extract_concepts(lib: Library, document_query: str, fmt: str = "json",
                     include_summary: bool = True) -> dict[str, Any]:
    d = lib.find_document(document_query)
    table = lib.table()
    with lib.store.reading() as db:
        rows = db.execute("SELECT c.key, c.name, dc.score, dc.count FROM doc_concepts dc JOIN"
                          " concepts c ON c.id=dc.concept_id WHERE dc.source_id=?"
                          " ORDER BY dc.rank", (d["source_id"],)).fetchall()
    primary = [{"concept": r[1], "score": r[2], "count": r[3]} for r in rows]
    own = {r[0] for r in rows}
    related: list[str] = []
    for key in [r[0] for r in rows[:10]]:
        if key in table.keys:
            for name in lib.relations(table.keys.index(key), table)["related_concepts"]:
                if normalise(name) not in own and name not in related:
                    related.append(name)
    out: dict[str, Any] = {"document": d["title"], "source": d["source"],
                           "total_concepts": len(primary), "primary_concepts": primary,
                           "categories": d["categories"], "related_concepts": related[:20]}
    if include_summary:
        out["summary"] = d["summary"]
    if fmt == "markdown":
        lines = [f"# Concepts of {d['title']}", "", f"Source: {d['source']}", ""]
        if include_summary and d["summary"]:
            lines += ["## Summary", "", d["summary"], ""]
        if d["categories"]:
            lines += ["## Categories", "", *[f"- {c}" for c in d["categories"]], ""]
        lines += ["## Primary concepts", "", *[f"- {p['concept']}" for p in primary], ""]
        if related:
            lines += ["## Related concepts", "", *[f"- {r}" for r in related[:20]]]
        return {"document": d["title"], "source": d["source"], "format": "markdown",
                "content": "\n".join(lines)}
    out["format"] = "json"
    return out


def _sources_for(lib: Library, concept: str, table: ConceptTable,
                 docs: dict[int, dict[str, Any]]) -> tuple[str | None, list[int]]:
    idx, _ = lib.resolve(concept, table)
    if idx is None:
        return None, []
    sids = [s for s in table.docs.get(table.ids[idx], []) if s in docs]
    return table.names[idx], sorted(sids, key=lambda s: docs[s]["title"].lower())


def _concept_list(concept: Any) -> list[str]:
    items = concept if isinstance(concept, list) else [concept]
    if not items or not all(isinstance(c, str) and c.strip() for c in items):
        raise validation("concept", "concept must be a non-empty string or array of strings")
    return [c.strip() for c in items]


def source_concepts(lib: Library, concept: Any, include_metadata: bool = True
                    ) -> dict[str, Any]:
    wanted = _concept_list(concept)
    table = lib.table()
    docs = {d["source_id"]: d for d in lib.documents()}
    merged: dict[int, dict[str, Any]] = {}
    matched_names = []
    for i, c in enumerate(wanted):
        name, sids = _sources_for(lib, c, table, docs)
        matched_names.append(name)
        for sid in sids:
            item = merged.setdefault(sid, {**_doc_brief(docs[sid], include_metadata),
                                           "concept_indices": [], "matched_concepts": []})
            item["concept_indices"].append(i)
            item["matched_concepts"].append(name)
    sources = sorted(merged.values(), key=lambda s: (-len(s["concept_indices"]),
                                                     s["title"].lower()))
    return {"concepts_searched": wanted, "matched_concepts": matched_names,
            "sources": sources, "total_sources": len(sources)}


def concept_sources(lib: Library, concept: Any, include_metadata: bool = True
                    ) -> dict[str, Any]:
    wanted = _concept_list(concept)
    table = lib.table()
    docs = {d["source_id"]: d for d in lib.documents()}
    results, names = [], []
    for c in wanted:
        name, sids = _sources_for(lib, c, table, docs)
        names.append(name)
        results.append([_doc_brief(docs[s], include_metadata) for s in sids])
    return {"concepts_searched": wanted, "matched_concepts": names, "results": results}


# -- categories ---------------------------------------------------------------------------------
def _describe(cat: Category, names: dict[str, str]) -> str:
    shown = [names.get(k, k) for k in cat.concepts[:5]]
    return "Documents about " + ", ".join(shown) if shown else ""


def find_category(lib: Library, category: str) -> Category:
    if not isinstance(category, str) or not category.strip():
        raise validation("category", "category is required")
    want = category.strip().lower()
    cats = lib.store.categories()
    for c in cats:
        if want in (c.id.lower(), c.name.lower()) or want in (a.lower() for a in c.aliases):
            return c
    for c in cats:
        if want in c.name.lower() or any(want in a.lower() for a in c.aliases):
            return c
    raise not_found(f"no category named {category!r}; list_categories shows them",
                    category=category)


def _category_info(cat: Category, names: dict[str, str], docs: dict[int, dict[str, Any]],
                   cats: list[Category]) -> dict[str, Any]:
    related = sorted((c for c in cats if c.id != cat.id and set(c.concepts) & set(cat.concepts)),
                     key=lambda c: -len(set(c.concepts) & set(cat.concepts)))
    mine = [docs[int(m)] for m in cat.members if int(m) in docs]
    popularity = sum(len(d["concept_names"]) for d in mine)
    by_id = {c.id: c for c in cats}
    parent = by_id.get(cat.parent) if cat.parent else None
    children = [c for c in cats if c.parent == cat.id]
    return {"id": cat.id, "name": cat.name, "aliases": cat.aliases,
            "description": _describe(cat, names), "document_count": len(mine),
            "concept_count": len({n for d in mine for n in d["concept_names"]}),
            "popularity": popularity,
            "hierarchy_path": [parent.name, cat.name] if parent else [cat.name],
            "parent": {"id": parent.id, "name": parent.name} if parent else None,
            "children": [{"id": c.id, "name": c.name, "document_count": len(c.members)}
                         for c in sorted(children, key=lambda c: -len(c.members))],
            "related_categories": [c.name for c in related[:5]]}


def category_search(lib: Library, category: str, include_children: bool = False,
                    limit: int = 10) -> dict[str, Any]:
    cat = find_category(lib, category)
    docs = {d["source_id"]: d for d in lib.documents()}
    names, cats = lib.store.display_names(), lib.store.categories()
    info = _category_info(cat, names, docs, cats)

    def listed(c: Category) -> list[dict[str, Any]]:
        mine = sorted((docs[int(m)] for m in c.members if int(m) in docs),
                      key=lambda d: d["title"].lower())
        return [{"title": d["title"], "source": d["source"], "summary": d["summary"],
                 "concepts": d["concept_names"][:10], "categories": d["categories"]}
                for d in mine[:limit]]

    answer: dict[str, Any] = {"category": info, "include_children": include_children,
                              "documents": listed(cat), "total_documents": info["document_count"]}
    if include_children:  # each narrower category with its own documents
        answer["child_categories"] = [
            {**_category_info(c, names, docs, cats), "documents": listed(c)}
            for c in cats if c.parent == cat.id]
    return answer


SORTS = ("name", "popularity", "documentCount")


def list_categories(lib: Library, sort_by: str = "popularity", limit: int = 50,
                    search: str | None = None) -> dict[str, Any]:
    docs = {d["source_id"]: d for d in lib.documents()}
    names = lib.store.display_names()
    cats = lib.store.categories()
    infos = [_category_info(c, names, docs, cats) for c in cats]
    if search:
        s = search.lower()
        infos = [i for i in infos if s in i["name"].lower() or s in i["description"].lower()
                 or any(s in a.lower() for a in i["aliases"])]
    key = {"name": lambda i: (i["name"].lower(),),
           "popularity": lambda i: (-i["popularity"], i["name"].lower()),
           "documentCount": lambda i: (-i["document_count"], i["name"].lower())}[sort_by]
    infos.sort(key=key)
    return {"categories": infos[:limit], "total": len(infos), "sort_by": sort_by}


def list_concepts_in_category(lib: Library, category: str, sort_by: str = "documentCount",
                              limit: int = 50) -> dict[str, Any]:
    cat = find_category(lib, category)
    table = lib.table()
    members = {int(m) for m in cat.members}
    counts = []
    for i, cid in enumerate(table.ids):
        n = len(members & set(table.docs.get(cid, ())))
        if n:
            counts.append((i, n))
    key = (lambda t: (table.names[t[0]].lower(),)) if sort_by == "name" else \
        (lambda t: (-t[1], table.names[t[0]].lower()))
    counts.sort(key=key)
    out = []
    for i, n in counts[:limit]:
        rel = lib.relations(i, table)
        out.append({"name": table.names[i], "document_count": n,
                    "total_document_count": len(table.docs.get(table.ids[i], ())),
                    "related_concepts": rel["related_concepts"][:5],
                    "synonyms": rel["synonyms"]})
    return {"category": {"id": cat.id, "name": cat.name}, "concepts": out,
            "total": len(counts), "sort_by": sort_by}
