"""Long jobs say what they expect to take before they start: `clustergym train` (from the step rate of its first
iteration, updates included), `clustergym replay` (from a timed warm-up on envs of its own) and a full
`clustergym reproduce` (the total of its plan)."""

import re

import numpy as np

from clustergym.cli.main import main
from clustergym.core.eta import describe_duration
from clustergym.learning.estimate import training_estimate

P1 = "clustergym/MultiServerChannel-v0"


def test_durations_read_at_a_glance():
    assert [describe_duration(s) for s in (0.2, 45, 89.4, 600, 5399, 5400, 10080)] == [
        "1 s", "45 s", "89 s", "10 min", "90 min", "1.5 h", "2.8 h"]
    assert describe_duration(float("nan")) == describe_duration(-1) == "unknown"


def test_training_estimate_is_the_time_so_far_plus_the_rest_at_the_measured_rate():
    # 100 steps in 10 s: 10 steps/s; 900 steps left: 90 s, after 12 s so far
    line = training_estimate(1000, 100, 12.0, 100, 10.0)
    assert "about 2 min for 1,000 steps" in line and "10 steps/s over the first 100 steps" in line
    assert "about 40 s" in training_estimate(1000, 500, 20.0, 500, 20.0)  # 20 s + 500 / 25


def test_train_prints_its_expected_time_after_the_first_iteration(tmp_path, capsys):
    out = tmp_path / "m"
    assert main(["train", P1, "--algo", "ppo", "--timesteps", "128", "--horizon", "10", "--n-envs", "2",
                 "--hp", "n_steps=32", "--hp", "batch_size=32", "--no-progress", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    lines = [ln for ln in text.splitlines() if ln.startswith("expected training time")]
    assert len(lines) == 1, text
    assert re.search(r"about \d+ (s|min) for 128 steps \(measured: [\d,]+ steps/s over the first 64 steps", lines[0])
    assert text.index(lines[0]) < text.index("trained ppo on")


def test_replay_prints_its_expected_time_before_the_episodes_and_changes_nothing(tmp_path, capsys, monkeypatch):
    import imageio.v3 as iio

    import clustergym.runner.replay as rp

    seen = []
    real = rp._animation

    def animation(*a, **k):
        seen.append(capsys.readouterr().out)  # what was printed before the first episode
        return real(*a, **k)

    monkeypatch.setattr(rp, "_animation", animation)
    out = tmp_path / "a.gif"
    assert main(["replay", P1, "--agents", "lcf,hauf", "--horizon", "12", "--no-progress", "--out", str(out)]) == 0
    assert re.fullmatch(r"expected replay time: about \d+ (s|min) \(2 episode\(s\) of 12 slots, each run twice, "
                        r"26 frames drawn; timed on the first 10 slot\(s\) and one frame\)\n", seen[0]), seen
    plain = tmp_path / "b.gif"
    rp.replay(P1, ["lcf", "hauf"], str(plain), 0, horizon=12)  # no warm-up: the same animation
    assert np.array_equal(iio.imread(out), iio.imread(plain))
    seen.clear()  # a replay as short as the warm-up is not timed: it says so
    assert main(["replay", P1, "--agents", "lcf", "--horizon", "3", "--no-progress",
                 "--out", str(tmp_path / "c.gif")]) == 0
    assert seen[0] == ("expected replay time: not estimated for 1 episode(s) of 3 slot(s) (a short replay: timing "
                       "it would take as long as the replay)\n"), seen


def test_full_reproduce_prints_its_plans_total_first(tmp_path, capsys):
    out = tmp_path / "r"
    args = ["reproduce", "gadget", "--tiny", "--instances", "0", "--workers", "1", "--no-progress", "--out", str(out)]
    assert main(args) == 0
    text = capsys.readouterr().out
    first = text.splitlines()[:2]
    assert first[0].startswith("estimating the time"), text[:300]
    m = re.match(r"expected: ([\d,]+) of ([\d,]+) runs to run \(0 stored\), about [\d.]+ CPU-hours, \d+ (s|min) on 1 "
                 r"worker\(s\)", first[1])
    assert m and m[1] == m[2], first
    total = int(m[1].replace(",", ""))  # every run the plan counted, and no other, ran
    assert re.search(rf"run store \S+: 0 run\(s\) reused, {total} run\(s\) computed", text)
    assert main([*args, "--overwrite"]) == 0  # again: every run is in the store now
    assert capsys.readouterr().out.splitlines()[1].startswith(f"expected: 0 of {total:,} runs to run ({total:,} stored)")


def test_quick_reproduce_runs_no_plan(tmp_path, capsys, monkeypatch):
    import clustergym.experiments as ex

    monkeypatch.setattr(ex, "plan", lambda *a, **k: (_ for _ in ()).throw(AssertionError("planned")))
    monkeypatch.setattr(ex, "reproduce", lambda *a, **k: [])
    assert main(["reproduce", "gadget", "--quick", "--tiny", "--no-progress", "--out", str(tmp_path / "q")]) == 0
    assert "expected:" not in capsys.readouterr().out


def test_a_full_plan_in_a_fresh_folder_counts_the_projects_measured_costs(tmp_path, capsys, monkeypatch):
    """`reproduce --plan` (full mode) with an empty store estimates from the unit costs the project measured, as the
    full reproduction's own first line does; without them every run would be unmeasured and the total 0 hours."""
    import clustergym.experiments as ex

    args = ["reproduce", "opm", "--plan", "--instances", "0", "--out", str(tmp_path / "p")]
    assert main(args) == 0
    total = capsys.readouterr().out.strip().splitlines()[-1]
    m = re.match(r"\*\*Total\*\*: ([\d,]+) runs, 0 stored, \1 to run, about ([\d.]+) CPU-hours left", total)
    assert m and float(m[2]) > 0 and "unmeasured" not in total and "not counted" not in total, total
    monkeypatch.setattr(ex, "SHIPPED_COSTS", str(tmp_path / "none.json"))
    assert main(args) == 0
    total = capsys.readouterr().out.strip().splitlines()[-1]
    assert "about 0.00 CPU-hours left" in total and f"{m[1].replace(',', '')} run(s)" in total and "not counted" in total
