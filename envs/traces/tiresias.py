"""Tiresias simulator traces (SymbioticLab/Tiresias, Apache-2.0, ``simulator/``).

* job files such as ``60_job.csv``: ``job_id, num_gpu, submit_time, iterations, model_name,
  duration, interval`` (times in seconds);
* cluster files such as ``n32g4.csv``: ``num_switch, num_node_p_switch, num_gpu_p_node,
  num_cpu_p_node, mem_p_node`` (one row).

Users pass paths; nothing downloads. Malformed files raise ``TraceFormatError`` naming file, line
and column (shared reader ``csvread``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from clustergym.envs.traces.csvread import Column, TraceFormatError, read_csv

__all__ = ["TiresiasJobs", "TiresiasCluster", "load_tiresias_jobs", "load_tiresias_cluster"]


@dataclass(frozen=True)
class TiresiasJobs:
    """Jobs sorted by submit time (seconds from the first submission)."""

    job_id: np.ndarray  # (N,) int
    num_gpu: np.ndarray  # (N,) int GPUs requested
    submit: np.ndarray  # (N,) float seconds since the first job
    iterations: np.ndarray  # (N,) int training iterations
    duration: np.ndarray  # (N,) float seconds of the job when run with num_gpu GPUs
    model_name: np.ndarray  # (N,) object str
    source: str

    def __len__(self) -> int:
        return int(self.submit.shape[0])


@dataclass(frozen=True)
class TiresiasCluster:
    num_switch: int  # racks (one ToR switch each)
    num_node_p_switch: int  # servers per rack
    num_gpu_p_node: int  # GPUs per server
    source: str


def load_tiresias_jobs(path) -> TiresiasJobs:
    """Read a Tiresias job file (e.g. ``60_job.csv``)."""
    cols = read_csv(path, [Column("job_id", "int", lo=0), Column("num_gpu", "int", lo=1), Column("submit_time", "float", lo=0),
                           Column("iterations", "int", lo=1), Column("duration", "float", lo=0, lo_open=True),
                           Column("model_name", "str", required=False, default="")])
    for name in ("num_gpu", "iterations", "duration"):
        bad = np.flatnonzero(cols[name] <= 0)
        if bad.size:
            raise TraceFormatError(f"{path}:{int(bad[0]) + 2}: column {name!r}: {cols[name][bad[0]]!r} is not positive")
    n = cols["job_id"].shape[0]
    model = cols.get("model_name", np.full(n, "", dtype=object))
    order = np.argsort(cols["submit_time"], kind="stable")
    submit = cols["submit_time"][order]
    return TiresiasJobs(job_id=cols["job_id"][order], num_gpu=cols["num_gpu"][order], submit=submit - submit[0],
                        iterations=cols["iterations"][order], duration=cols["duration"][order],
                        model_name=model[order], source=str(path))


def load_tiresias_cluster(path) -> TiresiasCluster:
    """Read a Tiresias cluster file (e.g. ``n32g4.csv``); the first row is used."""
    cols = read_csv(path, [Column("num_switch", "int", lo=1), Column("num_node_p_switch", "int", lo=1),
                           Column("num_gpu_p_node", "int", lo=1)], max_rows=1)
    vals = {k: int(v[0]) for k, v in cols.items()}
    for k, v in vals.items():
        if v <= 0:
            raise TraceFormatError(f"{path}:2: column {k!r}: {v} is not positive")
    return TiresiasCluster(source=str(path), **vals)
