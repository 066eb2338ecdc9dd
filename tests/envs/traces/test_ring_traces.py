"""Tiresias loader (fixtures made here) and the real files when present."""

import os

import numpy as np
import pytest

from clustergym.envs.traces.csvread import TraceFormatError
from clustergym.envs.traces.tiresias import load_tiresias_cluster, load_tiresias_jobs
from tests.helpers import ROOT as REPO_ROOT

REAL = os.path.join(REPO_ROOT, "..", "..", "shared", "traces", "tiresias")
if not os.path.isdir(REAL):  # the checkout beside shared/ (dev tree, CI clone)
    REAL = os.path.join(REPO_ROOT, "..", "shared", "traces", "tiresias")


def test_jobs_fixture(tmp_path):
    p = tmp_path / "jobs.csv"
    p.write_text("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
                 "0,1,30,606,vgg19,164,30\n1,8,0,133,vgg11,147,23\n\n2,2,53,157,inception4,127,26\n")
    j = load_tiresias_jobs(p)
    assert len(j) == 3 and j.job_id.tolist() == [1, 0, 2] and j.submit.tolist() == [0.0, 30.0, 53.0]
    assert j.num_gpu.tolist() == [8, 1, 2] and j.model_name[0] == "vgg11"


@pytest.mark.parametrize("body,pattern", [
    ("job_id,num_gpu,submit_time,iterations,duration\n0,x,0,10,5\n", r"jobs\.csv:2: column 'num_gpu'"),
    ("job_id,num_gpu,iterations,duration\n0,1,10,5\n", r"jobs\.csv:1: missing column 'submit_time'"),
    ("job_id,num_gpu,submit_time,iterations,duration\n0,1,0,10,5\n1,0,3,10,5\n", r"jobs\.csv:3: column 'num_gpu'"),
    ("", r"jobs\.csv:1: empty file"),
])
def test_jobs_malformed(tmp_path, body, pattern):
    p = tmp_path / "jobs.csv"
    p.write_text(body)
    with pytest.raises(TraceFormatError, match=pattern):
        load_tiresias_jobs(p)


def test_cluster_fixture(tmp_path):
    p = tmp_path / "c.csv"
    p.write_text("num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node\n2,16,8,128,256\n")
    c = load_tiresias_cluster(p)
    assert (c.num_switch, c.num_node_p_switch, c.num_gpu_p_node) == (2, 16, 8)
    p.write_text("num_switch,num_node_p_switch,num_gpu_p_node\n2,zero,8\n")
    with pytest.raises(TraceFormatError, match=r"c\.csv:2: column 'num_node_p_switch'"):
        load_tiresias_cluster(p)


@pytest.mark.skipif(not os.path.isdir(REAL), reason="real traces not present")
def test_real_tiresias_files_match_the_shipped_preset():
    import json

    j = load_tiresias_jobs(os.path.join(REAL, "60_job.csv"))
    c = load_tiresias_cluster(os.path.join(REAL, "n32g4.csv"))
    assert len(j) == 60 and (c.num_switch, c.num_node_p_switch, c.num_gpu_p_node) == (1, 32, 4)
    pre = os.path.join(REPO_ROOT, "envs", "traces", "presets", "tiresias-60.json")
    with open(pre) as f:
        d = json.load(f)
    assert d["num_gpu"] == j.num_gpu.tolist() and np.allclose(d["submit_seconds"], j.submit)
