"""clustergym environments. Importing ``clustergym`` registers every id below."""

from gymnasium.envs.registration import register, registry

_ENVS = [
    dict(id="clustergym/MultiServerChannel-v0",
         entry_point="clustergym.envs.multiserver.channel.env:MultiServerChannelEnv",
         vector_entry_point="clustergym.envs.multiserver.channel.vector:MultiServerChannelVectorEnv",
         kwargs={}),
    dict(id="clustergym/MultiServerAllocation-v0",
         entry_point="clustergym.envs.multiserver.allocation.env:MultiServerAllocationEnv",
         vector_entry_point="clustergym.envs.multiserver.allocation.vector:MultiServerAllocationVectorEnv",
         kwargs={}),
    dict(id="clustergym/RingAllReduce-v0",
         entry_point="clustergym.envs.ringallreduce.env:RingAllReduceEnv",
         kwargs={}),
    dict(id="clustergym/ApproxJobs-v0",
         entry_point="clustergym.envs.approxjobs.env:ApproxJobsEnv",
         kwargs={}),
]

for _spec in _ENVS:
    if _spec["id"] not in registry:
        register(**_spec)

ENV_IDS = tuple(s["id"] for s in _ENVS)
