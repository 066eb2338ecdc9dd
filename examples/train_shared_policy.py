"""Train ONE shared policy for all port agents of the P1 ParallelEnv (parameter sharing), then compare
it with a random policy on fresh seeds.

    python examples/train_shared_policy.py                 # ~30 s on one core
    python examples/train_shared_policy.py --total-steps 200 --eval-steps 50   # smoke test

The ports have different numbers of channels (different action spaces), so the shared network acts per
channel: it maps the features of one channel to the probability of selecting it, and each port's action
is its channels' coin flips. Features use only what a port may know: its job bit, the public problem
(demand a^e / capacity c) and its own feedback (empirical mean and count of its channels' realised
utilities). Masked channels (port without a job) are never selected.

Algorithm: policy gradient (REINFORCE with a batch-mean baseline). In P1 an action changes neither the
future arrivals nor the future utilities, so the one-slot reward is the whole return of the action
(γ = 0). ``--reward team`` (default) credits every agent with the sum of all agents' rewards (the single
env's reward, eq. 5: the ports share one capacity, so a port that grabs channels can push out better
channels of other ports under the env's repair); ``--reward own`` uses each port's own reward.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from clustergym.envs.multiagent import parallel_env


@dataclass
class Config:
    total_steps: int = 12000
    """training slots (all ports act in every slot)"""
    batch_steps: int = 200
    """slots per policy update"""
    horizon: int = 1000
    """slots per episode"""
    lr: float = 0.02
    """Adam learning rate"""
    ent_coef: float = 0.002
    """entropy bonus"""
    reward: str = "team"
    """team: every agent learns from the sum of rewards; own: from its own reward"""
    eval_steps: int = 1000
    """slots of evaluation per policy (fresh seed)"""
    seed: int = 0
    """seed of the env (training episodes use seed, seed+1, ...) and of torch"""


class ChannelStats:
    """Per-channel empirical mean and count of the realised utility, from the agents' feedback only."""

    def __init__(self, num_edges: int):
        self.n = np.zeros(num_edges)
        self.total = np.zeros(num_edges)

    def update(self, infos: dict) -> None:
        for info in infos.values():
            fb = info["feedback"]
            ran = fb["executed"]  # the agent's channels that ran (fixed shape (|E_l|,))
            self.n[fb["edges"][ran]] += 1.0
            self.total[fb["edges"][ran]] += fb["utilities"][ran]

    def mean(self) -> np.ndarray:
        return (self.total + 0.5) / (self.n + 1.0)  # prior 0.5 (Z̃ ∈ [0, 1]) so untried channels look average


def features(env, stats: ChannelStats, obs: dict) -> np.ndarray:
    """(E, F) float32 per channel: [job of its port, mean utility, 1/sqrt(1+n), a^e / c (K)], edge order."""
    pb = env.problem
    job = np.zeros(pb.num_edges, dtype=np.float32)
    for a, edges in env.agent_edges.items():
        job[edges] = obs[a]["job"][0]
    return np.column_stack([job, stats.mean(), 1.0 / np.sqrt(1.0 + stats.n),
                            pb.demand / np.maximum(pb.capacity, 1)]).astype(np.float32)


class SharedPolicy(nn.Module):
    """One network for every port: channel features -> logit of selecting the channel."""

    def __init__(self, num_features: int, hidden: int = 32):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(num_features, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
                                 nn.Linear(hidden, 1))

    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        return self.net(feats).squeeze(-1)


def act(env, policy, stats, obs, generator):
    """Each port's action sampled from the shared policy (no autograd); returns (actions, feats, x)."""
    feats = torch.from_numpy(features(env, stats, obs))
    with torch.no_grad():
        p = torch.sigmoid(policy(feats))
    x = torch.bernoulli(p, generator=generator) * (feats[:, 0] > 0)  # eq. 4: only channels of ports with a job
    xn = x.numpy().astype(np.int8)
    actions = {a: xn[edges] for a, edges in env.agent_edges.items()}
    return actions, feats, x


def random_actions(env, obs, rng):
    return {a: (rng.integers(0, 2, size=env.action_space(a).n) * obs[a]["job"][0]).astype(np.int8)
            for a in env.agents}


