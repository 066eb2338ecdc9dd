"""Derive the compact P3 presets shipped in ``envs/traces/presets/`` from the public traces.

Usage: ``python benchmarks/derive_ring_presets.py /path/to/traces`` (the folder holding
``philly-pollux/`` and ``tiresias/``). Writes ``philly.json`` and ``tiresias-60.json``.

* ``philly.json``: 2,000 consecutive submissions of the Philly virtual cluster with the most
  multi-GPU jobs (``6c71a0``, 10% multi-GPU), starting at the trace's median submit time: submit offsets (s) and GPU counts.
* ``tiresias-60.json``: the 60 jobs of ``60_job.csv`` and the ``n32g4.csv`` cluster shape.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

from clustergym.envs.traces.philly import load_philly
from clustergym.envs.traces.tiresias import load_tiresias_cluster, load_tiresias_jobs

OUT = os.path.join(os.path.dirname(__file__), "..", "envs", "traces", "presets")


def main(root: str) -> None:
    tr = load_philly(os.path.join(root, "philly-pollux", "philly.csv"), cluster="6c71a0")
    start = int(np.searchsorted(tr.submit, np.median(tr.submit)))
    sl = slice(start, start + 2000)
    submit = tr.submit[sl] - tr.submit[sl][0]
    philly = {
        "source": "Microsoft Philly trace (github.com/msr-fiddle/philly-traces) as prepared by the Pollux "
                  "OSDI'21 artifact (petuum/adaptdl, osdi21-artifact, simulator/philly.csv); virtual cluster "
                  f"6c71a0, 2000 consecutive submissions from index {start} (median submit time)",
        "licence": "CC BY 4.0",
        "submit_seconds": [float(v) for v in submit],
        "num_gpus": [int(v) for v in tr.num_gpus[sl]],
    }
    jobs = load_tiresias_jobs(os.path.join(root, "tiresias", "60_job.csv"))
    cl = load_tiresias_cluster(os.path.join(root, "tiresias", "n32g4.csv"))
    tiresias = {
        "source": "Tiresias simulator (github.com/SymbioticLab/Tiresias, simulator/60_job.csv and n32g4.csv)",
        "licence": "Apache-2.0",
        "submit_seconds": [float(v) for v in jobs.submit],
        "num_gpu": [int(v) for v in jobs.num_gpu],
        "iterations": [int(v) for v in jobs.iterations],
        "duration_seconds": [float(v) for v in jobs.duration],
        "cluster": {"num_switch": cl.num_switch, "num_node_p_switch": cl.num_node_p_switch,
                    "num_gpu_p_node": cl.num_gpu_p_node},
    }
    for name, obj in (("philly.json", philly), ("tiresias-60.json", tiresias)):
        with open(os.path.join(OUT, name), "w") as f:
            json.dump(obj, f, separators=(",", ":"))
        print("wrote", os.path.join(OUT, name))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/traces")
