"""The runner's progress bar with an ETA weighted by each agent's measured cost.

Agents differ in cost per slot by orders of magnitude (ESDP solves a dynamic programme every slot, ~40 ms;
HAUF takes microseconds), so a rate averaged over slots swings as the sweep moves from one agent to the
next: minutes while the cheap agents run, an hour once ESDP starts. :class:`CostBar` instead measures the
seconds per slot of every agent as its runs go and estimates the time left as
``Σ_agents (slots left of the agent) x (its seconds per slot) / workers``; an agent not measured yet counts
as the slowest one measured. :func:`interleaved` orders the runs round-robin over the agents, so every
agent is measured early (runs depend only on their arguments: the order does not change any result).
"""

from __future__ import annotations

import time
from collections import defaultdict

__all__ = ["CostBar", "interleaved", "fmt_seconds"]


def fmt_seconds(s: float) -> str:
    s = int(round(max(s, 0.0)))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m:02d}:{sec:02d}"


def interleaved(tasks: list) -> list[int]:
    """Indices of ``tasks`` (runner tasks ``(env_id, agent, seed, horizon, kwargs)``) round-robin over the
    agents: the first run of every agent, then the second of every agent, ..."""
    per: dict = defaultdict(list)
    for i, t in enumerate(tasks):
        per[t[1] if isinstance(t, tuple) and len(t) > 1 else None].append(i)
    order: list[int] = []
    k = 0
    while len(order) < len(tasks):
        for idx in per.values():
            if k < len(idx):
                order.append(idx[k])
        k += 1
    return order


class CostBar:
    """A tqdm bar over slots whose ETA (in the postfix) is weighted by each agent's measured seconds per slot.

    ``update(n)`` (slots done in this process by the run :meth:`start_task` named) and :meth:`run_done` (a
    finished run of a worker: its ``wall_s`` and ``steps``) feed the measurements; other attributes are the
    bar's."""

    def __init__(self, bar, tasks: list, workers: int = 1, *, clock=time.perf_counter, every: float = 0.5):
        self.bar, self.workers, self.clock, self.every = bar, max(int(workers), 1), clock, every
        self.left: dict = defaultdict(int)  # agent -> slots not done yet
        self.spent: dict = defaultdict(lambda: [0.0, 0])  # agent -> [seconds, slots] measured
        self.current = None
        self.t = None
        self.label = ""
        self._shown = -1e18
        self.add_tasks(tasks)
        try:  # tqdm's own "<remaining" is the unweighted one: show ours instead
            bar.bar_format = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]"
        except AttributeError:
            pass

    @property
    def total(self):
        return self.bar.total

    @total.setter
    def total(self, value):
        self.bar.total = value

    def __getattr__(self, name):
        return getattr(self.bar, name)

    def add_tasks(self, tasks: list) -> None:
        for t in tasks:
            self.left[t[1]] += int(t[3])

    def start_task(self, task) -> None:
        self.current, self.t = task[1], self.clock()
        self.label = f"{task[1]} seed {task[2]}"
        self._show(force=True)

    def update(self, n: int = 1) -> None:
        now = self.clock()
        if self.current is not None and self.t is not None:
            s = self.spent[self.current]
            s[0] += now - self.t
            s[1] += int(n)
            self.left[self.current] -= int(n)
        self.t = now
        self.bar.update(n)
        self._show()

    def run_done(self, result) -> None:
        s = self.spent[result.agent]
        s[0] += float(result.wall_s)
        s[1] += int(result.steps)
        self.left[result.agent] -= int(result.steps)
        self._show(force=True)

    def eta(self) -> float | None:
        """Seconds left: slots left of each agent x its measured seconds per slot, over the workers."""
        costs = {a: s[0] / s[1] for a, s in self.spent.items() if s[1] > 0}
        if not costs:
            return None
        slowest = max(costs.values())
        return sum(max(n, 0) * costs.get(a, slowest) for a, n in self.left.items()) / self.workers

    def _show(self, force: bool = False) -> None:
        now = self.clock()
        if not force and now - self._shown < self.every:
            return
        self._shown = now
        eta = self.eta()
        text = ", ".join(x for x in (self.label, None if eta is None else f"ETA {fmt_seconds(eta)}") if x)
        try:
            self.bar.set_postfix_str(text, refresh=False)
        except TypeError:
            self.bar.set_postfix_str(text)
