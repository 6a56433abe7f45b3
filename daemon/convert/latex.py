"""LaTeX -> markdown with pylatexenc (MIT): a real parser walks the source, so nested braces,
accents (``\\'e``), escaped specials and math read as text; sectioning commands become markdown
headings, ``\\item`` list items and ``tabular`` markdown tables.

Worker-process only, like every converter that parses untrusted structure (decision 0013).
"""

from __future__ import annotations

import re
from typing import Any

from ragd.daemon.convert.converted import Converted, decode
from ragd.daemon.convert.markdown import md_table, plain_text

_LEVEL = {"part": 1, "chapter": 1, "section": 2, "subsection": 3, "subsubsection": 4,
          "paragraph": 5}
# Headings are written as a private-use marker first and made markdown after the text has been
# escaped (plain_text), so that only sectioning commands shape the outline.
_MARK = "\ue000"
_MARKED = re.compile(f"^{_MARK}(\\d) (.*)$", re.MULTILINE)
_TABLES = ("tabular", "tabular*", "tabularx", "longtable", "array")
_BLANK_RUNS = re.compile(r"\n{3,}")
_LOOSE_ITEMS = re.compile(r"^(- .*)\n\n+(?=- )", re.MULTILINE)  # items: one tight list


def convert_latex(data: bytes) -> Converted:
    """Sections as headings, lists, tables; the preamble, comments and labels dropped; the
    ``\\title`` as the first heading and the ``\\author`` as metadata."""
    from pylatexenc.latex2text import LatexNodes2Text
    from pylatexenc.latexwalker import LatexEnvironmentNode, LatexWalker

    walker = LatexWalker(decode(data), latex_context=_walker_context(), tolerant_parsing=True)
    nodes, _, _ = walker.get_latex_nodes()
    body = next((n.nodelist for n in nodes if isinstance(n, LatexEnvironmentNode)
                 and n.environmentname == "document"), nodes)
    l2t = LatexNodes2Text(latex_context=_context(), math_mode="text", strict_latex_spaces=True)
    meta = _meta(nodes, l2t)
    text = plain_text(l2t.nodelist_to_text(body).replace("\r\n", "\n"))
    lines = [" ".join(line.split()) for line in text.splitlines()]
    markdown = _MARKED.sub(lambda m: "#" * int(m.group(1)) + " " + m.group(2), "\n".join(lines))
    markdown = _LOOSE_ITEMS.sub(r"\1\n", markdown)
    title = meta.get("title", "")
    head = f"# {title}\n\n" if title else ""
    metadata = {"authors": [meta["author"]]} if meta.get("author") else {}
    return Converted(title, head + _BLANK_RUNS.sub("\n\n", markdown).strip() + "\n", metadata)


def _meta(nodes: list[Any], l2t: Any) -> dict[str, str]:
    from pylatexenc.latexwalker import LatexEnvironmentNode, LatexMacroNode

    out: dict[str, str] = {}
    stack = list(nodes)
    while stack:
        node = stack.pop(0)
        if isinstance(node, LatexEnvironmentNode) and node.environmentname == "document":
            stack.extend(node.nodelist)
        elif (isinstance(node, LatexMacroNode) and node.macroname in ("title", "author")
              and node.macroname not in out and node.nodeargd and node.nodeargd.argnlist):
            value = " ".join(l2t.nodelist_to_text(node.nodeargd.argnlist[-1:]).split())
            value = value.replace(" ,", ",")  # "A \\and B" reads "A, B"
            if value:
                out[node.macroname] = value
    return out


def _walker_context() -> Any:
    from pylatexenc.latexwalker import get_default_latex_context_db
    from pylatexenc.macrospec import MacroSpec

    db = get_default_latex_context_db()
    db.add_context_category("ragd", prepend=True, macros=[MacroSpec("href", "{{")])
    return db


def _context() -> Any:
    from pylatexenc.latex2text import (
        EnvironmentTextSpec,
        MacroTextSpec,
        get_default_latex_context_db,
    )

    db = get_default_latex_context_db()
    macros = [MacroTextSpec(name, simplify_repl=_heading(level)) for name, level in _LEVEL.items()]
    macros += [MacroTextSpec("item", simplify_repl=_item),
               MacroTextSpec("maketitle", simplify_repl=""),  # the title is written once, first
               MacroTextSpec("title", simplify_repl=""), MacroTextSpec("author", simplify_repl=""),
               MacroTextSpec("date", simplify_repl=""), MacroTextSpec("and", simplify_repl=", ")]
    macros += [MacroTextSpec(name, simplify_repl=_bracketed)
               for name in ("cite", "citep", "citet", "ref", "eqref", "autoref", "cref",
                            "pageref")]
    macros += [MacroTextSpec("url", simplify_repl="%s"),
               MacroTextSpec("href", simplify_repl="%(2)s"),
               MacroTextSpec("verb", simplify_repl=_verbatim)]
    environments = [EnvironmentTextSpec(name, simplify_repl=_table) for name in _TABLES]
    environments += [EnvironmentTextSpec(name, simplify_repl=_verbatim)
                     for name in ("verbatim", "lstlisting", "minted")]
    db.add_context_category("ragd", prepend=True, macros=macros, environments=environments)
    return db


def _heading(level: int) -> Any:
    def fmt(node: Any, l2tobj: Any) -> str:
        text = " ".join(l2tobj.node_arg_to_text(node, 2).split())
        return f"\n\n{_MARK}{level} {text}\n\n" if text else "\n\n"

    return fmt


def _item(node: Any, l2tobj: Any) -> str:
    label = node.nodeargd.argnlist[0] if node.nodeargd and node.nodeargd.argnlist else None
    label_text = " ".join(l2tobj.nodelist_to_text([label]).split()) if label is not None else ""
    return "\n- " + (f"{label_text}: " if label_text else "")


def _bracketed(node: Any, l2tobj: Any) -> str:
    key = l2tobj.node_arg_to_text(node, len(node.nodeargd.argnlist) - 1)
    return "[" + " ".join(key.split()) + "]"


def _verbatim(node: Any) -> str:
    return str(getattr(node.nodeargd, "verbatim_text", "") or "")


def _table(node: Any, l2tobj: Any) -> str:
    """A tabular as a markdown table: cells split at ``&``, rows at ``\\\\``; rules dropped."""
    from pylatexenc.latexwalker import LatexMacroNode, LatexSpecialsNode

    rows: list[list[str]] = [[]]
    cell: list[Any] = []
    for child in node.nodelist:
        if isinstance(child, LatexSpecialsNode) and child.specials_chars == "&":
            rows[-1].append(l2tobj.nodelist_to_text(cell))
            cell = []
        elif isinstance(child, LatexMacroNode) and child.macroname == "\\":
            rows[-1].append(l2tobj.nodelist_to_text(cell))
            rows.append([])
            cell = []
        else:
            cell.append(child)
    rows[-1].append(l2tobj.nodelist_to_text(cell))
    return "\n\n" + md_table([r for r in rows if any(c.strip() for c in r)]) + "\n\n"
