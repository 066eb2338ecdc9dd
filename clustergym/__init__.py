"""clustergym: Gymnasium environments and agents for learning-based online cluster scheduling."""

__version__ = "0.1.0"

from clustergym.agent import Agent, BaseAgent, list_agents, register_agent  # noqa: E402
from clustergym import envs as _envs  # noqa: E402,F401  (registers the env ids)
from clustergym.envs import ENV_IDS  # noqa: E402


def evaluate(*args, **kwargs):
    """Run agents on an env over seeds; see :func:`clustergym.runner.evaluate`."""
    from clustergym.runner import evaluate as _evaluate

    return _evaluate(*args, **kwargs)


__all__ = ["Agent", "BaseAgent", "ENV_IDS", "evaluate", "list_agents", "register_agent", "__version__"]
