"""Source files split at definitions with tree-sitter (ragd.daemon.text.symbols), every language."""

from __future__ import annotations

import pytest

from ragd.daemon.text.symbols import (
    LANGUAGES,
    MAX_CHARS,
    MAX_LINES,
    language_of,
    nl_summary,
    split_source,
)


def _find(path: str, text: str) -> dict[str, tuple[str, int, int, str, str]]:
    return {s.qualified: (s.symbol_type, s.start_line, s.end_line, s.signature, s.doc)
            for s in split_source(text, path) if not s.part}


PY = '''"""Upload helpers."""
import time

RETRIES = 3


@retrying
def upload_with_retry(path, tries=RETRIES):
    """Upload a file, retrying on failure."""
    for i in range(tries):
        time.sleep(i)


class Uploader:
    """Sends files to the store."""

    rate = 1

    def send(self, blob):
        return blob
'''


def test_python_functions_classes_methods_and_top_level() -> None:
    found = _find("up.py", PY)
    assert found["upload_with_retry"][:3] == ("function", 7, 11)
    assert found["upload_with_retry"][3] == "def upload_with_retry(path, tries=RETRIES)"
    assert found["upload_with_retry"][4] == "Upload a file, retrying on failure."
    assert found["Uploader"][:3] == ("class", 14, 20)
    assert found["Uploader"][4] == "Sends files to the store."
    assert found["Uploader.send"][:3] == ("method", 19, 20)
    module = found["up.py"]
    assert module[0] == "module" and module[1] == 1 and module[4] == "Upload helpers."
    # The class keeps its own lines and the method's first line; the method is its own symbol.
    cls = next(s for s in split_source(PY, "up.py") if s.name == "Uploader")
    assert "rate = 1" in cls.text and "def send" in cls.text and "return blob" not in cls.text


CASES = [
    ("javascript", "a.js", "// Greets someone\nfunction greet(n) {\n  return n;\n}\n"
     "class Box {\n  open() { return 1; }\n}\nconst twice = (a) => a * 2;\n",
     {"greet": ("function", 2), "Box": ("class", 5), "Box.open": ("method", 6),
      "twice": ("function", 8)}),
    ("typescript", "a.ts", "import x from 'y';\nexport function greet(n: string): string {\n"
     "  return n;\n}\nexport interface Shape {\n  area(): number;\n}\n"
     "class Box { open(): void {} }\n",
     {"greet": ("function", 2), "Shape": ("interface", 5), "Box": ("class", 8),
      "Box.open": ("method", 8)}),
    ("typescript", "a.tsx", "export function App() {\n  return <div/>;\n}\n",
     {"App": ("function", 1)}),
    ("go", "a.go", "package main\n\n// Add adds.\nfunc Add(a, b int) int {\n\treturn a + b\n}\n"
     "type Reader interface { Read() }\ntype Point struct { X int }\n"
     "func (p Point) Norm() int { return p.X }\n",
     {"Add": ("function", 4), "Reader": ("interface", 7), "Point": ("class", 8),
      "Norm": ("method", 9)}),
    ("rust", "a.rs", "/// A thing\nstruct Thing { a: i32 }\nimpl Thing {\n    fn new() -> Self "
     "{ Thing { a: 1 } }\n}\nfn main() {}\ntrait Speak { fn speak(&self); }\n",
     {"Thing": ("class", 2), "new": ("method", 4), "main": ("function", 6),
      "Speak": ("interface", 7)}),
    ("java", "A.java", "public class Hello {\n  /** says hi */\n  public void hi() {}\n}\n"
     "interface Greeter { void greet(); }\n",
     {"Hello": ("class", 1), "Hello.hi": ("method", 3), "Greeter": ("interface", 5)}),
    ("c", "a.c", "/* adds */\nint add(int a, int b) {\n  return a + b;\n}\n"
     "struct point { int x; };\ntypedef int myint;\n",
     {"add": ("function", 2), "point": ("class", 5), "myint": ("type_alias", 6)}),
    ("cpp", "a.cpp", "class Foo {\n public:\n  void bar();\n};\nvoid Foo::bar() {}\n"
     "namespace ns { int f() { return 1; } }\n",
     {"Foo": ("class", 1), "Foo.bar": ("method", 3), "bar": ("method", 5),
      "f": ("function", 6)}),
    ("csharp", "a.cs", "namespace App {\n  class Svc {\n    public void Run() {}\n  }\n"
     "  interface IRun {}\n}\n",
     {"App": ("module", 1), "App.Svc": ("class", 2), "App.Svc.Run": ("method", 3),
      "App.IRun": ("interface", 5)}),
    ("ruby", "a.rb", "# A dog\nclass Dog\n  def bark\n    'woof'\n  end\nend\n",
     {"Dog": ("class", 2), "Dog.bark": ("method", 3)}),
    ("php", "a.php", "<?php\nfunction hello() { return 1; }\nclass A {\n"
     "  public function m() {}\n}\n",
     {"hello": ("function", 2), "A": ("class", 3), "A.m": ("method", 4)}),
    ("bash", "deploy.sh", "#!/bin/bash\n# deploy it\ndeploy() {\n  echo hi\n}\ndeploy\n",
     {"deploy": ("function", 3)}),
]


