"""Every example runs with a tiny budget."""

import os
import subprocess
import sys

from tests.helpers import ROOT as REPO_ROOT

ROOT = str(REPO_ROOT)


def run(script, *args):
    out = subprocess.run([sys.executable, os.path.join(ROOT, "examples", script), *args],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_quickstart():
    assert "esdp: total reward" in run("quickstart.py", "--horizon", "20")


def test_compare_p1(tmp_path):
    out = run("compare_p1.py", "--horizon", "20", "--seeds", "0", "--agents", "hauf,random", "--workers", "1",
              "--out", str(tmp_path))
    assert "hauf" in out and (tmp_path / "results.json").exists()


def test_train_ppo_then_compare_drl(tmp_path):
    run_dir = tmp_path / "ppo"
    out = run("train_ppo.py", "--timesteps", "64", "--horizon", "16", "--n-envs", "2", "--n-steps", "32",
              "--out", str(run_dir))
    assert "trained PPO" in out and (run_dir / "model.zip").exists()
    out = run("compare_drl.py", "--model", str(run_dir / "model.zip"), "--seeds", "1000", "--horizon", "12",
              "--workers", "1", "--out", str(tmp_path / "cmp"))
    assert "sb3:" in out and "esdp" in out and (tmp_path / "cmp" / "results.json").exists()


def test_train_shared_policy():
    out = run("train_shared_policy.py", "--total-steps", "200", "--batch-steps", "100", "--eval-steps", "50")
    assert "8 port agents" in out and "shared policy" in out and "random" in out
