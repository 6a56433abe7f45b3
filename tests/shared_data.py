"""Where the shared data beside the repository is: ``RAGD_CORPUS`` and ``RAGD_REFERENCE`` name
the folders, else ``../shared/corpus`` and ``../shared/reference``. Every test finds them here,
so one variable moves them for all (issue 40)."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("RAGD_CORPUS") or REPO.parent / "shared" / "corpus")
REFERENCE = Path(os.environ.get("RAGD_REFERENCE") or REPO.parent / "shared" / "reference")
