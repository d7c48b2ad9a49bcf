"""A resumed run continues exactly (issue 40): default ``task=go2`` PPO and Distillation runs, one process.

Each run trains 4 iterations; a second run resumes from the checkpoint of iteration 2 (``model_1.pt``) with a new env
and scrambled generators and trains to the same end. The env steps of the resumed half (actions, observations,
rewards, dones) and every piece of state reachable from the runner at the end (:func:`resume_check.snapshot`: env,
simulator, curricula, algorithm, models, optimiser, storage, logger, generators) must be bit-identical. The
two-rank version is ``tests/distributed/test_resume_ranks.py``.
"""

from __future__ import annotations

import pytest
import torch
from resume_check import differences, go2_plan, make_runner, run_pair, step_differences


def _check(result: dict) -> None:
    assert result["num_steps"] == 16  # 2 iterations of 8 steps
    assert step_differences(result["full_steps"], result["resumed_steps"]) == []
    diffs = differences(result["full"], result["resumed"])
    assert diffs == [], "state a resume does not restore:\n" + "\n".join(diffs)


@pytest.mark.slow
def test_go2_ppo_resumes_exactly(tmp_path):
    result = run_pair(go2_plan("ppo", str(tmp_path)), str(tmp_path), 4)
    _check(result)
    # the resumed half runs past the domain-randomisation curriculum (40 steps): a restarted one would differ
    assert result["full"]["runner.env.common_step_counter"] == 8 + 4 * 8
    assert result["full"]["runner.logger.tot_timesteps"] == 4 * 8 * 12  # the logger's bookkeeping continues too


@pytest.mark.parametrize("start_weight", [4.0])
@pytest.mark.slow
def test_go2_distillation_resumes_exactly(tmp_path, start_weight):
    teacher = make_runner(go2_plan("ppo", str(tmp_path / "teacher")), str(tmp_path / "teacher"))
    teacher.learn(1)
    plan = go2_plan("distillation", str(tmp_path / "student"), teacher=str(tmp_path / "teacher" / "model_0.pt"),
                    extra=(f"algorithm.start_weight={start_weight}", "algorithm.start_steps=10",
                           "algorithm.forget_prob=0.01"))
    result = run_pair(plan, str(tmp_path / "student"), 4)
    _check(result)
    # the steps-since-reset counters that weight the loss are part of the resumed state (defect 5)
    steps = result["resumed"]["runner.alg.episode_steps"]
    assert steps.dtype == torch.long and int(steps.max()) > 0


def _pendulum_distillation(tmp_path):
    """A pendulum teacher (1 iteration) and a distillation config weighting each episode's first 10 steps x4."""
    from runner_helpers import GAUSSIAN, base_cfg, make_env

    from rlcore.runners import DistillationRunner, OnPolicyRunner

    teacher = OnPolicyRunner(make_env(num_envs=8), base_cfg(), log_dir=str(tmp_path / "ppo"))
    teacher.learn(1)
    cfg = base_cfg(obs_groups={"student": ["policy"], "teacher": ["policy"]}, save_interval=1)
    del cfg["actor"], cfg["critic"]
    cfg["student"] = {"class_name": "MLPModel", "hidden_dims": [16], "obs_normalization": True,
                      "distribution_cfg": dict(GAUSSIAN)}
    cfg["teacher"] = {"class_name": "MLPModel", "hidden_dims": [16, 16], "obs_normalization": True}
    cfg["algorithm"] = {"class_name": "Distillation", "start_weight": 4.0, "start_steps": 10}

    def runner(log_dir):
        r = DistillationRunner(make_env(num_envs=8), cfg, log_dir=log_dir)
        r.load(str(tmp_path / "ppo" / "model_0.pt"))
        return r
    return runner


def test_distillation_counters_are_the_envs_steps_since_reset(tmp_path):
    """Defect 5: with start_weight the loss weights steps by their age in the episode. The counters are each env's
    steps since its reset: after the normaliser warm-up (8 steps) and 2 iterations (16), 24 in every env; on the
    old code 16 (the warm-up was not counted), and 0 after a resume (not checkpointed)."""
    make = _pendulum_distillation(tmp_path)
    full = make(str(tmp_path / "student"))
    full.learn(2)
    env_age = full.env.episode_length_buf  # pendulum: no terminal states, no random start lengths here
    assert int(env_age.min()) == 24 and torch.equal(full.alg.episode_steps, env_age)
    resumed = make(None)
    resumed.load(str(tmp_path / "student" / "model_1.pt"))
    assert torch.equal(resumed.alg.episode_steps, env_age)
    weighted = (resumed.alg.episode_steps < 10).sum()
    assert int(weighted) == 0  # none of the 8 envs is weighted x4 at the next step (old code: 8 of 8)


@pytest.mark.slow
def test_two_learn_calls_continue_like_one(tmp_path):
    """Defect 5 of issue 52: ``learn(2); learn(2)`` is ``learn(4)``. On fc0b074 the second call started from
    ``env.get_observations()``, a fresh noisy draw that also moved the env's generator on (the actors differed by up
    to 0.0167)."""
    from resume_check import StepRecorder, with_generators

    plan = go2_plan("ppo", str(tmp_path))
    once = make_runner(plan, None)
    record_once = StepRecorder(once.env)
    once.learn(4, init_at_random_ep_len=True)
    twice = make_runner(plan, None)
    record_twice = StepRecorder(twice.env)
    twice.learn(2, init_at_random_ep_len=True)
    twice.learn(2, init_at_random_ep_len=True)
    assert len(record_twice.steps) == len(record_once.steps) == 8 + 4 * 8  # the warm-up, then 4 rollouts
    assert step_differences(record_once.steps, record_twice.steps) == []
    diffs = differences(with_generators(once), with_generators(twice))
    assert diffs == [], "\n".join(diffs[:20])
