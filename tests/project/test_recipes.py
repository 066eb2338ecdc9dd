"""Every recipe in docs/recipes.md runs (a few steps each, in a fresh process)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from tests.helpers import ROOT as REPO_ROOT

ROOT = REPO_ROOT
PAGE = ROOT / "docs" / "recipes.md"
RECIPES = dict(re.findall(r"<!-- recipe: (\S+) -->\n```python\n(.*?)\n```", PAGE.read_text(), re.S))
P1, P2 = "clustergym/MultiServerChannel-v0", "clustergym/MultiServerAllocation-v0"

# (recipe, extra environment, lines the script must print)
CASES = [
    ("cleanrl-ppo", {"ENV_ID": P1}, [f"{P1}: "]),
    ("cleanrl-ppo", {"ENV_ID": P2}, [f"{P2}: "]),
    ("sb3", {}, ["sb3 recipes ok"]),
    ("supersuit-sb3", {}, [P1, P2, "clustergym/ApproxJobs-v0"]),
    ("rllib", {}, ["rllib recipes ok"]),
    ("torchrl-tianshou", {}, ["torchrl:", "tianshou:"]),
]


def test_the_page_holds_every_recipe_the_tests_run():
    assert sorted(RECIPES) == sorted({c[0] for c in CASES})


def _rllib_importable() -> bool:
    r = subprocess.run([sys.executable, "-c", "import ray.rllib.algorithms.ppo"], capture_output=True)
    return r.returncode == 0


@pytest.mark.parametrize("name,extra,expect", CASES, ids=[f"{c[0]}-{c[1].get('ENV_ID', '').split('/')[-1]}".rstrip("-")
                                                            for c in CASES])
def test_recipe_runs(name, extra, expect, tmp_path):
    if name == "rllib" and not _rllib_importable():
        pytest.skip("RLlib is not installed in this venv (pip install 'clustergym[rllib]'; `make rllib` runs this "
                    "test in its own venv)")
    script = tmp_path / f"recipe_{name.replace('-', '_')}.py"  # not named like a module it imports
    script.write_text(RECIPES[name])
    env = {**os.environ, "CLUSTERGYM_RECIPE_STEPS": "64", "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg", **extra}
    r = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    for line in expect:
        assert line in r.stdout, r.stdout[-2000:]
