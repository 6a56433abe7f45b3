"""Documents that really convert slowly, and a look at the processes a daemon leaves behind.

Nothing slow is hidden in ragd's code for these tests: LaTeX is parsed by pylatexenc, whose
cost grows faster than the file (measured on a two-core machine: 1 MB in ~7 s, 5 MB in
~105 s), so a few megabytes of ordinary markup keep a conversion worker busy for as long as a
test needs, and a short ``documents.timeout_s`` makes one time out every time.
"""

from __future__ import annotations

import os
from pathlib import Path

_LINE = "\\textbf{word} and \\emph{more} text with $x^2$ as in \\cite{key}.\n"


def slow_latex(megabytes: float, word: str = "slowpoke") -> bytes:
    """A LaTeX source of about ``megabytes`` MB that pylatexenc parses slowly."""
    lines = int(megabytes * 1_000_000 / len(_LINE))
    return ("\\documentclass{article}\n\\title{" + word + "}\n\\begin{document}\n"
            + _LINE * lines + "\\end{document}\n").encode("utf-8")


def processes_of(home: Path, marker: str) -> list[int]:
    """Live (non-zombie) processes whose command line holds ``marker`` and whose environment
    names this RAGD_HOME: a test's own daemon's children, never another test's (Linux)."""
    found = []
    want = f"RAGD_HOME={home}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            if marker.encode() not in cmdline:
                continue
            if want not in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                continue
            if _state(int(entry)) in ("Z", "X", None):
                continue
        except OSError:
            continue
        found.append(int(entry))
    return found


def worker_pids(home: Path) -> list[int]:
    """The conversion workers of the daemon using ``home``."""
    return processes_of(home, "ragd.daemon.convert.worker")


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting to be reaped does not)."""
    return _state(pid) not in ("Z", "X", None)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` (Linux), 0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _state(pid: int) -> str | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rpartition(")")[2].split()[0]
