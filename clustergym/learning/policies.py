"""The policy class ``clustergym train`` builds (and ``sb3:`` loading supplies) for an algorithm, head and net.

The fast action heads (:mod:`clustergym.learning.heads`) and the per-entity network
(:mod:`clustergym.learning.entity`) import torch, so they load on first use.
"""

from __future__ import annotations

from clustergym.learning.algos import HEADS, NETS, RECURRENT, algo_class
from clustergym.learning.privileged import PRIVILEGED, privileged_policy

__all__ = ["policy_class", "check_net", "net_policy_kwargs", "INPUTS"]


INPUTS = ("flat", "dict")  # the observation a policy takes: one flat vector (MlpPolicy) or the env's Dict (MultiInputPolicy)


def policy_class(algo: str = "ppo", head: str = "fast", net: str = "mlp", inputs: str = "flat",
                 privileged: str = "none"):
    """The policy class ``train`` builds for ``algo``: the fast-head policy (PPO, A2C, MaskablePPO with
    ``head="fast"``) or the algorithm's own ``MlpPolicy``; with ``net="entity"`` the per-entity policy of
    :mod:`clustergym.learning.entity`, with ``net="autoregressive"`` the masked decoder of
    :mod:`clustergym.learning.autoregressive`. ``sb3:`` loading supplies the same class. ``inputs="dict"``: the policy
    for the env's own Dict observation (the algorithm's ``MultiInputPolicy``, or its fast-head version).
    ``privileged="critic"``: the flat policy whose critic alone reads the privileged features
    (:func:`clustergym.learning.privileged.privileged_policy`)."""
    if privileged != "none":
        if privileged not in PRIVILEGED or inputs != "flat" or net != "mlp":
            raise ValueError(f"privileged={privileged!r} is invalid here: expected one of {', '.join(PRIVILEGED)} "
                             "with net='mlp' on flat observations")
        return privileged_policy(policy_class(algo, head, net, inputs))
    if head not in HEADS:
        raise ValueError(f"head={head!r} is invalid: expected one of {', '.join(HEADS)}")
    if inputs not in INPUTS:
        raise ValueError(f"inputs={inputs!r} is invalid: expected one of {', '.join(INPUTS)}")
    cls = algo_class(algo)
    if algo in RECURRENT:  # SB3-contrib's LSTM policies, with their own action distributions
        if net != "mlp":
            raise ValueError(f"net={net!r} is not available with algo {algo!r} (its LSTM policy is an MLP)")
        return cls.policy_aliases["MultiInputLstmPolicy" if inputs == "dict" else "MlpLstmPolicy"]
    if inputs == "dict":
        if net != "mlp":
            raise ValueError(f"net={net!r} takes flat observations, not inputs='dict'")
        if head == "fast":
            from clustergym.learning.heads import fast_policy

            fast = fast_policy(algo, inputs="dict")
            if fast is not None:
                return fast
        return cls.policy_aliases["MultiInputPolicy"]
    if net == "autoregressive":  # its own masked distribution, with either head
        from clustergym.learning.autoregressive import DECODER_ALGOS, DecoderActorCriticPolicy

        if algo not in DECODER_ALGOS:
            raise ValueError(f"net='autoregressive' supports the algorithms {', '.join(DECODER_ALGOS)}, not {algo!r}")
        return DecoderActorCriticPolicy
    if net != "mlp":
        from clustergym.learning.entity import entity_policy

        if net not in NETS:
            raise ValueError(f"net={net!r} is invalid: expected one of {', '.join(NETS)}")
        return entity_policy(algo, head)
    if head == "fast":
        from clustergym.learning.heads import fast_policy

        fast = fast_policy(algo)
        if fast is not None:
            return fast
    return cls.policy_aliases["MlpPolicy"]


def check_net(net: str, family: str, algo: str, stats: bool = True) -> None:
    """ValueError unless ``net`` can be trained for ``family`` with ``algo`` (the per-entity network's check, or
    the autoregressive decoder's)."""
    if net == "autoregressive":
        from clustergym.learning.autoregressive import check_decoder

        return check_decoder(family, algo)
    from clustergym.learning.entity import check_net as check_entity_net

    check_entity_net(net, family, algo, stats)


def net_policy_kwargs(net: str, env, policy_kwargs: dict | None = None) -> dict:
    """The ``policy_kwargs`` a per-entity or decoder policy trains with on training env ``env``: the given ones,
    the default ``hidden`` and the network's layout (``"entity"`` or ``"decoder"``, plain JSON)."""
    from clustergym.learning.entity import DEFAULT_HIDDEN

    if net == "autoregressive":
        from clustergym.learning.autoregressive import decoder_layout

        return {"hidden": DEFAULT_HIDDEN, **(policy_kwargs or {}), "decoder": decoder_layout(env)}
    from clustergym.learning.entity import entity_layout

    return {"hidden": DEFAULT_HIDDEN, **(policy_kwargs or {}), "entity": entity_layout(env)}
