"""Source files split at their definitions, with tree-sitter and the official grammar wheels.

A file becomes symbols: each function, method, class, interface, type alias and module (a
namespace, a Rust ``mod``) with its line range, its signature and its docstring or leading
comment; what lies outside every definition (imports, constants, a script's body) is gathered
into ``module`` symbols, cut into line windows past ``MAX_LINES`` or ``MAX_CHARS``. A
definition is one symbol however long (its chunks carry its name; decision 0051). A definition
that holds others (a class and its methods) keeps its own lines and the first line of each of
those: the methods are symbols of their own.

Definitions are found by each grammar's own ``queries/tags.scm`` (``@definition.*`` with
``@name``); TypeScript's covers only what JavaScript lacks, so JavaScript's is added to it; the
bash wheel ships none, so one pattern is written here. A file in another language, or one the
grammar cannot load, falls back to line windows. Pure: text in, symbols out (decision 0030).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

log = logging.getLogger(__name__)

MAX_LINES = 80  # a symbol longer than this is cut into windows of this many lines
MAX_CHARS = 3200  # ... or than this many characters
WINDOW_LINES = 60  # the fallback's windows (a file in a language without a grammar)
SIGNATURE_CHARS = 240
DOC_CHARS = 600

# extension -> language (the ``language`` metadata and the grammar that reads it)
EXTENSIONS: dict[str, str] = {
    ".py": "python", ".pyi": "python", ".pyw": "python",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "typescript", ".mts": "typescript", ".cts": "typescript", ".tsx": "typescript",
    ".go": "go", ".rs": "rust", ".java": "java",
    ".c": "c", ".h": "c",
    ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp", ".hxx": "cpp",
    ".cs": "csharp", ".rb": "ruby", ".rake": "ruby", ".php": "php",
    ".sh": "bash", ".bash": "bash", ".zsh": "bash",
}
# Text files of other languages: read as line windows (``FALLBACK``).
FALLBACK_EXTENSIONS: dict[str, str] = {
    ".kt": "kotlin", ".kts": "kotlin", ".swift": "swift", ".scala": "scala", ".sql": "sql",
    ".lua": "lua", ".pl": "perl", ".pm": "perl", ".r": "r", ".ex": "elixir", ".exs": "elixir",
    ".erl": "erlang", ".hs": "haskell", ".ml": "ocaml", ".clj": "clojure", ".dart": "dart",
    ".vue": "vue", ".svelte": "svelte", ".css": "css", ".scss": "scss", ".html": "html",
    ".proto": "protobuf", ".graphql": "graphql", ".yaml": "yaml", ".yml": "yaml",
    ".toml": "toml", ".ini": "ini", ".cfg": "ini", ".gradle": "gradle", ".cmake": "cmake",
    ".m": "objc", ".mm": "objc", ".zig": "zig", ".nim": "nim", ".jl": "julia", ".f90": "fortran",
    ".ps1": "powershell", ".bat": "batch", ".tf": "terraform", ".txt": "text", ".rst": "rst",
}
DOC_EXTENSIONS = (".md", ".mdx", ".markdown")
NAMED_FILES = {"Makefile": "make", "Dockerfile": "dockerfile", "CMakeLists.txt": "cmake",
               "Rakefile": "ruby", "Gemfile": "ruby", "Jenkinsfile": "groovy"}
LANGUAGE_ALIASES = {"py": "python", "js": "javascript", "jsx": "javascript", "ts": "typescript",
                    "tsx": "typescript", "golang": "go", "rs": "rust", "c++": "cpp",
                    "cs": "csharp", "c#": "csharp", "rb": "ruby", "sh": "bash", "shell": "bash",
                    "zsh": "bash", "md": "markdown"}

# language -> (grammar module, its language function, the extra tags files, by module)
_GRAMMARS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "python": ("tree_sitter_python", "language", ()),
    "javascript": ("tree_sitter_javascript", "language", ()),
    "typescript": ("tree_sitter_typescript", "language_typescript", ("tree_sitter_javascript",)),
    "tsx": ("tree_sitter_typescript", "language_tsx", ("tree_sitter_javascript",)),
    "go": ("tree_sitter_go", "language", ()),
    "rust": ("tree_sitter_rust", "language", ()),
    "java": ("tree_sitter_java", "language", ()),
    "c": ("tree_sitter_c", "language", ()),
    "cpp": ("tree_sitter_cpp", "language", ()),
    "csharp": ("tree_sitter_c_sharp", "language", ()),
    "ruby": ("tree_sitter_ruby", "language", ()),
    "php": ("tree_sitter_php", "language_php", ()),
    "bash": ("tree_sitter_bash", "language", ()),
}
# The bash wheel has no tags.scm.
_OWN_TAGS = {"bash": "(function_definition name: (word) @name) @definition.function"}

LANGUAGES = tuple(sorted(set(EXTENSIONS.values())))  # covered by a grammar

# A definition's node may be its declarator (C's function_declarator): its definition is the
# nearest of these above it.
_DEFINITION_NODES = frozenset({
    "function_definition", "declaration", "field_declaration", "type_definition",
    "struct_specifier", "enum_specifier", "class_specifier", "union_specifier",
    "template_declaration"})
# Wrappers that belong to the definition they hold (decorators, export, a C++ template).
_WRAPPERS = frozenset({"decorated_definition", "export_statement", "template_declaration"})
_CLASSLIKE = ("class", "interface", "module")
_TYPE_KIND = {"function": "function", "method": "method", "class": "class",
              "interface": "interface", "module": "module", "type": "type_alias",
              "macro": "function"}
_COMMENT_END = re.compile(r"\s*\*/\s*$")
_COMMENT_MARK = re.compile(r"^\s*(?:/\*\*?|\*/|\*(?!\*)|///?|#+|--|<!--|-->)\s?")


@dataclass(frozen=True)
class Symbol:
    """One piece of a source file, as it is embedded and searched."""

    name: str
    symbol_type: str  # function | method | class | interface | type_alias | module | doc
    start_line: int  # 1-based, inclusive
    end_line: int
    text: str
    signature: str = ""
    doc: str = ""  # docstring or leading comment
    parent: str = ""  # the enclosing class or module, for a method
    part: int = 0  # 1.. when a long definition was cut into windows (0: whole)

    @property
    def qualified(self) -> str:
        return f"{self.parent}.{self.name}" if self.parent else self.name


def language_of(path: str) -> str | None:
    """The language of a file by its name: one with a grammar, another read as line windows,
    "markdown" for docs, or None (not source: not indexed)."""
    p = PurePosixPath(path)
    if p.name in NAMED_FILES:
        return NAMED_FILES[p.name]
    suffix = p.suffix.lower()
    if suffix in DOC_EXTENSIONS:
        return "markdown"
    return EXTENSIONS.get(suffix) or FALLBACK_EXTENSIONS.get(suffix)


def normalise_language(value: str) -> str:
    v = value.strip().lower()
    return LANGUAGE_ALIASES.get(v, v)


def split_source(text: str, path: str, language: str | None = None) -> list[Symbol]:
    """The symbols of one file, in file order (markdown by headings; a language without a
    grammar, or a parse that fails, as line windows)."""
    language = language or language_of(path) or "text"
    if language == "markdown":
        return split_markdown(text, path)
    grammar = "tsx" if path.lower().endswith(".tsx") else language
    if grammar in _GRAMMARS:
        try:
            return _split_tree(text, path, grammar)
        except Exception:  # a grammar that fails to load must not lose the file
            log.exception("tree-sitter failed on %s; read as line windows", path)
    return line_windows(text, PurePosixPath(path).name, "module")


# -- tree-sitter --------------------------------------------------------------------------------


@functools.cache
def _grammar(name: str) -> tuple[Any, Any]:
    """(Language, tags Query) of a grammar, loaded once."""
    from tree_sitter import Language, Query

    module, func, extra = _GRAMMARS[name]
    lang = Language(getattr(importlib.import_module(module), func)())
    sources = [_tags_file(module)] + [_tags_file(m) for m in extra]
    text = _OWN_TAGS.get(name) or "\n".join(s for s in sources if s)
    try:
        query = Query(lang, text)
    except Exception:  # another grammar's patterns that this one cannot compile
        query = Query(lang, sources[0])
    return lang, query


def _tags_file(module: str) -> str:
    """A grammar wheel's queries/tags.scm. The C# wheel installs it beside the package, in a
    folder named after the distribution (``tree_sitter_c-sharp``)."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return ""
    pkg = Path(spec.origin).parent
    for d in (pkg, pkg.parent / pkg.name.replace("_c_sharp", "_c-sharp")):
        f = d / "queries" / "tags.scm"
        if f.is_file():
            return f.read_text(encoding="utf-8")
    return ""


