"""The four paper policies as agents. ``make`` builds any registered agent (paper or baseline)."""

from clustergym.core.agent import list_agents, make
from clustergym.core.family import register_agent

register_agent("esdp", "multiserver-channel", "clustergym.agents.esdp:ESDP")
register_agent("gadget", "ringallreduce", "clustergym.agents.gadget:GADGET")
register_agent("opm", "approxjobs", "clustergym.agents.opm:OPM")
register_agent("opm-noest", "approxjobs", "clustergym.agents.opm:OPMNoEstimation")
register_agent("ops", "approxjobs", "clustergym.agents.ops:OPS")

__all__ = ["make", "list_agents"]
register_agent("ogasched", "multiserver-allocation", "clustergym.agents.ogasched:OGASched")
