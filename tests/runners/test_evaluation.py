"""The evaluation of ``runner.keep_best`` / ``runner.stop_at`` (rlcore/runners/evaluation.py): it follows the
training env's curricula (issue 40, defect 1) and works with an env that meets only the VecEnv contract, which
has no ``reset()`` (defect 4).
"""

from __future__ import annotations

import math

import pytest
import torch
from runner_helpers import base_cfg
from tensordict import TensorDict

from rlcore.checkpoint.io import load_checkpoint
from rlcore.runners import OnPolicyRunner
from rlcore.runners.evaluation import Evaluation
from rlcore_tasks.go2 import Go2Env


class Zero(torch.nn.Module):
    """A policy that always commands zero actions (the evaluation reads its parameters' device and mode)."""

    def __init__(self, num_actions: int) -> None:
        super().__init__()
        self.num_actions = num_actions
        self.w = torch.nn.Parameter(torch.zeros(1))

    def forward(self, obs, stochastic_output=False):
        return torch.zeros(obs.batch_size[0], self.num_actions)

    def reset(self, dones=None, hidden_state=None):
        pass


# ---------------------------------------------------------------------------- defect 1: the training env's curricula
DR = {"num_variants": 16, "curriculum_steps": 20}  # the whole pool in play after 20 env steps
N = 16


def go2(seed: int) -> Go2Env:
    return Go2Env(num_envs=N, seed=seed, sim={"threads": 1}, domain_rand=DR)


def robots_seen(evaluation: Evaluation, source: Go2Env | None = None) -> dict:
    """Run ``evaluation`` with a zero policy; what its env simulates at the first measured step, and the return."""
    env, seen = evaluation.env, {}

    def act(policy, obs):
        if not seen:
            seen.update(variants=set(env.sim.env_variant.tolist()), bias=float(env.imu_bias.abs().max()),
                        encoder_bias=float(env.joint_pos_bias.abs().max()), progress=env.randomization_progress(),
                        pool=list(env.sim.physical))
        return policy(obs)

    seen["return"] = evaluation(Zero(12), act)["return"]
    return seen


@pytest.mark.slow
def test_evaluation_draws_its_robots_from_the_training_envs_curriculum():
    train, eval_env = go2(0), go2(10_000)
    own_pool = list(eval_env.sim.physical)  # drawn from the evaluation env's seed
    assert own_pool != train.sim.physical
    evaluation = Evaluation(eval_env, ["return"], num_steps=4, source_env=train)
    assert evaluation.follows_curriculum
    before = robots_seen(evaluation)  # the training env at step 0: the curriculum's mildest robot, no biases
    assert before["variants"] == {0} and before["bias"] == 0.0 and before["encoder_bias"] == 0.0
    assert before["pool"] == train.sim.physical  # the robots the policy trains on, not the evaluation env's own

    for _ in range(25):  # past the curriculum
        train.step(torch.zeros(N, 12))
    assert train.randomization_progress() == 1.0
    after = robots_seen(evaluation)
    assert after["progress"] == 1.0
    assert len(after["variants"]) >= 8 and after["variants"] <= set(range(16))  # the whole pool, not variant 0
    assert 0.02 < after["bias"] <= 0.05 and after["encoder_bias"] > 0.0  # sensor biases at full strength
    assert after["pool"] == train.sim.physical

    # The same curriculum point (past its end) gives the same evaluation, whatever the training env did since
    # and however its random stream went: the draw is the evaluation env's own.
    for _ in range(7):
        train.step(torch.rand(N, 12, generator=torch.Generator().manual_seed(1)) - 0.5)
    again = robots_seen(evaluation)
    other = go2(0)  # the same robot pool, another history: reset twice, stepped with other actions
    other.reset()
    for _ in range(30):
        other.step(torch.full((N, 12), 0.3))
    eval_env2 = go2(10_000)  # a fresh evaluation env (an Evaluation's fixed start is its env's state when made)
    elsewhere = robots_seen(Evaluation(eval_env2, ["return"], num_steps=4, source_env=other))
    for seen in (again, elsewhere):
        assert seen["variants"] == after["variants"] and seen["bias"] == after["bias"]
        assert seen["return"] == after["return"]
    assert before["return"] != after["return"]  # the robots differ, and so does the value
    for env in (train, eval_env, other, eval_env2):
        env.close()


