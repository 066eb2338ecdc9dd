"""Classic heuristics the papers compare against, plus feasible random agents."""

from clustergym.core.family import register_agent

register_agent("hauf", "multiserver-channel", "clustergym.baselines.multiserver_channel:HAUF")
register_agent("lcf", "multiserver-channel", "clustergym.baselines.multiserver_channel:LCF")
register_agent("lwtf", "multiserver-channel", "clustergym.baselines.multiserver_channel:LWTF")
register_agent("random", "multiserver-channel", "clustergym.baselines.multiserver_channel:RandomChannel")
register_agent("drf", "multiserver-allocation", "clustergym.baselines.multiserver_allocation:DRF")
register_agent("fairness", "multiserver-allocation", "clustergym.baselines.multiserver_allocation:Fairness")
register_agent("binpacking", "multiserver-allocation", "clustergym.baselines.multiserver_allocation:BinPacking")
register_agent("spreading", "multiserver-allocation", "clustergym.baselines.multiserver_allocation:Spreading")
register_agent("random", "multiserver-allocation", "clustergym.baselines.multiserver_allocation:RandomAllocation")
register_agent("fifo", "ringallreduce", "clustergym.baselines.ringallreduce:FIFO")
register_agent("drf", "ringallreduce", "clustergym.baselines.ringallreduce:DRF")
register_agent("las", "ringallreduce", "clustergym.baselines.ringallreduce:LAS")
register_agent("srpt", "ringallreduce", "clustergym.baselines.ringallreduce:SRPT")
register_agent("greedy", "ringallreduce", "clustergym.baselines.ringallreduce:Greedy")
register_agent("random", "ringallreduce", "clustergym.baselines.ringallreduce:RandomRing")
register_agent("fair", "approxjobs", "clustergym.baselines.approxjobs:Fair")
register_agent("edf", "approxjobs", "clustergym.baselines.approxjobs:EDF")
register_agent("random", "approxjobs", "clustergym.baselines.approxjobs:RandomApprox")
