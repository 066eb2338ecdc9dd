"""clustergym environments. Importing ``clustergym`` registers every id of every family below.

A family is one folder exporting ``FAMILY`` (a :class:`clustergym.core.family.FamilySpec`) from its
``__init__.py``; adding a shipped family is that folder plus one line in ``FAMILY_PACKAGES``. A user's
own family registers with ``clustergym.register_family(spec)`` (docs/architecture.md).
"""

import importlib

from clustergym.core.family import family_spec, register_family

# One line per family, in the order of the papers (P1..P4).
FAMILY_PACKAGES = (
    "clustergym.envs.multiserver.channel",     # P1 ESDP
    "clustergym.envs.multiserver.allocation",  # P2 OGASched
    "clustergym.envs.ringallreduce",           # P3 GADGET
    "clustergym.envs.approxjobs",              # P4 OPM
)

FAMILIES = tuple(register_family(importlib.import_module(_pkg).FAMILY) for _pkg in FAMILY_PACKAGES)

# The shipped env ids (``clustergym.core.family.env_ids()`` adds those of registered user families).
ENV_IDS = tuple(i for _f in FAMILIES for i in _f.env_ids)

__all__ = ["ENV_IDS", "FAMILIES", "FAMILY_PACKAGES", "family_spec"]