def test_without_a_source_env_the_evaluation_keeps_its_own_curriculum():
    """The documented default: ``source_env`` not given, the evaluation env's own (step 0) curriculum."""
    train, eval_env = go2(0), go2(10_000)
    for _ in range(25):
        train.step(torch.zeros(N, 12))
    evaluation = Evaluation(eval_env, ["return"], num_steps=4)
    assert not evaluation.follows_curriculum
    seen = robots_seen(evaluation)
    assert seen["variants"] == {0} and seen["bias"] == 0.0 and seen["pool"] == eval_env.sim.physical
    for env in (train, eval_env):
        env.close()


# ---------------------------------------------------------------------------- defect 4: the VecEnv contract only
class ContractEnv:
    """Only the VecEnv contract: ``num_envs``, ``num_actions``, ``max_episode_length``, ``episode_length_buf``,
    ``device``, ``cfg``, ``step_dt``, ``get_observations()`` and ``step()`` (no ``reset``, no state).

    Episodes are ``L`` steps; envs start at different points of their first episode; the reward is 1 per step less
    a small action cost, so a zero policy's full episode returns exactly ``L``."""

    L = 10

    def __init__(self, num_envs: int) -> None:
        self.num_envs, self.num_actions, self.max_episode_length = num_envs, 2, self.L
        self.device, self.cfg, self.step_dt = "cpu", {"name": "contract"}, 0.1
        self.episode_length_buf = torch.arange(num_envs) % (self.L - 2)  # mid-episode: 0 .. L-3 steps in
        self.steps = 0  # steps taken (by the test's count)

    def get_observations(self) -> TensorDict:
        phase = self.episode_length_buf.float().unsqueeze(-1) / self.L
        obs = torch.cat([phase, torch.ones_like(phase)], dim=-1)
        return TensorDict({"policy": obs, "critic": obs.clone()}, batch_size=[self.num_envs])

    def step(self, actions: torch.Tensor):
        self.steps += 1
        self.episode_length_buf = self.episode_length_buf + 1
        rewards = 1.0 - 0.1 * actions.clamp(-1, 1).square().mean(dim=-1)
        dones = self.episode_length_buf >= self.max_episode_length
        self.episode_length_buf = self.episode_length_buf.masked_fill(dones, 0)
        extras = {"time_outs": dones.clone(), "log": {"/phase": self.episode_length_buf.float().mean()}}
        return self.get_observations(), rewards, dones, extras


def test_evaluation_of_a_contract_env_measures_episodes_from_real_resets():
    env = ContractEnv(8)
    assert not hasattr(env, "reset") and not hasattr(env, "state_dict")
    evaluation = Evaluation(env, ["return", "phase"], num_steps=2 * ContractEnv.L)
    evaluation.check(Zero(2))  # the start-of-training check: one step, no settling
    assert env.steps == 1
    for _ in range(2):  # (the second starts where the first left the env: it cannot be put back)
        env.steps, settle = 0, ContractEnv.L - int(env.episode_length_buf.min())  # the longest way to an episode end
        assert settle > 1
        result = evaluation(Zero(2))
        # Settled first (until every env has ended its first episode), then measured: every measured episode is a
        # whole one, never the first, partial one (the zero policy's whole episode returns L).
        assert env.steps == settle + 2 * ContractEnv.L
        assert result["return"] == pytest.approx(ContractEnv.L, abs=1e-9)
        assert 0.0 <= result["phase"] < ContractEnv.L


def test_keep_best_trains_with_a_contract_eval_env(tmp_path):
    runner = OnPolicyRunner(ContractEnv(16), base_cfg(keep_best="return", eval_interval=1), str(tmp_path),
                            eval_env=ContractEnv(8))
    seen = []
    runner.learn(3, callback=lambda it, stats: seen.append(stats["Eval/return"]))
    assert len(seen) == 3 and all(math.isfinite(v) and 0.0 < v <= ContractEnv.L for v in seen)
    best = load_checkpoint(tmp_path / "model_best.pt")["best"]
    assert best["metric"] == "return" and best["value"] == pytest.approx(max(seen))
