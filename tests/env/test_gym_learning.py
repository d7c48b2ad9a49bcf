"""PPO learns Gymnasium's Pendulum-v1 through GymnasiumVecEnv (the settings of conf/task/gym.yaml).

64 sync envs x 32 steps x 150 iterations (about 300k steps, 15-30 s on one shared core). The deterministic policy is
evaluated on 32 fresh envs (seed 1234) for one 200-step episode, before and after training. Reached (run with -s):

=====  ================  ==============
seed   before training   after training
=====  ================  ==============
0      -1299             -189
1      -1324             -196
2      -1324             -169
3      -1335             -225
4      -1307             -190
5      -1345             -435
=====  ================  ==============

Threshold: >= -600 (a random policy scores about -1200, a good one about -150). Seed: RLCORE_LEARNING_SEED.
"""

from __future__ import annotations

import os
import time

import pytest
import torch

pytest.importorskip("gymnasium", minversion="1.1")

from rlcore.env import GymnasiumVecEnv
from rlcore.runners import OnPolicyRunner

pytestmark = pytest.mark.learning

SEED = int(os.environ.get("RLCORE_LEARNING_SEED", "0"))
THRESHOLD = -600.0
ITERATIONS = 150


def evaluate(runner: OnPolicyRunner, num_envs: int = 32, seed: int = 1234) -> float:
    """Mean return of one 200-step episode of the deterministic policy on fresh envs."""
    policy = runner.get_inference_policy()
    env = GymnasiumVecEnv.make("Pendulum-v1", num_envs=num_envs, seed=seed)
    obs, total = env.get_observations(), torch.zeros(num_envs)
    with torch.no_grad():
        for _ in range(env.max_episode_length):
            obs, rewards, _, _ = env.step(policy(obs))
            total += rewards
    env.close()
    return float(total.mean())


def test_ppo_improves_pendulum_v1_return():
    env = GymnasiumVecEnv.make("Pendulum-v1", num_envs=64, seed=SEED)
    cfg = {
        "seed": SEED, "num_steps_per_env": 32, "logger": "none", "log_interval": 50,
        "obs_groups": {"actor": ["policy"], "critic": ["policy"]},
        "actor": {"class_name": "MLPModel", "hidden_dims": [64, 64], "obs_normalization": True,
                  "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0}},
        "critic": {"class_name": "MLPModel", "hidden_dims": [64, 64], "obs_normalization": True},
        "algorithm": {"class_name": "PPO", "num_learning_epochs": 5, "num_mini_batches": 4, "learning_rate": 3e-3,
                      "schedule": "fixed", "gamma": 0.98, "lam": 0.95, "entropy_coef": 0.0,
                      "reward_normalization": True},
    }
    runner = OnPolicyRunner(env, cfg, log_dir=None, device="cpu")
    before = evaluate(runner)
    runner.alg.train_mode()
    start = time.perf_counter()
    runner.learn(ITERATIONS, init_at_random_ep_len=True)
    seconds = time.perf_counter() - start
    after = evaluate(runner)
    env.close()
    print(f"\n[learning] PPO Gymnasium Pendulum-v1 (seed {SEED}): return {before:.0f} -> {after:.0f} "
          f"(threshold >= {THRESHOLD:.0f}) in {seconds:.1f} s")
    assert before < -1000.0  # the untrained policy does not solve it by accident
    assert after >= THRESHOLD
