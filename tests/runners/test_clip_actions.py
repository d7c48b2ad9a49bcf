"""The runner's ``clip_actions``: every action the env receives is the policy's action clipped to the bound exactly.

The env records the actions it receives; the algorithm's ``act`` is wrapped to record what the policy produced.
A wide initial std (3) puts most actions beyond the bound, so clipping is exercised, and the same run without
``clip_actions`` shows the actions would otherwise reach the env unclipped.
"""

from __future__ import annotations

import torch
from runner_helpers import NUM_ENVS, base_cfg, make_env

from rlcore.runners import OnPolicyRunner

T = 8
BOUND = 0.25


class RecordingEnv:
    """Delegates to ``env``; keeps a copy of every action ``step`` receives."""

    def __init__(self, env):
        self.__dict__.update(env=env, received=[])

    def __getattr__(self, name):
        return getattr(self.env, name)

    def __setattr__(self, name, value):
        setattr(self.env, name, value)

    def step(self, actions):
        self.received.append(actions.detach().clone())
        return self.env.step(actions)


def _run(clip_actions, warmup_steps: int = 0):
    cfg = base_cfg(clip_actions=clip_actions, normalizer_warmup_steps=warmup_steps)
    cfg["actor"]["distribution_cfg"]["init_std"] = 3.0
    env = RecordingEnv(make_env())
    runner = OnPolicyRunner(env, cfg, None)
    produced = []
    act = runner.alg.act

    def recording_act(obs):
        actions = act(obs)
        produced.append(actions.clone())
        return actions

    runner.alg.act = recording_act
    runner.learn(2)
    return env.received, produced


def test_actions_beyond_the_bound_are_clipped_exactly():
    received, produced = _run(BOUND)
    assert len(received) == len(produced) == 2 * T
    produced, received = torch.stack(produced), torch.stack(received)
    assert produced.shape == received.shape == (2 * T, NUM_ENVS, 1)
    assert (produced.abs() > BOUND).float().mean() > 0.5
    assert torch.equal(received, produced.clamp(-BOUND, BOUND))
    assert received.abs().max().item() == BOUND


def test_without_clip_actions_the_env_gets_the_policy_actions():
    received, produced = _run(None)
    assert torch.equal(torch.stack(received), torch.stack(produced))
    assert torch.stack(received).abs().max() > 1.0


def test_normalizer_warm_up_steps_are_clipped_too():
    """The normaliser warm-up steps the env too: its actions are clipped like the rollout's (the warm-up once
    sent the policy's raw actions, up to ~3 std beyond the bound here)."""
    received, _ = _run(BOUND, warmup_steps=4)
    assert len(received) == 4 + 2 * T
    warm_up = torch.stack(received[:4])
    assert warm_up.abs().max().item() == BOUND  # clipped, and the bound is reached (the std is 3)
    assert torch.stack(received).abs().max().item() <= BOUND
