"""The leaderboard page (docs/leaderboard.md) written from the stored scores alone (docs/data/leaderboard/*.json) and the
learning-curve CSVs (docs/leaderboard/curves).

:func:`render` is a pure function of those files, so the page can be checked against them
(``tests/experiments/test_leaderboard.py``) and regenerated without running anything
(``python -m clustergym.experiments.leaderboard --page-only``). The scores themselves come from
:mod:`clustergym.experiments.leaderboard`.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence

from clustergym.core.stats import mean_ci

__all__ = ["HEADER", "render", "read_boards", "board_rows", "row_line"]

HEADER = """# Leaderboard: every shipped agent, per env

Where does each agent that ships with clustergym stand on each env, on one scale? Every row below is the
agent's **normalised score** ([Evaluation](evaluation.md#normalised-score)) on held-out instances:
0 is `random` on the same instance and seed, 1 is the env's oracle or bound (named in each section).
The **headroom** is 1 − score, the share of the gap between random and the bound that the agent leaves;
it can be negative where an agent beats the bound (P2's bound is the best *static* allocation in hindsight,
which an online policy can exceed; P1's, P3's and P4's hold for every policy, P4's in expectation).
Intervals are 95% t-intervals over instances. **mean V** is the agent's evaluated total (P1: the expected
utility of its decisions; the others: the total reward) and **V / B** its share of the bound, both means over
instances. The rows are the paper's policy with the readings its
reproduction compares (`name[option=value]`), every registered baseline of the family, the pretrained model
(`sb3:pretrained/<EnvName>`, [DRL](drl.md)) and `random`. P3 has a second board, on its `gpu-short` scenario
(the cluster short of GPUs where its learners are compared, [DRL](drl.md)): its pretrained model is
`sb3:pretrained/RingAllReduce-v0-gpu-short`, and the baselines with the options that lead there (SRPT with a row
worth, SRPT and LAS with fixed sizes) are rows of their own. No evaluation instance is one the pretrained models
trained on (pool 1000-1099) or were selected on (validation instances 900-999): `trained_on` is false on
every `sb3:` run.

Regenerate (the runs go through `clustergym.evaluate`, the runner of `clustergym run`, with a run store in
`runs/leaderboard/store`, so an interrupted sweep resumes where it stopped); each section gives the wall time
of the command that last wrote it (runs already in the store are reused, not run again):

```bash
make leaderboard                                              # every board: runs, then docs/data/leaderboard and this page
.venv/bin/python -m clustergym.experiments.leaderboard --page-only   # this page from the stored scores only
```

## Adding a row

