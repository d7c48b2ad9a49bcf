"""Helpers shared by the algorithm tests: a tiny scripted VecEnv, model/algorithm builders and a rollout loop."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from tensordict import TensorDict

from rlcore.algorithms import PPO, Distillation
from rlcore.env import VecEnv
from rlcore.models import MLPModel, RNNModel
from rlcore.storage import RolloutStorage

GAUSSIAN = {"class_name": "GaussianDistribution", "init_std": 1.0}
SHAPES = {"policy": (5,), "privileged": (3,)}
GROUPS = {"actor": ["policy"], "critic": ["policy", "privileged"]}


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


class FakeEnv(VecEnv):
    """``num_envs`` envs with random observations (mean ``obs_offset``) and random rewards.

    ``done_fn(step) -> (dones [N] bool, time_outs [N] bool)`` scripts the episode ends (default: never).
    ``extras`` has ``time_outs`` and ``final_observations`` (random; rows that are not done hold ``fill``).
    """

    def __init__(
        self,
        num_envs: int = 4,
        num_actions: int = 2,
        shapes: dict[str, tuple[int, ...]] | None = None,
        done_fn: Callable[[int], tuple[torch.Tensor, torch.Tensor]] | None = None,
        obs_offset: float = 0.0,
        seed: int = 0,
    ) -> None:
        self.num_envs, self.num_actions = num_envs, num_actions
        self.shapes = dict(SHAPES if shapes is None else shapes)
        self.done_fn = done_fn
        self.obs_offset = obs_offset
        self.max_episode_length = 1000
        self.episode_length_buf = torch.zeros(num_envs, dtype=torch.long)
        self.device = "cpu"
        self.cfg = {}
        self.step_dt = 0.02  # seconds per step (read by RND through the factory)
        self.gen = torch.Generator().manual_seed(seed)
        self.steps = 0
        self.obs = self._random_obs()

    def _random_obs(self) -> TensorDict:
        return TensorDict(
            {k: torch.randn(self.num_envs, *s, generator=self.gen) + self.obs_offset for k, s in self.shapes.items()},
            batch_size=[self.num_envs],
        )

    def get_observations(self) -> TensorDict:
        return self.obs

    def step(self, actions: torch.Tensor):
        assert actions.shape == (self.num_envs, self.num_actions)
        if self.done_fn is None:
            dones = torch.zeros(self.num_envs, dtype=torch.bool)
            time_outs = dones.clone()
        else:
            dones, time_outs = self.done_fn(self.steps)
        self.steps += 1
        rewards = torch.randn(self.num_envs, generator=self.gen)
        final_obs = self._random_obs()
        self.obs = self._random_obs()
        return self.obs, rewards, dones, {"time_outs": time_outs, "final_observations": final_obs}


def make_obs(num_envs: int = 4, shapes: dict | None = None, offset: float = 0.0) -> TensorDict:
    shapes = SHAPES if shapes is None else shapes
    return TensorDict({k: torch.randn(num_envs, *s) + offset for k, s in shapes.items()}, batch_size=[num_envs])


def make_model(obs, obs_set: str, output_dim: int, rnn_type: str | None = None, stochastic: bool = False,
               groups: dict | None = None, **kwargs):
    groups = GROUPS if groups is None else groups
    kwargs.setdefault("hidden_dims", [16])
    if stochastic:
        kwargs.setdefault("distribution_cfg", GAUSSIAN)
    if rnn_type is None:
        return MLPModel(obs, groups, obs_set, output_dim, **kwargs)
    return RNNModel(obs, groups, obs_set, output_dim, rnn_type=rnn_type, rnn_hidden_dim=8, **kwargs)


def make_ppo(
    obs: TensorDict,
    num_steps: int,
    num_actions: int = 2,
    actor_rnn: str | None = None,
    critic_rnn: str | None = None,
    actor_kwargs: dict | None = None,
    critic_kwargs: dict | None = None,
    **ppo_kwargs,
) -> PPO:
    actor = make_model(obs, "actor", num_actions, actor_rnn, stochastic=True, **(actor_kwargs or {}))
    critic = make_model(obs, "critic", 1, critic_rnn, **(critic_kwargs or {}))
    storage = RolloutStorage("rl", obs.batch_size[0], num_steps, obs, [num_actions])
    return PPO(actor, critic, storage, **ppo_kwargs)


def make_distillation(
    obs: TensorDict,
    num_steps: int,
    num_actions: int = 2,
    student_rnn: str | None = None,
    teacher_rnn: str | None = None,
    student_kwargs: dict | None = None,
    teacher_kwargs: dict | None = None,
    groups: dict | None = None,
    **kwargs,
) -> Distillation:
    groups = {"student": ["policy"], "teacher": ["policy", "privileged"]} if groups is None else groups
    student = make_model(obs, "student", num_actions, student_rnn, stochastic=True, groups=groups,
                         **(student_kwargs or {}))
    teacher = make_model(obs, "teacher", num_actions, teacher_rnn, groups=groups, **(teacher_kwargs or {}))
    storage = RolloutStorage("distillation", obs.batch_size[0], num_steps, obs, [num_actions])
    return Distillation(student, teacher, storage, **kwargs)


def collect(alg, env: VecEnv, num_steps: int, compute_returns: bool = True) -> TensorDict:
    """One rollout the way the runner drives it (under inference mode); returns the last observations."""
    obs = env.get_observations()
    with torch.inference_mode():
        for _ in range(num_steps):
            actions = alg.act(obs)
            obs, rewards, dones, extras = env.step(actions)
            alg.process_env_step(obs, rewards, dones, extras)
        if compute_returns:
            alg.compute_returns(obs)
    return obs


def periodic_dones(num_envs: int, periods: list[int], time_out_envs: tuple[int, ...] = ()):
    """``done_fn`` where env ``i`` is done every ``periods[i]`` steps (0: never); listed envs end by time-out."""

    def done_fn(step: int):
        dones = torch.tensor([p > 0 and (step + 1) % p == 0 for p in periods], dtype=torch.bool)
        time_outs = dones & torch.tensor([i in time_out_envs for i in range(num_envs)])
        return dones, time_outs

    return done_fn


@pytest.fixture
def kit():
    """The helpers above as one namespace (test modules cannot import a conftest reliably)."""
    import types

    return types.SimpleNamespace(
        FakeEnv=FakeEnv, make_obs=make_obs, make_model=make_model, make_ppo=make_ppo,
        make_distillation=make_distillation, collect=collect, periodic_dones=periodic_dones,
        GAUSSIAN=GAUSSIAN, GROUPS=GROUPS, SHAPES=SHAPES,
    )


def pytest_configure(config):
    """Register the ``learning`` marker (slow tests that train to a return threshold; see test_learning.py)."""
    config.addinivalue_line(
        "markers", "learning: trains policies to a return threshold (about a minute in total); "
        "deselect with -m 'not learning'"
    )
