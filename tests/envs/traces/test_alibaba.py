"""Alibaba cluster-trace-gpu-v2023 loader, preset derivation and the alibaba-v2023 scenarios."""

import json
import os

import gymnasium as gym
import numpy as np
import pytest

from clustergym.core.agent import make, public_info
from clustergym.envs.traces.alibaba import derive_preset, load_nodes, load_pods, load_preset
from clustergym.envs.traces.csvread import TraceFormatError
from tests.helpers import ROOT as REPO_ROOT

SHARED = os.path.join(REPO_ROOT, "..", "..", "shared", "traces", "alibaba-gpu-v2023")
if not os.path.isdir(SHARED):  # the worktree layout (/work/wt/<name>) or the main checkout (/work/<repo>)
    SHARED = os.path.join(REPO_ROOT, "..", "shared", "traces", "alibaba-gpu-v2023")

NODES = ("sn,cpu_milli,memory_mib,gpu,model\n"
         "n0,32000,262144,0,\nn1,96000,393216,8,G2\nn2,96000,393216,8,G2\nn3,104000,524288,2,T4\n")
PODS = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
        "p0,12000,16384,1,1000,,LS,Running,0,100,0\n"
        "p1,6000,12288,1,460,T4,LS,Running,3600,100,0\n"
        "p2,6000,12288,1,500,T4,LS,Running,7300,100,0\n"
        "p3,2000,4096,0,0,,BE,Running,7400,100,0\n"
        "p4,64000,262144,8,1000,,LS,Running,10900,100,0\n"
        "p5,2000,4096,0,0,,BE,Running,11000,100,0\n")


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_fixture_files_read_in_published_units(tmp_path):
    nodes = load_nodes(write(tmp_path, "openb_node_list_all_node.csv", NODES))
    assert len(nodes) == 4 and nodes.cpu.tolist() == [32, 96, 96, 104] and nodes.mem[0] == 256.0
    assert nodes.gpu.tolist() == [0, 8, 8, 2] and nodes.model.tolist() == ["", "G2", "G2", "T4"]
    pods = load_pods(write(tmp_path, "pods.csv", PODS))
    assert pods.gpu.tolist() == [1.0, 0.46, 0.5, 0.0, 8.0, 0.0]  # gpu_milli is a share of one GPU
    assert pods.gpu_spec.tolist()[1] == "T4" and pods.creation.tolist()[2] == 7300
    # multigpu50 has neither gpu_spec nor creation_time: they are optional.
    short = load_pods(write(tmp_path, "m.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1000,1024,2,1000\n"))
    assert short.gpu.tolist() == [2.0] and np.isnan(short.creation[0]) and short.gpu_spec[0] == ""


@pytest.mark.parametrize("text, match", [
    ("", r"n\.csv:1: empty file"),
    ("sn,cpu_milli,gpu,model\nn0,32000,0,\n", r"n\.csv:1: missing column 'memory_mib'"),
    ("sn,cpu_milli,memory_mib,gpu,model\nn0,32000,262144,0,\nn1,lots,1,0,\n",
     r"n\.csv:3: column 'cpu_milli' \(column 2\): 'lots' is not a number"),
    ("sn,cpu_milli,memory_mib,gpu,model\nn0,32000,262144,2.5,\n", r"n\.csv:2: column 'gpu' \(column 4\): '2\.5' is not an integer"),
])
def test_malformed_node_files_name_file_line_column(tmp_path, text, match):
    with pytest.raises(TraceFormatError, match=match):
        load_nodes(write(tmp_path, "n.csv", text))


def test_malformed_pod_file_names_line_and_column(tmp_path):
    bad = PODS.replace("p3,2000,4096,0,0,,BE,Running,7400", "p3,2000,4096,0,0,,BE,Running,soon")
    with pytest.raises(TraceFormatError, match=r"p\.csv:5: column 'creation_time' \(column 9\): 'soon' is not a number"):
        load_pods(write(tmp_path, "p.csv", bad))


