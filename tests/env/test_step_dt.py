"""Every env states its control step ``step_dt`` (seconds per env step), and RND takes its bonus scale from it.

Before: the factory read ``env.step_dt`` or ``env.dt`` and silently fell back to 1.0 s, so RND's bonus was 50x
too large on the cart-pole (whose step is ``tau`` = 0.02 s) and on every Gymnasium / legged_gym adapter.
"""

from __future__ import annotations

import pytest
import torch
from legged_gym_style_env import LeggedGymStyleEnv, make_cfg
from rsl_rl_style_env import RslRlStyleEnv

from rlcore.algorithms.factory import construct_algorithm, env_step_dt
from rlcore.env.legged_gym import LeggedGymVecEnv
from rlcore.env.task import make_task

GAUSSIAN = {"class_name": "GaussianDistribution", "init_std": 1.0}


def _gym(env_id: str, mode: str = "sync", **kwargs):
    pytest.importorskip("gymnasium", minversion="1.1")
    from rlcore.env import GymnasiumVecEnv

    return GymnasiumVecEnv.make(env_id, num_envs=2, vectorization_mode=mode, **kwargs)


ENVS = {  # name: (factory, seconds per step)
    "pendulum": (lambda: make_task("pendulum", num_envs=4, seed=0), 0.05),
    "cartpole": (lambda: make_task("cartpole", num_envs=4, seed=0), 0.02),  # its step is called tau
    "legged_gym": (lambda: LeggedGymVecEnv(LeggedGymStyleEnv(make_cfg(num_envs=4))), 2 * 0.05),  # decimation * sim.dt
    "rsl_rl_style": (lambda: RslRlStyleEnv(num_envs=4), 0.1),  # on env.unwrapped, as Isaac Lab keeps it
    "gym_pendulum": (lambda: _gym("Pendulum-v1"), 0.05),  # the unwrapped env's dt (render_fps 30 would say 1/30)
    "gym_pendulum_async": (lambda: _gym("Pendulum-v1", "async"), 0.05),
    "gym_mountain_car": (lambda: _gym("MountainCarContinuous-v0"), 1 / 30),  # no dt: 1 / metadata["render_fps"]
}


@pytest.mark.parametrize("name", list(ENVS))
def test_every_env_states_its_control_step(name):
    make, expected = ENVS[name]
    env = make()
    try:
        assert env_step_dt(env) == pytest.approx(expected, rel=1e-12)
    finally:
        getattr(env, "close", lambda: None)()


def test_go2_states_its_control_step():
    pytest.importorskip("mujoco")
    env = make_task("go2", num_envs=1)
    assert env.step_dt == pytest.approx(env.cfg_task.sim.dt * env.cfg_task.sim.decimation)


def _ppo_cfg(rnd_cfg: dict, groups: list[str]) -> dict:
    return {"num_steps_per_env": 4, "obs_groups": {"actor": groups, "critic": groups, "rnd_state": groups},
            "actor": {"class_name": "MLPModel", "hidden_dims": [8], "distribution_cfg": GAUSSIAN},
            "critic": {"class_name": "MLPModel", "hidden_dims": [8]},
            "algorithm": {"class_name": "PPO", "rnd_cfg": {"num_outputs": 4, "predictor_hidden_dims": [8],
                                                           "target_hidden_dims": [8], **rnd_cfg}}}


@pytest.mark.parametrize("name", ["cartpole", "legged_gym", "rsl_rl_style"])
def test_rnd_bonus_is_scaled_by_the_env_step(name):
    make, expected = ENVS[name]
    env = make()
    obs = env.get_observations()
    alg = construct_algorithm(obs, env, _ppo_cfg({"weight": 2.0}, ["policy"]), "cpu")
    assert alg.rnd.step_dt == pytest.approx(expected)
    with torch.no_grad():
        error = alg.rnd.prediction_error(obs)
        torch.testing.assert_close(alg.rnd.get_intrinsic_reward(obs), 2.0 * expected * error)


def test_rnd_without_a_control_step_is_an_error():
    pytest.importorskip("gymnasium", minversion="1.1")
    from gym_test_envs import COUNTER_ID, register_test_envs

    register_test_envs()
    env = _gym(COUNTER_ID)  # neither dt nor render_fps
    try:
        assert env.step_dt is None
        obs = env.get_observations()
        with pytest.raises(ValueError, match=r"^RND needs the env's control step: set env.step_dt \(seconds per "
                                             r"env step\) on GymnasiumVecEnv or rnd_cfg.step_dt\.$"):
            construct_algorithm(obs, env, _ppo_cfg({}, ["policy"]), "cpu")
        # the config's own step wins, and an adapter takes one explicitly too
        alg = construct_algorithm(obs, env, _ppo_cfg({"step_dt": 0.25}, ["policy"]), "cpu")
        assert alg.rnd.step_dt == 0.25
    finally:
        env.close()
    override = _gym(COUNTER_ID, step_dt=0.125)
    try:
        assert env_step_dt(override) == 0.125
    finally:
        override.close()
