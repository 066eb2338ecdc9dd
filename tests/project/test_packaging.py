"""Packaging as users get it: a wheel built from the repository's files
passes ``twine check``, installs non-editable without dependencies into a folder of its own, and
works from outside the repository with that folder first on ``PYTHONPATH``: ``clustergym list``,
``gym.make`` of every env id, every scenario preset that ships inside the package, and a tiny
``clustergym run``. The smoke script asserts that it imported the wheel's copy (``__file__``),
not the repository's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile

import pytest
from tests.helpers import ROOT as REPO_ROOT

ROOT = str(REPO_ROOT)

SMOKE = r'''
import json, os, sys, warnings
warnings.filterwarnings("ignore")
target = sys.argv[1]
import clustergym
import gymnasium as gym
from clustergym.core.agent import list_agents
from clustergym.envs import ENV_IDS
assert os.path.realpath(clustergym.__file__).startswith(os.path.realpath(target)), clustergym.__file__
import clustergym.envs, clustergym.agents, clustergym.baselines
for m in (clustergym.envs, clustergym.agents, clustergym.baselines):
    assert os.path.realpath(m.__file__).startswith(os.path.realpath(target)), m.__file__
assert os.path.isfile(os.path.join(os.path.dirname(clustergym.__file__), "py.typed"))
import importlib
for paper in ("esdp", "ogasched", "gadget", "opm"):  # each with its experiments of experiments/extra
    importlib.import_module(f"clustergym.experiments.{paper}")
made = []
for env_id in ENV_IDS:
    env = gym.make(env_id, horizon=3)
    obs, info = env.reset(seed=0)
    env.action_space.seed(0)
    env.step(env.action_space.sample())  # infeasible="repair" (default) makes it feasible
    made.append(env_id)
# every preset shipped in the package (presets/*.json) through the scenarios that read it
presets_dir = os.path.join(os.path.dirname(clustergym.envs.__file__), "traces", "presets")
shipped = sorted(os.listdir(presets_dir))
scen = {"alibaba-v2023": ["clustergym/MultiServerChannel-v0", "clustergym/MultiServerAllocation-v0"],
        "philly": ["clustergym/RingAllReduce-v0"], "tiresias-60": ["clustergym/RingAllReduce-v0"]}
built = []
for name, ids in scen.items():
    for env_id in ids:
        env = gym.make(env_id, scenario=name, horizon=3)
        env.reset(seed=0)
        built.append(f"{env_id}:{name}")
# the hyperparameter files of a family folder and the records of its tuning studies, read from the wheel
from clustergym.learning.hyperparams import family_hyperparams_dir, load_hyperparams, tuning_dir
for env_id in ENV_IDS:
    assert os.path.realpath(family_hyperparams_dir(env_id)).startswith(os.path.realpath(target)), env_id
    assert load_hyperparams("ppo", env_id)["n_envs"] == 4, env_id  # the family's entry over ppo.yml's default
assert os.listdir(tuning_dir("clustergym/ApproxJobs-v0"))
print(json.dumps({"file": clustergym.__file__, "envs": made, "presets": shipped, "built": built,
                  "agents": list_agents()}))
'''


def _copy_repo(dst: str) -> None:
    """The files a clean clone has (tracked, plus new files not ignored), without .venv, runs, builds."""
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=ROOT,
                             capture_output=True, check=True, timeout=60).stdout.decode()
        files = [f for f in out.split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        pytest.fail("git is needed to list the repository's files")
    for f in files:
        src = os.path.join(ROOT, f)
        if not os.path.isfile(src):
            continue  # deleted in the work tree
        os.makedirs(os.path.dirname(os.path.join(dst, f)) or dst, exist_ok=True)
        shutil.copy2(src, os.path.join(dst, f))


def _run(args, **kw):
    r = subprocess.run(args, capture_output=True, text=True, timeout=300, **kw)
    assert r.returncode == 0, f"{' '.join(map(str, args))}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


def test_wheel_builds_passes_twine_and_runs_from_outside_the_repo(tmp_path):
    src, dist, target, outside = (tmp_path / n for n in ("src", "dist", "site", "elsewhere"))
    for d in (src, dist, outside):
        d.mkdir()
    _copy_repo(str(src))
    # Build from the copy (no build isolation: the dev extra's setuptools, offline and fast).
    r = _run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(src)])
    for bad in ("is absent from the `packages` configuration", "deprecated", "SetuptoolsDeprecationWarning"):
        assert bad not in r.stdout + r.stderr, f"setuptools warns: {bad}"
    wheels = list(dist.glob("clustergym-*.whl"))
    assert len(wheels) == 1, wheels
    whl = wheels[0]
    names = zipfile.ZipFile(whl).namelist()
    for need in ("clustergym/py.typed", "clustergym/envs/traces/presets/alibaba-v2023.json",
                 "clustergym/envs/traces/presets/philly.json",
                 "clustergym/envs/traces/presets/tiresias-60.json"):
        assert need in names, need
    # every family folder's hyperparameter files and tuning records, shipped by a package-data pattern
    family_files = [p.relative_to(src / "envs").as_posix() for p in (src / "envs").rglob("*")
                    if p.is_file() and "hyperparams" in p.parts and p.suffix in (".yml", ".json")]
    assert len(family_files) >= 20, family_files
    for rel in family_files:
        assert f"clustergym/envs/{rel}" in names, rel
    assert "clustergym/learning/hyperparams/ppo.yml" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert not any(n.split("/")[0] in ("envs", "agents", "baselines", "tests") for n in names)  # no generic top-level
    meta = zipfile.ZipFile(whl).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: MIT" in meta and "Classifier: Typing :: Typed" in meta

    _run([sys.executable, "-m", "twine", "check", "--strict", str(whl)])

    _run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--no-compile", "--target", str(target),
          str(whl)])
    env = {**os.environ, "PYTHONPATH": str(target), "PYTHONNOUSERSITE": "1"}
    smoke = _run([sys.executable, "-c", SMOKE, str(target)], cwd=outside, env=env)
    got = json.loads(smoke.stdout.strip().splitlines()[-1])
    assert len(got["envs"]) == 4 and len(got["presets"]) == 3, got
    assert "esdp" in got["agents"] and "ogasched" in got["agents"]

    lst = _run([sys.executable, "-m", "clustergym", "list"], cwd=outside, env=env)
    for env_id in got["envs"]:
        assert env_id in lst.stdout
    out = outside / "run"
    _run([sys.executable, "-m", "clustergym", "run", "clustergym/MultiServerChannel-v0", "--agents", "hauf,random",
          "--seeds", "0-2", "--horizon", "20", "--out", str(out), "--no-plots", "--no-progress"], cwd=outside, env=env)
    res = json.loads((out / "results.json").read_text())
    assert res["instances"] == [0, 1, 2] and len(res["runs"]) == 6
    assert not (src / ".venv").exists()


def test_core_install_in_a_fresh_venv_runs_without_torch(tmp_path):
    """``pip install .`` (core only, non-editable) into a fresh venv pulls no
    torch/SB3, imports clustergym, makes and steps every env and runs ``clustergym run`` with a paper
    agent and random. Dependencies come from the package registry (pip's cache makes it ~40 s)."""
    src, venv, outside = tmp_path / "src", tmp_path / "venv", tmp_path / "elsewhere"
    src.mkdir()
    outside.mkdir()
    _copy_repo(str(src))
    _run([sys.executable, "-m", "venv", str(venv)])
    py = str(venv / "bin" / "python")
    # --no-compile: no .pyc for every file of every dependency (two thirds of the install's CPU); the few
    # modules the checks import are compiled when imported.
    r = subprocess.run([py, "-m", "pip", "install", "-q", "--no-compile", "-c", str(src / "constraints.txt"),
                        str(src)],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    listed = _run([py, "-m", "pip", "list", "--format=json"]).stdout
    names = {p["name"].lower() for p in json.loads(listed)}
    assert {"clustergym", "gymnasium", "numpy", "pettingzoo"} <= names
    assert not names & {"torch", "stable-baselines3", "stable_baselines3", "tensorboard", "sb3-contrib"}, names
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    check = ("import sys, gymnasium as gym, clustergym\n"
             "from clustergym.envs import ENV_IDS\n"
             "for e in ENV_IDS:\n"
             "    env = gym.make(e, horizon=5); env.reset(seed=0); env.action_space.seed(0)\n"
             "    env.step(env.action_space.sample())\n"
             "print(clustergym.__file__, 'torch' in sys.modules)\n")
    out = _run([py, "-c", check], cwd=outside, env=env).stdout.split()
    assert out[-1] == "False" and not out[-2].startswith(str(src)) and str(venv) in out[-2]
    _run([str(venv / "bin" / "clustergym"), "run", "clustergym/MultiServerChannel-v0", "--agents", "esdp,random",
          "--seeds", "0-1", "--horizon", "30", "--out", str(outside / "run"), "--no-plots", "--no-progress"],
         cwd=outside, env=env)
    res = json.loads((outside / "run" / "results.json").read_text())
    assert sorted({r["agent"] for r in res["runs"]}) == ["esdp", "random"] and len(res["runs"]) == 4
