"""clustergym: Gymnasium environments and agents for learning-based online cluster scheduling."""

from clustergym import envs as _envs  # noqa: E402,F401  (registers the shipped families' env ids)
from clustergym.core.agent import Agent, BaseAgent, list_agents  # noqa: E402
from clustergym.envs import ENV_IDS  # noqa: E402
from clustergym.core.family import EnvEntry, FamilySpec, env_ids, family_specs, register_agent, register_family  # noqa: E402
from clustergym.core.family import load_plugins as _load_plugins  # noqa: E402
from clustergym.runner.evaluation import evaluate  # noqa: E402
from clustergym.core.version import __version__  # noqa: E402

try:  # user families named in $CLUSTERGYM_PLUGINS (entry points: read by the CLI and the runner's workers)
    _load_plugins(entry_points=False)
except ValueError:  # a broken or hanging plugin never breaks ``import clustergym``: the CLI reports it (one line,
    pass  # exit 2), and so does an explicit clustergym.core.family.load_plugins() (the error is kept, not retried)


__all__ = ["Agent", "BaseAgent", "ENV_IDS", "EnvEntry", "FamilySpec", "env_ids", "evaluate", "family_specs",
           "list_agents", "register_agent", "register_family", "__version__"]
