"""Classic heuristics the papers compare against, plus feasible random agents."""

from clustergym.core.family import register_agent

register_agent("hauf", "multiserver-channel", "clustergym.baselines.channel:HAUF")
register_agent("lcf", "multiserver-channel", "clustergym.baselines.channel:LCF")
register_agent("lwtf", "multiserver-channel", "clustergym.baselines.channel:LWTF")
register_agent("random", "multiserver-channel", "clustergym.baselines.channel:RandomChannel")
register_agent("drf", "multiserver-allocation", "clustergym.baselines.allocation:DRF")
register_agent("fairness", "multiserver-allocation", "clustergym.baselines.allocation:Fairness")
register_agent("binpacking", "multiserver-allocation", "clustergym.baselines.allocation:BinPacking")
register_agent("spreading", "multiserver-allocation", "clustergym.baselines.allocation:Spreading")
register_agent("random", "multiserver-allocation", "clustergym.baselines.allocation:RandomAllocation")
register_agent("fifo", "ringallreduce", "clustergym.baselines.ring:FIFO")
register_agent("drf", "ringallreduce", "clustergym.baselines.ring:DRF")
register_agent("las", "ringallreduce", "clustergym.baselines.ring:LAS")
register_agent("greedy", "ringallreduce", "clustergym.baselines.ring:Greedy")
register_agent("random", "ringallreduce", "clustergym.baselines.ring:RandomRing")
register_agent("fair", "approxjobs", "clustergym.baselines.approx:Fair")
register_agent("edf", "approxjobs", "clustergym.baselines.approx:EDF")
register_agent("random", "approxjobs", "clustergym.baselines.approx:RandomApprox")
