"""The docs site built once per test session (``mkdocs build --strict``, what ``make docs`` runs), shared by
the strict-build check (test_docs.py) and the browser check (test_site_browser.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.helpers import ROOT


@dataclass(frozen=True)
class BuiltSite:
    path: Path
    returncode: int
    stdout: str
    stderr: str
    wall_s: float


@pytest.fixture(scope="session")
def built_site(tmp_path_factory) -> BuiltSite:
    site = tmp_path_factory.mktemp("docs") / "site"
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=str(ROOT),
                       capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    return BuiltSite(site, r.returncode, r.stdout, r.stderr, time.perf_counter() - t0)