@dataclass
class _Def:
    node: Any  # the outer node (decorators, export included)
    name: str
    kind: str
    start: int  # byte offsets of the outer node
    end: int
    children: list[_Def]


def _split_tree(text: str, path: str, grammar: str) -> list[Symbol]:
    from tree_sitter import Parser, QueryCursor

    lang, query = _grammar(grammar)
    data = text.encode("utf-8", "surrogatepass")
    tree = Parser(lang).parse(data)
    found: dict[tuple[int, int], _Def] = {}
    for _, caps in QueryCursor(query).matches(tree.root_node):
        defs = [(k, v) for k, v in caps.items() if k.startswith("definition.")]
        names = caps.get("name")
        if not defs or not names:
            continue
        label, nodes = defs[0]
        kind = _TYPE_KIND.get(label.removeprefix("definition."))
        if kind is None:
            continue
        node = _outer(nodes[0])
        name = data[names[0].start_byte:names[0].end_byte].decode("utf-8", "replace")
        if kind == "type_alias" and grammar == "go":
            kind = _go_type(node)
        key = (node.start_byte, node.end_byte)
        prev = found.get(key)
        if prev is None or (prev.kind == "function" and kind == "method"):
            found[key] = _Def(node, name, kind, node.start_byte, node.end_byte, [])
    roots = _nest(sorted(found.values(), key=lambda d: (d.start, -d.end)))
    lines = text.split("\n")
    out: list[Symbol] = []
    for d in roots:
        out.extend(_symbols(d, data, lines, "", grammar))
    out.extend(_top_level(roots, data, lines, path, grammar, tree.root_node))
    out.sort(key=lambda s: (s.start_line, s.part))
    return out


