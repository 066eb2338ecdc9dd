"""P1 MultiServerChannel (ESDP paper)."""

from clustergym.core.family import EnvEntry, FamilySpec
from clustergym.envs.multiserver.channel.types import ChannelFeedback, ChannelObservation

__all__ = ["FAMILY", "ChannelObservation", "ChannelFeedback"]

_PKG = "clustergym.envs.multiserver.channel"

FAMILY = FamilySpec(
    name="multiserver-channel",
    number="P1",
    paper="ESDP",
    envs=(EnvEntry(id="clustergym/MultiServerChannel-v0",
                   entry_point=f"{_PKG}.env:MultiServerChannelEnv",
                   vector_entry_point=f"{_PKG}.vector:MultiServerChannelVectorEnv",
                   parallel_entry_point=f"{_PKG}.parallel:parallel_env",  # ports as agents
                   check_kwargs={"num_servers": 12}),
          ),
    pad_kwargs=("max_edges",),
    sizes=f"{_PKG}.env:instance_sizes",
    scenario=f"{_PKG}.scenario:make_channel_scenario",
    drl_hooks=f"{_PKG}.drl_hooks",
    entity=f"{_PKG}.entity",  # the per-entity network (clustergym train --net entity)
    experiment="esdp",
    paper_file="esdp.md",
    paper_agent="esdp",
)