Score your agent exactly as the board does: the same env, horizon, env settings, instances and seed, with
`random` among the agents (the score's zero), through `clustergym run`; then print its row:

```bash
clustergym run clustergym/MultiServerChannel-v0 --agents examples/my_agent.py:MyAgent,random \\
    --instances 0-14 --seeds 0 --out runs/mine
.venv/bin/python -m clustergym.experiments.leaderboard --row runs/mine
```

`--row` checks that the folder's env, horizon, env settings and instances are the board's (each section
states them; the horizons are the envs' defaults) and prints the line to paste into the
table, or says which setting differs. A trained model is scored the same way: `--agents sb3:DIR/model.zip,random`.

## Learning curves

Each pretrained model's training curve is a CSV file beside its section (`steps, episode, return`: the
training episodes' returns in the order they ended, with the env steps trained when each ended), so your own
run (`clustergym train` writes the same Monitor returns into `OUT/monitor/`) can be plotted against it.
"""


def read_boards(folder: str) -> list[dict]:
    """Every ``<board name>.json`` of ``folder``, in the order of their ``order`` field."""
    boards = []
    for name in sorted(os.listdir(folder)):
        if name.endswith(".json"):
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                boards.append(json.load(f))
    return sorted(boards, key=lambda b: (b.get("order", 0), b["env_id"]))


def _fmt(x: float, digits: int = 3) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{round(x, digits) + 0.0:.{digits}f}"  # no "-0.000"


def row_line(agent: str, kind: str, scores: Mapping, values: Mapping, bounds: Mapping) -> tuple[float, str]:
    """(mean score, the markdown row) of one agent: score [95% interval], headroom [interval], mean V, V / B. A
    run's score is undefined (absent) where its bound is not above random's value: the score is then over the
    other instances, saying how many, or "undefined" on every instance."""
    keys = sorted(values, key=int)
    s = mean_ci([scores[k] for k in keys if k in scores])
    head = f"{_fmt(1 - s.mean)} [{_fmt(1 - s.high)}, {_fmt(1 - s.low)}]" if s.n > 1 else _fmt(1 - s.mean)
    score = f"{_fmt(s.mean)} [{_fmt(s.low)}, {_fmt(s.high)}]" if s.n > 1 else _fmt(s.mean)
    if s.n == 0:
        score = head = "undefined (B ≤ V of random on every instance)"
    elif s.n < len(keys):
        score += f" ({s.n} of {len(keys)} instances; B ≤ V of random on the others)"
    v = [values[k] for k in keys]
    share = [values[k] / bounds[k] for k in keys if bounds.get(k)]
    mean_v = sum(v) / len(v)
    of_b = f"{100 * sum(share) / len(share):.1f}%" if share else "n/a"
    return s.mean, f"| `{agent}` | {kind} | {score} | {head} | {mean_v:,.1f} | {of_b} |"


def board_rows(board: Mapping) -> list[str]:
    """The table of one env, best mean score first."""
    rows = [row_line(a["agent"], a["kind"], a["scores"], a["values"], a.get("bounds", board["bounds"]))
            for a in board["agents"]]
    rows.sort(key=lambda r: -r[0] if math.isfinite(r[0]) else math.inf)
    return ["| agent | kind | score [95% CI] | headroom [95% CI] | mean V | V / B |",
            "|---|---|---|---|---|---|", *[r[1] for r in rows]]


def _section(board: Mapping, curves_dir: str) -> list[str]:
    name = board.get("name") or board["env_id"].split("/")[-1]  # the env's, or with the board's suffix
    kw = board["env_kwargs"]
    setting = (f"horizon {board['horizon']} slots"
               + (" (the env's default)" if board["horizon"] == board["default_horizon"]
                  else f" (the env's default is {board['default_horizon']}; {board['horizon_note']})")
               + f", instances {_span(board['instances'])}, seed {_span(board['seeds'])}"
               + (", env settings " + ", ".join(f"`{k}={json.dumps(v)}`" for k, v in kw.items()) if kw else ""))
    out = [f"## {board['number']} {name}", "",
           f"**Bound (score 1)**: {board['bound']}.", "",
           f"**Setting**: {setting}; scored with `clustergym run {board['env_id']} --agents ...,random "
           f"--instances {_span(board['instances'])} --seeds {_span(board['seeds'])}"
           + (f" --horizon {board['horizon']}" if board["horizon"] != board["default_horizon"] else "")
           + "".join(f" --set {k}={json.dumps(v)}" for k, v in kw.items()) + "`.", "",
           *board_rows(board), ""]
    curve = os.path.join(curves_dir, f"{name}.csv")
    if os.path.exists(curve):
        out += [f"Learning curve of `sb3:pretrained/{name}`: [{name}.csv](leaderboard/curves/{name}.csv), "
                f"{board.get('curve_note', 'its training episodes')}.", ""]
    else:
        out += [f"Learning curve of `sb3:pretrained/{name}`: not stored ({board.get('curve_note', 'no training log')}).",
                ""]
    wall = f", {board['wall_s']:,.0f} s of wall time" if board.get("wall_s") is not None else ""
    out += [f"*{board['command']}* at commit `{board['commit']}`, {board['date']}{wall}.", ""]
    return out


def _span(xs: Sequence[int]) -> str:
    xs = list(xs)
    if len(xs) > 2 and xs == list(range(xs[0], xs[-1] + 1)):
        return f"{xs[0]}-{xs[-1]}"
    return ",".join(str(x) for x in xs)


def render(folder: str, curves: str) -> str:
    """The whole page from the boards in ``folder`` and the learning-curve CSVs in ``curves``
    (docs/leaderboard/curves: shipped with the site, so the page links them)."""
    lines = [HEADER]
    for board in read_boards(folder):
        lines += _section(board, curves)
    return "\n".join(lines).rstrip("\n") + "\n"