def _outer(node: Any) -> Any:
    while node.parent is not None and node.type not in _DEFINITION_NODES and \
            node.type.endswith("declarator"):
        node = node.parent
    if node.type.endswith("declarator"):
        return node
    while node.parent is not None and node.parent.type in _WRAPPERS:
        node = node.parent
    return node


def _go_type(node: Any) -> str:
    kind = node.child_by_field_name("type")
    if kind is not None and kind.type == "interface_type":
        return "interface"
    if kind is not None and kind.type == "struct_type":
        return "class"
    return "type_alias"


def _nest(defs: Sequence[_Def]) -> list[_Def]:
    """Definitions as a forest by containment (sorted by start, outer first)."""
    roots: list[_Def] = []
    stack: list[_Def] = []
    for d in defs:
        while stack and not (stack[-1].start <= d.start and d.end <= stack[-1].end):
            stack.pop()
        (stack[-1].children if stack else roots).append(d)
        stack.append(d)
    return roots


def _line(data: bytes, byte: int) -> int:
    return data.count(b"\n", 0, byte)


def _symbols(d: _Def, data: bytes, lines: list[str], parent: str,
             grammar: str) -> Iterator[Symbol]:
    kind = d.kind
    first, last = d.node.start_point[0], d.node.end_point[0]
    own = list(range(first, last + 1))
    hidden: set[int] = set()
    for c in d.children:  # their bodies are theirs: keep their first line here
        c0, c1 = c.node.start_point[0], c.node.end_point[0]
        hidden.update(range(c0 + 1, c1 + 1))
    body_lines = [i for i in own if i not in hidden]
    text = _joined(lines, body_lines, hidden)
    # Whole, however long (issue 36): the chunker cuts its text to the model's length and
    # every chunk is embedded under the symbol's title; a result shows it once, whole.
    yield Symbol(name=d.name, symbol_type=kind, start_line=first + 1, end_line=last + 1,
                 text=text, signature=_signature(d.node, data),
                 doc=_doc(d.node, data, grammar), parent=parent)
    # What it holds is named under its full name: a method's nested helper is
    # Class.method.helper, not Class.helper (issue 36: it read as a method of the class).
    inner = f"{parent}.{d.name}" if parent else d.name
    for c in d.children:
        c.kind = "method" if c.kind == "function" and kind in ("class", "interface") \
            else c.kind
        yield from _symbols(c, data, lines, inner, grammar)


