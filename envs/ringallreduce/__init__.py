"""P3: RingAllReduce-v0 (GADGET paper, gadget.md §IV–VI): fat-tree substrate, ring placement, MILP."""

from clustergym.core.family import EnvEntry, FamilySpec
from clustergym.envs.ringallreduce.types import RingFeedback, RingObservation

__all__ = ["FAMILY", "RingObservation", "RingFeedback"]

_PKG = "clustergym.envs.ringallreduce"

FAMILY = FamilySpec(
    name="ringallreduce",
    number="P3",
    paper="GADGET",
    envs=(EnvEntry(id="clustergym/RingAllReduce-v0", entry_point=f"{_PKG}.env:RingAllReduceEnv",
                   vector_entry_point=f"{_PKG}.vector:RingAllReduceVectorEnv",  # action_mode="ring_size" only
                   check_kwargs={"num_servers": 10, "num_racks": 2, "max_jobs": 8, "arrival_rate": 2.0}),),
    pad_kwargs=("max_racks",),
    action_kwargs=("action_mode",),  # ring sizes placed greedily by the env: same dynamics (tests/experiments/test_drl_benchmark.py)
    sizes=f"{_PKG}.env:instance_sizes",
    scenario=f"{_PKG}.scenario:make_ring_scenario",
    drl_hooks=f"{_PKG}.drl_hooks",  # the compact observation layout (no statistics, no mask, no Box action)
    decoder=f"{_PKG}.decoder",  # the masked autoregressive decoder of ring sizes (clustergym train --net autoregressive)
    experiment="gadget",
    paper_file="gadget.md",
    paper_agent="gadget",
)
