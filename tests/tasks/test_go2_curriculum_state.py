"""``Go2Env.curriculum_state()`` / ``set_curriculum(state)``: how an evaluation env follows its training env's curricula
(the step counter behind the domain-randomisation progress and the reward-weight schedules, the terrain levels, the
robot pool), without a reset and with its own generator."""

from __future__ import annotations

import pytest
import torch

from rlcore.errors import ConfigError
from rlcore_tasks.go2 import Go2Env

ROUGH = {"type": "rough", "num_levels": 4, "num_cols": 2, "tile_size": 4.0, "max_init_level": 0}
SCHEDULE = {"tracking_lin_vel_fine": [[0, 0.0], [100, 1.0]]}


def go2(num_envs: int, seed: int) -> Go2Env:
    return Go2Env(num_envs=num_envs, seed=seed, sim={"threads": 1}, terrain=ROUGH,
                  domain_rand={"num_variants": 8, "curriculum_steps": 200}, rewards={"weight_schedule": SCHEDULE})


def test_set_curriculum_adopts_counter_levels_and_robot_pool_and_resets_nothing():
    train, env = go2(6, 0), go2(40, 1)
    train.common_step_counter = 150
    train.terrain.levels = torch.tensor([3, 3, 2, 3, 2, 3])
    assert env.sim.physical != train.sim.physical and set(env.terrain.levels.tolist()) == {0}
    spawn, lengths = env.spawn_xy.clone(), env.episode_length_buf.clone()
    state = env.generator.get_state()

    env.set_curriculum(train.curriculum_state())
    assert env.common_step_counter == 150 and env.randomization_progress() == pytest.approx(0.75)
    assert env.reward_weight("tracking_lin_vel_fine") == pytest.approx(1.0)  # the schedule past its end
    assert env.sim.physical == train.sim.physical  # the training env's robots
    levels = env.terrain.levels.clone()
    assert set(levels.tolist()) == {2, 3}  # drawn from the training env's levels
    assert torch.equal(env.spawn_xy, spawn) and torch.equal(env.episode_length_buf, lengths)  # nothing reset

    env.generator.set_state(state)  # the same generator state: the same draw
    env.set_curriculum(train.curriculum_state())
    assert torch.equal(env.terrain.levels, levels)
    env.reset()  # the next reset draws from the adopted curricula: 6 of 8 variants at progress 0.75
    assert set(env.sim.env_variant.tolist()) <= set(range(6)) and len(set(env.sim.env_variant.tolist())) > 3
    assert torch.allclose(env.spawn_xy, env.terrain.origins(torch.arange(40))[:, :2])
    with pytest.raises(ConfigError, match="env state is for task Other"):
        env.set_curriculum({**train.curriculum_state(), "task": "Other"})
    train.close(), env.close()