def _joined(lines: list[str], keep: Sequence[int], hidden: set[int]) -> str:
    """The kept lines, with one "…" line where a run of hidden lines was left out."""
    out: list[str] = []
    prev = None
    for i in keep:
        if prev is not None and i != prev + 1 and any(j in hidden for j in range(prev + 1, i)):
            indent = re.match(r"\s*", lines[prev + 1] if prev + 1 < len(lines) else "")
            out.append((indent.group(0) if indent else "") + "…")
        out.append(lines[i] if i < len(lines) else "")
        prev = i
    return "\n".join(out)


def _signature(node: Any, data: bytes) -> str:
    """The definition up to its body (its first line when it has no body field)."""
    inner = node
    while inner.type in _WRAPPERS:  # the decorated or exported definition itself
        named = [c for c in inner.named_children if c.type not in ("decorator", "comment")]
        if not named:
            break
        inner = named[-1]
    body = inner.child_by_field_name("body")
    if body is not None and body.start_byte > inner.start_byte:
        end = body.start_byte
    else:  # no body: its first line, or up to its ";"
        ends = [e for e in (data.find(b"\n", inner.start_byte, inner.end_byte),
                            data.find(b";", inner.start_byte, inner.end_byte)) if e >= 0]
        end = min(ends) if ends else inner.end_byte
    sig = data[inner.start_byte:end].decode("utf-8", "replace")
    sig = " ".join(sig.split()).rstrip(":{ ").strip()
    return sig[:SIGNATURE_CHARS]


def _doc(node: Any, data: bytes, grammar: str) -> str:
    """A Python docstring, else the comment lines right above the definition."""
    if grammar == "python":
        inner = node
        if inner.type == "decorated_definition":
            inner = inner.child_by_field_name("definition") or inner
        body = inner.child_by_field_name("body")
        if body is not None and body.named_child_count:
            doc = _string_statement(body.named_children[0], data)
            if doc:
                return doc
    comments: list[str] = []
    prev = node.prev_named_sibling
    row = node.start_point[0]
    while prev is not None and "comment" in prev.type and prev.end_point[0] >= row - 1:
        comments.append(data[prev.start_byte:prev.end_byte].decode("utf-8", "replace"))
        row = prev.start_point[0]
        prev = prev.prev_named_sibling
    text = "\n".join(reversed(comments))
    cleaned = [_COMMENT_END.sub("", _COMMENT_MARK.sub("", ln)).strip()
               for ln in text.splitlines() if not ln.startswith("#!")]
    return " ".join(c for c in cleaned if c)[:DOC_CHARS]


def _string_statement(node: Any, data: bytes) -> str:
    if node.type == "expression_statement" and node.named_child_count \
            and node.named_children[0].type == "string":
        raw = data[node.start_byte:node.end_byte].decode("utf-8", "replace")
        return " ".join(raw.strip().strip("rbuRBU").strip("\"'").split())[:DOC_CHARS]
    return ""


def _top_level(roots: Sequence[_Def], data: bytes, lines: list[str], path: str,
               grammar: str, root_node: Any) -> list[Symbol]:
    """The lines outside every definition, gathered into ``module`` symbols."""
    covered: set[int] = set()
    for d in roots:
        covered.update(range(d.node.start_point[0], d.node.end_point[0] + 1))
    doc = ""
    if grammar == "python" and root_node.named_child_count:
        doc = _string_statement(root_node.named_children[0], data)
    name = PurePosixPath(path).name
    out: list[Symbol] = []
    run: list[int] = []
    for i in range(len(lines)):
        if i in covered:
            if run:
                out.extend(_module_run(lines, run, name, doc if not out else ""))
                run = []
            continue
        run.append(i)
    if run:
        out.extend(_module_run(lines, run, name, doc if not out else ""))
    return _merge_small(out)


def _module_run(lines: list[str], run: list[int], name: str, doc: str) -> list[Symbol]:
    text = "\n".join(lines[i] for i in run)
    if not text.strip():
        return []
    # Trim blank lines at both ends so start_line is where the code is.
    while run and not lines[run[0]].strip():
        run = run[1:]
    while run and not lines[run[-1]].strip():
        run = run[:-1]
    text = "\n".join(lines[i] for i in run)
    return [Symbol(name=name, symbol_type="module", start_line=run[0] + 1,
                   end_line=run[-1] + 1, text=text, doc=doc)]