@pytest.mark.parametrize(("language", "path", "text", "expected"), CASES,
                         ids=[c[1] for c in CASES])
def test_each_language(language: str, path: str, text: str,
                       expected: dict[str, tuple[str, int]]) -> None:
    assert language_of(path) == language
    found = _find(path, text)
    for name, (kind, line) in expected.items():
        assert name in found, (name, sorted(found))
        assert found[name][:2] == (kind, line), (name, found[name])


def test_languages_cover_the_issue() -> None:
    assert set(LANGUAGES) >= {"python", "javascript", "typescript", "go", "rust", "java", "c",
                              "cpp", "csharp", "ruby", "php", "bash"}


def test_leading_comments_are_docs() -> None:
    go = _find("a.go", "package m\n\n// Add adds two ints.\nfunc Add(a, b int) int { return a+b }\n")
    assert go["Add"][4] == "Add adds two ints."
    sh = _find("a.sh", "#!/bin/sh\n# deploy the site\ndeploy() { :; }\n")
    assert sh["deploy"][4] == "deploy the site"


def test_an_oversized_definition_stays_one_symbol() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(300))
    text = f"def big():\n{body}\n\ndef small():\n    return 1\n"
    syms = split_source(text, "big.py")
    [big] = [s for s in syms if s.name == "big"]  # its chunks carry its name (issue 36)
    assert (big.part, big.start_line, big.end_line) == (0, 1, 301)
    assert len(big.text) > MAX_CHARS and big.text.endswith("x299 = 299")
    assert big.signature == "def big()"
    assert next(s for s in syms if s.name == "small").start_line == 304


def test_a_long_run_of_top_level_code_is_cut_into_windows() -> None:
    text = "".join(f"x{i} = {i}\n" for i in range(300))
    parts = split_source(text, "script.py")
    assert len(parts) > 3 and all(p.symbol_type == "module" for p in parts)
    assert [p.part for p in parts] == list(range(1, len(parts) + 1))
    for a, b in zip(parts, parts[1:], strict=False):
        assert b.start_line == a.end_line + 1
    assert all(len(p.text.split("\n")) <= MAX_LINES and len(p.text) <= MAX_CHARS
               for p in parts)


def test_other_languages_fall_back_to_line_windows() -> None:
    text = "\n".join(f"fun f{i}() = {i}" for i in range(150))
    syms = split_source(text, "Main.kt")
    assert language_of("Main.kt") == "kotlin"
    assert [(s.start_line, s.end_line) for s in syms] == [(1, 60), (61, 120), (121, 150)]
    assert {s.symbol_type for s in syms} == {"module"}
    assert language_of("image.png") is None


def test_markdown_by_headings_not_inside_fences() -> None:
    text = "# Guide\nintro\n\n## Retry uploads\nset tries\n```sh\n# not a heading\n```\n"
    syms = split_source(text, "docs/guide.md")
    assert [(s.name, s.symbol_type, s.start_line) for s in syms] == [
        ("Guide", "doc", 1), ("Retry uploads", "doc", 4)]


def test_broken_source_still_gives_symbols() -> None:
    syms = split_source("def ok():\n    return 1\n\ndef broken(:\n  pass\n", "x.py")
    assert any(s.name == "ok" and s.start_line == 1 for s in syms)
    assert split_source("", "empty.py") == []


def test_nl_summary_says_what_where_and_why() -> None:
    sym = next(s for s in split_source(PY, "up.py") if s.name == "upload_with_retry")
    summary = nl_summary(sym, "python", "src/up.py")
    assert summary.startswith("Function upload_with_retry in src/up.py (python)")
    assert "def upload_with_retry(path, tries=RETRIES)" in summary
    assert "retrying on failure" in summary


def test_a_nested_definition_is_named_under_its_full_name() -> None:
    text = ("class Auth:\n    def build(self):\n        def md5(x):\n            return x\n"
            "        return md5\n\n    class Inner:\n        def go(self):\n            pass\n\n"
            "def outer():\n    def get_proxy(k):\n        return k\n    return get_proxy\n")
    named = {s.qualified: s.symbol_type for s in split_source(text, "auth.py")
             if s.symbol_type != "module"}
    assert named == {"Auth": "class", "Auth.build": "method", "Auth.build.md5": "function",
                     "Auth.Inner": "class", "Auth.Inner.go": "method", "outer": "function",
                     "outer.get_proxy": "function"}, named