def test_derive_preset_on_fixture(tmp_path):
    nodes = load_nodes(write(tmp_path, "n.csv", NODES))
    pods = load_pods(write(tmp_path, "p.csv", PODS))
    pre = derive_preset(nodes, pods, num_types=3, num_constrained=1, slot_seconds=3600, window_quantile=0.0)
    assert sum(c["count"] for c in pre["nodes"]) == 4 and len(pre["nodes"]) == 3  # two G2 nodes share a config
    t4 = [t for t in pre["job_types"] if t["gpu_models"] == ["T4"]]
    assert len(t4) == 1 and t4[0]["pods"] == 2 and t4[0]["gpu"] == pytest.approx(0.48)
    # window [0, 11000] s -> 4 one-hour slots; the T4 pods are created in slots 1 and 2.
    assert t4[0]["rho"] == pytest.approx(2 / 4)
    assert sum(t["pods"] for t in pre["job_types"]) == 6
    assert "licence" in pre and "cluster-trace-gpu-v2023" in pre["source"]
    json.dumps(pre)  # serialisable


def test_shipped_preset_records_source_and_licence():
    pre = load_preset()
    assert "cluster-trace-gpu-v2023" in pre["source"] and "research" in pre["licence"]
    assert len(pre["job_types"]) == 10 and sum(c["count"] for c in pre["nodes"]) == 1523
    assert all(0 < t["rho"] <= 1 for t in pre["job_types"])
    assert any(t["gpu_models"] for t in pre["job_types"])  # real service locality


def test_p2_scenario_has_locality_and_runs_without_raw_files():
    env = gym.make("clustergym/MultiServerAllocation-v0", scenario="alibaba-v2023", horizon=30, oracle=True)
    pb = env.unwrapped.problem
    pre = load_preset()
    types = pre["job_types"][:pb.num_ports]
    for l, t in enumerate(types):
        servers = pb.edge_server[pb.edge_port == l]
        assert servers.size >= 1
        if t["needs_gpu"]:
            assert np.all(pb.capacity[servers, 2] > 0)  # GPU types only on GPU nodes
    ag = make("ogasched", family="multiserver-allocation")
    obs, info = env.reset(seed=0)
    ag.reset(pb, seed=0)
    for _ in range(30):
        obs, r, term, trunc, info = env.step(ag.act(obs, public_info(info)))
        assert np.isfinite(r)
    assert "episode_regret" in info["metrics"]


def test_p1_scenario_runs_without_raw_files():
    env = gym.make("clustergym/MultiServerChannel-v0", scenario="alibaba-v2023", horizon=20)
    pb = env.unwrapped.problem
    assert pb.num_device_types == 3 and pb.demand.min() >= 1
    ag = make("esdp", family="multiserver-channel")
    obs, info = env.reset(seed=0)
    ag.reset(pb, seed=0)
    for _ in range(20):
        a = ag.act(obs, public_info(info))
        obs, r, term, trunc, info = env.step(a)
        ag.update(None, a, r, obs, public_info(info))
    assert trunc
    with pytest.raises(ValueError, match="unexpected keyword argument"):
        gym.make("clustergym/MultiServerChannel-v0", scenario="alibaba-v2023", contention=3)


@pytest.mark.skipif(not os.path.isdir(SHARED), reason="real traces are not on this machine")
def test_real_files_and_preset_is_reproducible():
    nodes = load_nodes(os.path.join(SHARED, "openb_node_list_all_node.csv"))
    assert len(nodes) == 1523 and len(load_nodes(os.path.join(SHARED, "openb_node_list_gpu_node.csv"))) == 1213
    pods = load_pods(os.path.join(SHARED, "openb_pod_list_gpuspec33.csv"))
    assert len(pods) == 8152 and len(load_pods(os.path.join(SHARED, "openb_pod_list_default.csv"))) == 8152
    assert len(load_pods(os.path.join(SHARED, "openb_pod_list_multigpu50.csv"))) == 9061
    fresh = derive_preset(nodes, pods)
    shipped = load_preset()
    assert fresh["nodes"] == shipped["nodes"]
    assert [t["pods"] for t in fresh["job_types"]] == [t["pods"] for t in shipped["job_types"]]
    assert np.allclose([t["rho"] for t in fresh["job_types"]], [t["rho"] for t in shipped["job_types"]])
