"""The metrics contract: what each key of ``info["metrics"]`` means, declared by the env.

Every env declares the keys its ``step`` may put in ``info["metrics"]`` as a class attribute
``metrics_spec: dict[str, Metric]`` (the native vector envs reuse their single env's). The runner
(:class:`MetricsAccumulator`, used by :func:`clustergym.runner.episode.run_episode`) reads the declaration to
decide how a key enters a run's ``metrics`` in results.json, instead of guessing from the key's name:

==============  =====================================================  ===================================
kind            the value at step t is                                 results.json ``runs[].metrics``
==============  =====================================================  ===================================
``SLOT``        a quantity of slot t alone (e.g. P3 ``utility``,       ``mean_<key>`` (average over the
                ``repaired``, ``regret``)                              slots); with ``total=True`` also
                                                                       ``total_<key>`` (the sum)
``CUMULATIVE``  a running total since ``reset`` (e.g. P4 ``utility``,  ``total_<key>`` = the value at the
                P1 ``cum_regret``): the last value is the episode's    last slot (``total=True``, the
                                                                       default for this kind)
``EPISODE``     an ``episode_<key>`` summary, present only at the      ``episode_<key>`` (the last slot's
                last slot (terminated or truncated)                    value)
==============  =====================================================  ===================================

``total_<key>`` therefore always means the episode total of the quantity, summed over the slots or read
from the running total. The three contract keys of the env conventions (docs/architecture.md) have run-level fields of their own:
``regret`` (per slot, summed into ``runs[].regret`` and the cumulative-regret curve),
``oracle_reward`` (summed into ``oracle_total``) and ``expected_reward`` (summed into ``value_total``);
``episode_regret``, ``episode_bound`` and ``episode_best_static`` feed ``regret`` and ``bound_total``.

Compatibility (results.json only gains fields): before this contract the runner averaged every scalar
key except ``regret``, ``cum_regret`` and ``oracle_reward`` as ``mean_<key>``; it still does, so a
``mean_<key>`` of a CUMULATIVE or EPISODE key (e.g. P4's ``mean_utility``, the mean of its running
total) is kept as it was. Read ``total_<key>`` / ``episode_<key>`` for those keys. Keys an env emits
without declaring them (a user's env without ``metrics_spec``) are treated as SLOT values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

__all__ = ["SLOT", "CUMULATIVE", "EPISODE", "KINDS", "Metric", "MetricsAccumulator", "metrics_spec_of",
           "check_spec", "reported_as"]

SLOT = "slot"
CUMULATIVE = "cumulative"
EPISODE = "episode"
KINDS = (SLOT, CUMULATIVE, EPISODE)
# Keys the runner summarises in run-level fields of their own (regret, oracle_total); no mean_<key>.
RUN_FIELD_KEYS = ("regret", "cum_regret", "oracle_reward")


@dataclass(frozen=True)
class Metric:
    """One ``info["metrics"]`` key.

    Attributes:
        kind: ``SLOT``, ``CUMULATIVE`` or ``EPISODE`` (module docstring).
        doc: what it measures, with its unit and the paper's equation.
        total: report ``total_<key>`` (SLOT: the sum over slots; CUMULATIVE: the last value).
            ``None``: the kind's default (False for SLOT, True for CUMULATIVE, unused for EPISODE).
        shape: ``"()"`` for a scalar, else the array's shape in words (arrays are not aggregated).
    """

    kind: str
    doc: str
    total: bool | None = None
    shape: str = "()"

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"Metric kind={self.kind!r} is invalid: expected one of {', '.join(KINDS)}")

    @property
    def reports_total(self) -> bool:
        if self.kind == EPISODE:
            return False
        return (self.kind == CUMULATIVE) if self.total is None else bool(self.total)


def metrics_spec_of(env: Any) -> Mapping[str, Metric]:
    """The declaration of ``env`` (a single env, a vector env or a wrapper around either); ``{}`` if none."""
    spec = getattr(getattr(env, "unwrapped", env), "metrics_spec", None)
    return spec if spec is not None else {}


def check_spec(spec: Mapping[str, Metric]) -> None:
    """ValueError if a declaration contradicts the contract (EPISODE keys are ``episode_*`` and vice versa)."""
    for k, m in spec.items():
        if not isinstance(m, Metric):
            raise ValueError(f"metrics_spec[{k!r}] is {m!r}, expected a clustergym.core.metrics.Metric")
        if (m.kind == EPISODE) != k.startswith("episode_"):
            raise ValueError(f"metrics_spec[{k!r}]: episode_* keys and only they are of kind EPISODE")


def reported_as(key: str, m: Metric) -> str:
    """Where a declared key ends up in results.json ``runs[]`` (markdown; the docs pages list it)."""
    if m.shape != "()":
        return "not aggregated (an array)"
    if key == "regret":
        return "`regret` (Σ over slots) and the cumulative-regret curve; no `mean_regret`"
    if key == "oracle_reward":
        return "`oracle_total` (Σ over slots), the score's bound"
    if key == "cum_regret":
        return "nothing (`regret` holds the total)"
    if m.kind == EPISODE:
        return f"`metrics.{key}`" + {"episode_regret": " and `regret`",
                                      "episode_bound": " and `bound_total`",
                                      "episode_best_static": " and `bound_total`"}.get(key, "")
    if m.kind == CUMULATIVE:
        out = f"`metrics.total_{key}` (last value)" if m.reports_total else ""
        return out + f"{'; ' if out else ''}`metrics.mean_{key}` is the mean of the running total (kept as it was)"
    out = f"`metrics.mean_{key}`" + (f", `metrics.total_{key}` (Σ)" if m.reports_total else "")
    return out + (" and `value_total` (Σ), the score's V" if key == "expected_reward" else "")


def _scalar(v: Any) -> float | None:
    if isinstance(v, (bool, np.bool_)):
        return float(v)
    if isinstance(v, (int, float, np.integer, np.floating)):
        return float(v)
    return None


class MetricsAccumulator:
    """Aggregates one episode's ``info["metrics"]`` dicts according to the env's declaration.

    ``add(m)`` once per step (cheap: one dict pass); ``summary(steps)`` gives the run's ``metrics``.
    """

    def __init__(self, spec: Mapping[str, Metric] | None = None):
        self.spec = dict(spec or {})
        check_spec(self.spec)
        self.sums: dict[str, float] = {}  # every scalar key except RUN_FIELD_KEYS (the runner's legacy means)
        self.last: dict = {}  # the last step's metrics

    def add(self, m: dict) -> None:
        sums = self.sums
        for k, v in m.items():
            f = _scalar(v)
            if f is not None and k not in RUN_FIELD_KEYS:
                sums[k] = sums.get(k, 0.0) + f
        self.last = m

    def kind(self, key: str) -> str:
        """The declared kind of ``key``; an undeclared key is EPISODE if named ``episode_*``, else SLOT."""
        m = self.spec.get(key)
        if m is not None:
            return m.kind
        return EPISODE if key.startswith("episode_") else SLOT

    def reports_total(self, key: str) -> bool:
        m = self.spec.get(key)
        return (key == "repaired") if m is None else m.reports_total  # undeclared: the runner's old rule

    def summary(self, steps: int) -> dict:
        """The run's ``metrics``: ``mean_<key>`` of every summed scalar (compatibility, module docstring),
        ``total_<key>`` of SLOT keys declared with ``total=True``, the ``episode_<key>`` scalars of the last
        step, and ``total_<key>`` (the last value) of CUMULATIVE keys. Keys in that order, so the fields
        results.json had before the contract keep their order."""
        out = {f"mean_{k}": v / max(steps, 1) for k, v in self.sums.items()}
        for k, v in self.sums.items():
            if self.kind(k) == SLOT and self.reports_total(k):
                out[f"total_{k}"] = v
        last = [(k, _scalar(v)) for k, v in self.last.items()]
        for k, f in last:
            if f is not None and self.kind(k) == EPISODE:
                out[k] = f
        for k, f in last:
            if f is not None and self.kind(k) == CUMULATIVE and self.reports_total(k):
                out[f"total_{k}"] = f
        return out
