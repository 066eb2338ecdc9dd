"""Philly-derived traces as prepared by the Pollux OSDI'21 artifact.

Data: Microsoft Philly trace (msr-fiddle/philly-traces, CC BY 4.0) as prepared in
petuum/adaptdl (branch ``osdi21-artifact``, ``simulator/``). Users pass paths; nothing downloads.

* ``philly.csv``: ``timestamp`` (submit date-time), ``duration`` (s), ``num_gpus``, ``gpu_time``,
  ``cluster``.
* ``workload-*.csv``: ``name``, ``time`` (submit second in the workload), ``application``,
  ``num_replicas``, ``batch_size``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from clustergym.envs.traces.csvread import Column, read_csv

__all__ = ["JobTrace", "load_philly", "load_pollux_workload"]


@dataclass(frozen=True)
class JobTrace:
    """Jobs sorted by submit time; times in seconds from the first submission."""

    submit: np.ndarray  # (N,) float, seconds since the first job
    duration: np.ndarray  # (N,) float, seconds (NaN where the format has none)
    num_gpus: np.ndarray  # (N,) int, GPUs (replicas) requested
    source: str

    def __len__(self) -> int:
        return int(self.submit.shape[0])

    def slots(self, slot_seconds: float) -> np.ndarray:
        """(N,) int arrival slot of each job for slots of ``slot_seconds``."""
        return np.floor(self.submit / float(slot_seconds)).astype(np.int64)


def _sorted(submit, duration, gpus, source) -> JobTrace:
    order = np.argsort(submit, kind="stable")
    submit = submit[order] - submit[order][0]
    return JobTrace(submit=submit, duration=duration[order], num_gpus=gpus[order], source=source)


def load_philly(path, *, cluster: str | None = None, max_rows: int | None = None) -> JobTrace:
    """Read ``philly.csv``; optionally keep one virtual cluster (the ``cluster`` column)."""
    cols = read_csv(path, [Column("timestamp", "datetime"), Column("duration", "float", lo=0), Column("num_gpus", "int", lo=1),
                           Column("cluster", "str", required=False, default="")], max_rows=max_rows)
    keep = np.ones(cols["timestamp"].shape[0], dtype=bool)
    if cluster is not None:
        keep = cols["cluster"] == cluster
        if not keep.any():
            raise ValueError(f"cluster={cluster!r} does not occur in {path}")
    return _sorted(cols["timestamp"][keep], cols["duration"][keep], cols["num_gpus"][keep], str(path))


def load_pollux_workload(path) -> JobTrace:
    """Read a Pollux ``workload-*.csv`` (240 jobs): submit ``time`` and ``num_replicas``."""
    cols = read_csv(path, [Column("time", "float", lo=0), Column("num_replicas", "int", lo=1)])
    n = cols["time"].shape[0]
    return _sorted(cols["time"], np.full(n, np.nan), cols["num_replicas"], str(path))
