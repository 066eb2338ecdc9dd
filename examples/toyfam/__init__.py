"""A complete problem family outside clustergym: two machines with hidden mean service rates.

Each slot the scheduler picks one machine; its work is uniform in [0, 2 x its rate]. The folder holds all of it:
the scenario and the env (``env.py``), its agents (``agents.py``), the learning hooks (``drl_hooks.py``: parameter
ranges for training pools, the tuning reference, bench rows) and its hyperparameters (``hyperparams/ppo.yml``).
This spec is the one registration line's argument::

    clustergym.register_family(toyfam.FAMILY)            # in Python
    CLUSTERGYM_PLUGINS=toyfam clustergym train ...       # on the command line
"""

from clustergym.core.family import EnvEntry, FamilySpec

FAMILY = FamilySpec(
    name="toy-two-machine", number="T1", paper="toy",
    envs=(EnvEntry(id="toyfam/TwoMachine-v0", entry_point="toyfam.env:TwoMachineEnv",
                   check_kwargs={"horizon": 30}),),
    scenario="toyfam.env:make_scenario",
    drl_hooks="toyfam.drl_hooks",
    paper_agent="greedy",
    agents=(("random", "toyfam.agents:RandomToy"), ("greedy", "toyfam.agents:GreedyToy")),
)
