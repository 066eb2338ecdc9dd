"""The linter (``make lint``, run first by ``make test``): ruff with pyflakes' rules over every Python folder.

The tree is clean, and the configuration really catches what it is there for: an undefined name planted in a
copy of a package module (the kind of slip a lost import leaves behind) is reported.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.helpers import ROOT

RUFF = shutil.which("ruff", path=os.path.dirname(sys.executable)) or shutil.which("ruff")
pytestmark = pytest.mark.skipif(RUFF is None, reason="ruff is not installed (it comes with the dev extra)")


def _ruff(*args: str, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([RUFF, "check", "--no-cache", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def test_the_tree_is_clean():
    proc = _ruff(".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("planted, code", [
    ("def late():\n    return never_defined_anywhere(1)\n", "F821"),  # undefined name
    ("def unused():\n    value = 3\n    return None\n", "F841"),  # unused variable
    ("import os\n", "F401"),  # unused import
])
def test_a_planted_slip_is_reported(tmp_path, planted, code):
    """A copy of the repository's lint configuration and one package module, with a slip appended."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / "clustergym" / "bench" / "rates.py"
    target.parent.mkdir(parents=True)
    text = (ROOT / "clustergym" / "bench" / "rates.py").read_text()
    target.write_text(text)
    clean = _ruff(".", cwd=tmp_path)
    assert clean.returncode == 0, clean.stdout  # the copy alone is clean: the finding below is the planted one
    target.write_text(text + "\n\n" + planted)
    proc = _ruff(".", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert code in proc.stdout and "rates.py" in proc.stdout, proc.stdout