def _merge_small(mods: list[Symbol]) -> list[Symbol]:
    """Runs of top-level lines between definitions (an import, a constant) merged while they
    stay one window: a file's top-level code is a few symbols, not one per blank gap."""
    out: list[Symbol] = []
    for m in mods:
        if out and (m.end_line - out[-1].start_line) < MAX_LINES \
                and len(out[-1].text) + len(m.text) < MAX_CHARS:
            prev = out[-1]
            out[-1] = replace(prev, end_line=m.end_line, text=prev.text + "\n…\n" + m.text,
                              doc=prev.doc or m.doc)
        else:
            out.extend(_cut(m))
    return out


def _cut(sym: Symbol) -> list[Symbol]:
    """A symbol too long for one piece, as line windows that keep its name and signature."""
    lines = sym.text.split("\n")
    if len(lines) <= MAX_LINES and len(sym.text) <= MAX_CHARS:
        return [sym]
    out: list[Symbol] = []
    i = 0
    while i < len(lines):
        size, j = 0, i
        while j < len(lines) and j - i < WINDOW_LINES and (size + len(lines[j]) < MAX_CHARS
                                                          or j == i):
            size += len(lines[j]) + 1
            j += 1
        piece = "\n".join(lines[i:j])
        if len(piece) > MAX_CHARS:  # one very long line: cut by characters
            piece = piece[:MAX_CHARS]
        out.append(replace(sym, text=piece, start_line=sym.start_line + i,
                           end_line=min(sym.end_line, sym.start_line + j - 1),
                           part=len(out) + 1))
        i = j
    return out


# -- fallbacks ----------------------------------------------------------------------------------


def line_windows(text: str, name: str, symbol_type: str) -> list[Symbol]:
    """A file with no grammar: windows of ``WINDOW_LINES`` lines, blank windows dropped."""
    lines = text.split("\n")
    out: list[Symbol] = []
    for i in range(0, len(lines), WINDOW_LINES):
        piece = "\n".join(lines[i:i + WINDOW_LINES])
        if not piece.strip():
            continue
        out.extend(_cut(Symbol(name=name, symbol_type=symbol_type, start_line=i + 1,
                               end_line=min(len(lines), i + WINDOW_LINES), text=piece)))
    for n, s in enumerate(out, 1):
        if len(out) > 1:
            out[n - 1] = replace(s, part=n)
    return out


_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")


def split_markdown(text: str, path: str) -> list[Symbol]:
    """A markdown doc as ``doc`` symbols, one per section (fenced code kept whole)."""
    lines = text.split("\n")
    starts: list[tuple[int, str]] = [(0, PurePosixPath(path).stem)]
    fence = False
    for i, line in enumerate(lines):
        if _FENCE.match(line):
            fence = not fence
        m = None if fence else _HEADING.match(line)
        if m:
            starts.append((i, m.group(2).strip()))
    out: list[Symbol] = []
    for n, (start, heading) in enumerate(starts):
        end = starts[n + 1][0] if n + 1 < len(starts) else len(lines)
        piece = "\n".join(lines[start:end]).strip("\n")
        if not piece.strip() or (n == 0 and start == end):
            continue
        first = start + next((k for k, ln in enumerate(lines[start:end]) if ln.strip()), 0)
        out.extend(_cut(Symbol(name=heading, symbol_type="doc", start_line=first + 1,
                               end_line=end, text=piece)))
    return out


def nl_summary(sym: Symbol, language: str, path: str) -> str:
    """ragd's offline natural-language summary of a symbol: what it is, where, its signature,
    and its docstring or leading comment (no model writes it)."""
    what = sym.symbol_type.replace("_", " ")
    head = f"{what.capitalize()} {sym.qualified} in {path} ({language})"
    if sym.symbol_type == "doc":
        head = f"Documentation section '{sym.name}' in {path}"
    if sym.part:
        head += f", part {sym.part}"
    parts = [head]
    if sym.signature:
        parts.append(f"signature: {sym.signature}")
    if sym.doc:
        parts.append(sym.doc)
    return ". ".join(parts)
