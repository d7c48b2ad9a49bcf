"""A resumed run logs the episode figures the uninterrupted run logs (issue 40: resuming a pendulum run printed
``return -96.794 ep len 16.8`` at iteration 6 where the uninterrupted run printed ``-1070.419 ep len 176.8``), and a
fresh run's return curve holds full episodes only."""

from __future__ import annotations

import math

import pytest
import torch
from runner_helpers import base_cfg, make_env

from rlcore.runners import OnPolicyRunner

EPISODE = 24  # max_episode_length: full episodes end within the short runs below
T = 8  # num_steps_per_env of base_cfg


def _env():
    return make_env(max_episode_length=EPISODE)


def _record(into: dict):
    return lambda it, stats: into.__setitem__(it, {k: v for k, v in stats.items() if k.startswith("Episode/")})


@pytest.mark.slow
def test_a_resumed_run_logs_what_the_uninterrupted_run_logs(tmp_path):
    cfg = base_cfg(save_interval=100)
    whole: dict = {}
    OnPolicyRunner(_env(), cfg, str(tmp_path / "whole")).learn(8, init_at_random_ep_len=True, callback=_record(whole))

    first = OnPolicyRunner(_env(), cfg, str(tmp_path / "first"))
    first.learn(4, init_at_random_ep_len=True)  # writes model_3.pt (the last iteration)
    state = first.logger.state_dict()
    resumed = OnPolicyRunner(_env(), cfg, str(tmp_path / "resumed"))
    resumed.load(str(tmp_path / "first" / "model_3.pt"))
    resumed.logger.load_state_dict(state)  # what the checkpoint carries (the runner restores it by itself too)
    after: dict = {}
    resumed.learn(4, init_at_random_ep_len=True, callback=_record(after))
    assert sorted(after) == [4, 5, 6, 7]
    for it in after:
        for key, value in whole[it].items():
            assert after[it][key] == pytest.approx(value, nan_ok=True), (it, key)
    assert resumed.logger.tot_timesteps == 8 * T * resumed.env.num_envs
    assert math.isfinite(after[4]["Episode/mean_return"]) and after[4]["Episode/mean_length"] == EPISODE


def test_the_return_curve_holds_full_episodes_only(tmp_path):
    """Until an env has ended its first (partial) episode and then a whole one, no return is logged; the mean
    reward per step is logged from the first iteration and equals the rewards' mean."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    rewards: list[torch.Tensor] = []
    env = _env()
    step = env.step

    def recording_step(actions):
        out = step(actions)
        rewards.append(out[1].detach().clone())
        return out

    env.step = recording_step
    runner = OnPolicyRunner(env, base_cfg(logger="tensorboard"), str(tmp_path))
    runner.learn(6, init_at_random_ep_len=True)
    runner.close()
    acc = EventAccumulator(str(tmp_path))
    acc.Reload()
    per_step = {e.step: e.value for e in acc.Scalars("Episode/mean_reward_per_step")}
    returns = {e.step: e.value for e in acc.Scalars("Episode/mean_return")}
    lengths = {e.step: e.value for e in acc.Scalars("Episode/mean_length")}
    assert sorted(per_step) == list(range(6))
    rollout = torch.stack(rewards[-6 * T:]).reshape(6, T, -1)  # the rollouts' steps (after the warm-up's)
    assert [per_step[i] for i in range(6)] == pytest.approx(rollout.mean(dim=(1, 2)).tolist(), rel=1e-5)
    # Envs start at random points of their 24-step episodes: no full episode can end within the first 24 steps.
    assert min(returns) >= EPISODE // T and set(lengths.values()) == {float(EPISODE)}
    assert set(returns) == set(lengths) and max(returns) == 5


class _WithoutState:
    """The plain VecEnv contract: the pendulum without ``state_dict`` / ``load_state_dict`` (as the Gymnasium,
    legged_gym and mjlab adapters and Isaac Lab are)."""

    def __init__(self, env) -> None:
        self.__dict__["_env"] = env

    def __getattr__(self, name):
        if name in ("state_dict", "load_state_dict"):
            raise AttributeError(name)
        return getattr(self._env, name)

    def __setattr__(self, name, value) -> None:
        setattr(self._env, name, value)


def test_episode_bookkeeping_follows_an_env_that_is_not_restored(tmp_path):
    """Defect 2 of issue 52: an env without state restarts its episodes on resume; the logger's per-env running
    returns and lengths must restart with it. On fc0b074 they were restored, and episodes logged after the resume
    were longer than the time limit (the old episodes' steps added to the new ones)."""
    limit = 20
    cfg = base_cfg(save_interval=100, num_steps_per_env=T)
    first = OnPolicyRunner(_WithoutState(make_env(max_episode_length=limit)), cfg, str(tmp_path / "first"))
    first.learn(3, init_at_random_ep_len=True)
    saved = first.logger.state_dict()
    assert float(torch.as_tensor(saved["episode_stats"]["cur_length"]).max()) > 0  # episodes under way when saved

    resumed = OnPolicyRunner(_WithoutState(make_env(max_episode_length=limit, seed=5)), cfg, None)
    resumed.load(str(tmp_path / "first" / "model_2.pt"))
    assert float(resumed.logger.stats.cur_length.abs().max()) == 0.0  # fresh episodes, fresh bookkeeping
    assert resumed.logger.tot_timesteps == saved["tot_timesteps"]  # the run's totals continue
    lengths: list[float] = []
    for _ in range(4):  # 4 iterations of 8 steps: episodes of the fresh env end within them
        resumed.learn(1)
        lengths += resumed.logger.stats.finished_lengths
    assert lengths and max(lengths) <= limit, f"episodes longer than the time limit {limit}: {sorted(lengths)[-5:]}"