def evaluate(env, choose, steps: int, seed: int) -> float:
    obs, _ = env.reset(seed=seed)
    total = 0.0
    for _ in range(steps):
        if not env.agents:
            obs, _ = env.reset()
        actions = choose(obs)
        obs, rewards, _, _, infos = env.step(actions)
        total += sum(rewards.values())
        choose.after(infos)
    return total / steps


def main(cfg: Config) -> dict:
    torch.set_num_threads(1)  # tiny network: threads only add overhead (and the machine is shared)
    torch.manual_seed(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    env = parallel_env("clustergym/MultiServerChannel-v0", horizon=cfg.horizon, oracle=False)
    edge_agent = np.empty(env.problem.num_edges, dtype=np.int64)  # agent index of each channel
    for i, a in enumerate(env.possible_agents):
        edge_agent[env.agent_edges[a]] = i
    stats = ChannelStats(env.problem.num_edges)
    policy = SharedPolicy(3 + env.problem.num_device_types)
    opt = torch.optim.Adam(policy.parameters(), lr=cfg.lr)
    print(f"P1 ParallelEnv: {len(env.possible_agents)} port agents, {env.problem.num_edges} channels, "
          f"one shared policy ({sum(p.numel() for p in policy.parameters())} parameters), reward={cfg.reward}")

    t0 = time.time()
    obs, _ = env.reset(seed=cfg.seed)
    episode = 0
    steps = 0
    while steps < cfg.total_steps:
        feats, xs, rets, team = [], [], [], []
        for _ in range(min(cfg.batch_steps, cfg.total_steps - steps)):
            if not env.agents:
                episode += 1
                obs, _ = env.reset(seed=cfg.seed + episode)
            actions, f, x = act(env, policy, stats, obs, gen)
            obs, rewards, _, _, infos = env.step(actions)
            stats.update(infos)
            r = np.array([rewards[a] for a in env.possible_agents])
            per_channel = np.full(edge_agent.size, r.sum()) if cfg.reward == "team" else r[edge_agent]
            feats.append(f)
            xs.append(x)
            rets.append(torch.from_numpy(per_channel.astype(np.float32)))
            team.append(r.sum())  # the single env's reward (eq. 5)
            steps += 1
        F = torch.stack(feats)  # (B, E, features)
        active = F[..., 0] > 0  # (B, E) decisions that were free (port had a job)
        dist = torch.distributions.Bernoulli(logits=policy(F))  # one batched pass over the whole batch
        R = torch.stack(rets)  # (B, E) return credited to each channel's decision
        adv = (R - R.mean(0)) / (R.std(0) + 1e-6)  # batch-mean baseline per channel
        logp = dist.log_prob(torch.stack(xs)) * active
        loss = -(logp * adv).sum(1).mean() - cfg.ent_coef * (dist.entropy() * active).sum(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step {steps:6d}  mean reward/slot (last batch) {np.mean(team):6.3f}  loss {loss.item():8.4f}  "
              f"{time.time() - t0:5.1f}s")

    class Learned:
        def __call__(self, o):
            return act(env, policy, stats, o, gen)[0]

        def after(self, infos):
            stats.update(infos)  # the policy keeps learning its channels' means from feedback

    class Random:
        rng = np.random.default_rng(cfg.seed)

        def __call__(self, o):
            return random_actions(env, o, self.rng)

        def after(self, infos):
            pass

    eval_seed = 10_000 + cfg.seed  # a seed never used in training
    learned = evaluate(env, Learned(), cfg.eval_steps, eval_seed)
    rand = evaluate(env, Random(), cfg.eval_steps, eval_seed)
    print(f"evaluation over {cfg.eval_steps} slots (seed {eval_seed}): shared policy {learned:.3f}/slot, "
          f"random {rand:.3f}/slot ({100 * (learned / rand - 1):+.1f}%)")
    return {"learned": learned, "random": rand}


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name, f in Config.__dataclass_fields__.items():
        p.add_argument(f"--{name.replace('_', '-')}", dest=name, type=type(f.default), default=f.default)
    main(Config(**vars(p.parse_args())))
