"""Through the runner (issue 40, defect 1): every evaluation draws its robots from the training env's curriculum at that
iteration (the runner hands its env to Evaluation as source_env); on the old code every one saw variant 0 alone."""
import math

import pytest
from runner_helpers import base_cfg

from rlcore.runners import OnPolicyRunner
from rlcore_tasks.go2 import Go2Env

pytestmark = pytest.mark.slow  # trains with evaluations

DR = {"num_variants": 16, "curriculum_steps": 20}


def go2(n, seed):
    return Go2Env(num_envs=n, seed=seed, sim={"threads": 1}, domain_rand=DR, episode_length_s=0.5)


def test_runner_evaluations_follow_the_training_curriculum(tmp_path):
    cfg = base_cfg(keep_best="return", eval_interval=1, eval_steps=4,
                   obs_groups={"actor": ["policy"], "critic": ["policy", "privileged"]})
    eval_env = go2(8, 10_000)
    runner = OnPolicyRunner(go2(8, 0), cfg, str(tmp_path), eval_env=eval_env)
    seen = []
    reset = eval_env.reset

    def recording_reset():
        obs = reset()
        seen.append((runner.env.randomization_progress(), set(eval_env.sim.env_variant.tolist()),
                     float(eval_env.imu_bias.abs().max())))
        return obs

    eval_env.reset = recording_reset
    runner.learn(4)  # 8 steps per iteration: the curriculum (20 steps) ends during iteration 3
    assert len(seen) == 5  # the start-of-training check, then one evaluation per iteration
    for progress, variants, bias in seen:  # the training env's curriculum at that point, never variant 0 alone
        assert 0.0 < progress and variants <= set(range(math.ceil(16 * progress))) and 0.0 < bias <= 0.05 * progress
    assert seen[-1][0] == 1.0 and len(seen[-1][1]) > 4
