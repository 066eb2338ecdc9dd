"""The package list, read from the folders (everything else is in pyproject.toml).

Every folder with an ``__init__.py`` under ``clustergym/`` and under the wings ``envs/``, ``agents/`` and
``baselines/`` (installed as ``clustergym.envs``, ``clustergym.agents`` and ``clustergym.baselines``,
``[tool.setuptools.package-dir]``) is a package, so a new family folder under ``envs/`` ships without an edit
here; the data-only packages (no ``__init__.py``) are named below.
"""

import os

from setuptools import setup

WINGS = {"clustergym": "clustergym", "clustergym.envs": "envs", "clustergym.agents": "agents",
         "clustergym.baselines": "baselines"}
DATA_PACKAGES = ["clustergym.learning.pretrained",  # the shipped models, sb3:pretrained/<EnvName>
                 "clustergym.envs.traces.presets"]  # the shipped trace presets


def packages() -> list[str]:
    found = list(DATA_PACKAGES)
    for name, folder in WINGS.items():
        for path, subdirs, files in os.walk(folder):
            subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
            if "__init__.py" in files:
                rel = os.path.relpath(path, folder)
                found.append(name if rel == "." else ".".join([name, *rel.split(os.sep)]))
    return sorted(found)


setup(packages=packages())
