"""P2 MultiServerAllocation (OGASched paper)."""

from clustergym.core.family import EnvEntry, FamilySpec
from clustergym.envs.multiserver.allocation.types import AllocationFeedback, AllocationObservation

__all__ = ["FAMILY", "AllocationObservation", "AllocationFeedback"]

_PKG = "clustergym.envs.multiserver.allocation"

FAMILY = FamilySpec(
    name="multiserver-allocation",
    number="P2",
    paper="OGASched",
    envs=(EnvEntry(id="clustergym/MultiServerAllocation-v0",
                   entry_point=f"{_PKG}.env:MultiServerAllocationEnv",
                   vector_entry_point=f"{_PKG}.vector:MultiServerAllocationVectorEnv",
                   parallel_entry_point=f"{_PKG}.parallel:parallel_env",  # servers as agents
                   check_kwargs={"num_servers": 16}),
          ),
    pad_kwargs=("max_edges",),
    action_kwargs=("action_mode",),  # port modes completed by the env's fill rule: same dynamics (allocation/actions.py)
    sizes=f"{_PKG}.env:instance_sizes",
    scenario=f"{_PKG}.scenario:make_allocation_scenario",
    drl_hooks=f"{_PKG}.drl_hooks",
    entity=f"{_PKG}.entity",  # the per-entity network (clustergym train --net entity)
    experiment="ogasched",
    paper_file="ogasched.md",
    paper_agent="ogasched",
)
