"""Classic heuristics the papers compare against, plus feasible random agents."""

from clustergym.agent import register_agent

register_agent("hauf", "multiserver-channel", "clustergym.baselines.channel:HAUF")
register_agent("lcf", "multiserver-channel", "clustergym.baselines.channel:LCF")
register_agent("lwtf", "multiserver-channel", "clustergym.baselines.channel:LWTF")
register_agent("random", "multiserver-channel", "clustergym.baselines.channel:RandomChannel")
register_agent("fair", "approxjobs", "clustergym.baselines.approx:Fair")
register_agent("edf", "approxjobs", "clustergym.baselines.approx:EDF")
register_agent("random", "approxjobs", "clustergym.baselines.approx:RandomApprox")
