"""Tests of the Unitree Go2 MuJoCo task (rlcore_tasks/go2): physics, PD actuation, episode bookkeeping, rewards,
terrain and height scan, configuration errors, logging, exact resume, and a short learning run.

Expected values are computed by hand (numbers written out below) or from the pre-step state in float64,
never taken from the code under test. Every env here uses one MuJoCo thread and a handful of envs; the
learning test (marked ``learning``) trains 256 envs for 20 iterations.
"""

from __future__ import annotations

import copy
import math
import os
import time
import types

import mujoco
import numpy as np
import pytest
import torch
from tensordict import TensorDict

from rlcore.env import VecEnv
from rlcore.env.task import make_task
from rlcore_tasks.go2 import Go2Env
from rlcore_tasks.go2 import rewards as R
from rlcore_tasks.go2.config import ConfigError, make_config, no_randomization

DT = 0.02  # control period: 0.005 s physics step x decimation 4
DEFAULT_POSE = [0.1, 0.8, -1.5, -0.1, 0.8, -1.5, 0.1, 1.0, -1.5, -0.1, 1.0, -1.5]
TORQUE_LIMIT = [23.7, 23.7, 35.55] * 4  # hip, thigh, calf (unitree_rl_gym URDF effort limits)
SPAWN_HEIGHT = 0.34
# Robot mass: base 6.921 + 4 x (hip 0.678 + thigh 1.152 + calf 0.154 + foot 0.04) = 15.017 kg.
ROBOT_MASS = 6.921 + 4 * (0.678 + 1.152 + 0.154 + 0.04)
# Soft joint limits: middle of the range +- 0.9 x half the range.
#   hip [-1.0472, 1.0472]           -> [-0.94248, 0.94248]
#   front thigh [-1.5708, 3.4907]   -> mid 0.95995, half 2.277675 -> [-1.317725, 3.237625]
#   rear thigh [-0.5236, 4.5379]    -> mid 2.00715, half 2.277675 -> [-0.270525, 4.284825]
#   calf [-2.7227, -0.83776]        -> mid -1.78023, half 0.848223 -> [-2.628453, -0.932007]
HIP, THIGH_F, THIGH_R, CALF = (-0.94248, 0.94248), (-1.317725, 3.237625), (-0.270525, 4.284825), (-2.628453, -0.932007)
SOFT_LIMITS = [HIP, THIGH_F, CALF, HIP, THIGH_F, CALF, HIP, THIGH_R, CALF, HIP, THIGH_R, CALF]

# No observation noise, no domain randomisation, no pushes, no random initial state.
QUIET = {
    "sim": {"threads": 1},
    "obs": {"add_noise": False},
    "domain_rand": no_randomization(),
    "init": {"joint_pos_scale": [1.0, 1.0], "base_lin_vel": 0.0, "base_ang_vel": 0.0, "random_yaw": False},
}


def merged(base: dict, extra: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def make_env(num_envs: int = 4, seed: int = 0, quiet: bool = True, **overrides) -> Go2Env:
    base = QUIET if quiet else {"sim": {"threads": 1}}
    return Go2Env(num_envs=num_envs, seed=seed, **merged(base, overrides))


def quat_x(angle: float) -> list[float]:
    """(w, x, y, z) of a rotation by ``angle`` about the x axis."""
    return [math.cos(angle / 2), math.sin(angle / 2), 0.0, 0.0]


def gravity_in_rot_x(angle: float) -> list[float]:
    """(0, 0, -1) seen from a base rotated by ``angle`` about x: R_x^T (0, 0, -1) = (0, -sin, -cos)."""
    return [0.0, -math.sin(angle), -math.cos(angle)]


def close(a: torch.Tensor, b, atol: float = 1e-5) -> bool:
    return torch.allclose(torch.as_tensor(a).double(), torch.as_tensor(b, dtype=torch.float64), atol=atol, rtol=0)


# ============================================================================ contract, model
def test_contract_shapes_and_model_constants():
    env = make_env(3)
    assert isinstance(env, VecEnv) and env.num_actions == 12 and isinstance(env.cfg, dict)
    assert env.dt == pytest.approx(DT) and env.max_episode_length == 1000  # 20 s / 0.02 s
    obs = env.get_observations()
    assert isinstance(obs, TensorDict) and obs.batch_size == torch.Size([3])
    # policy 45 = ang_vel 3 + gravity 3 + command 3 + dof_pos 12 + dof_vel 12 + last action 12;
    # privileged 47 = lin_vel 3 + friction + added mass + motor strength + 4 foot forces + push 2
    #   + kp, kd scale + damping, frictionloss, armature + latency + foot solref, dmin, width, condim6 + 4 legs
    #   + CoM offset 3 + gyro bias 3 + gravity bias 3 + encoder bias 12;
    # height scan 11 (y: -0.5..0.5) x 17 (x: -0.8..0.8) at 0.1 m.
    assert obs["policy"].shape == (3, 45) and obs["privileged"].shape == (3, 47)
    assert obs["height_scan"].shape == (3, 1, 11, 17)
    obs, rew, done, extras = env.step(torch.zeros(3, 12))
    assert rew.shape == (3,) and rew.dtype == torch.float32 and done.dtype == torch.bool
    assert extras["time_outs"].dtype == torch.bool and extras["final_observations"].batch_size == torch.Size([3])
    assert env.episode_length_buf.dtype == torch.long and env.episode_length_buf.tolist() == [1, 1, 1]
    # Model constants against the facts sheet.
    assert float(env.sim.model.body_mass.sum()) == pytest.approx(ROBOT_MASS, abs=1e-6)  # 15.017
    assert env.sim.solver_options()["torque_limits"] == TORQUE_LIMIT
    assert torch.equal(env.sim.torque_limit, torch.tensor(TORQUE_LIMIT))
    assert close(env.default_dof_pos, DEFAULT_POSE)
    assert close(env.soft_dof_limits, SOFT_LIMITS, atol=2e-6)
    assert env.sim.model.opt.timestep == 0.005


def test_make_task_names_build_go2():
    flat = make_task("go2", num_envs=2, seed=0, sim={"threads": 1})
    rough = make_task("go2_rough", num_envs=2, seed=0, sim={"threads": 1},
                      terrain={"num_levels": 2, "num_cols": 5, "tile_size": 4.0})
    assert isinstance(flat, Go2Env) and flat.terrain.is_flat
    assert isinstance(rough, Go2Env) and not rough.terrain.is_flat and rough.cfg_task.terrain.num_levels == 2


# ============================================================================ 1. standing
def test_stands_at_default_pose_for_two_seconds_under_zero_action():
    env = make_env(4)
    heights, tilts = [], []
    for _ in range(100):  # 2 s at 50 Hz
        _, _, dones, _ = env.step(torch.zeros(4, 12))
        assert not dones.any()
        heights.append(env.base_pos[:, 2].clone())
        tilts.append(env.projected_gravity[:, :2].norm(dim=1))
    heights, tilts = torch.stack(heights), torch.stack(tilts)
    # Spawned at 0.34 m with the feet ~2 cm above the ground; kp = 20 lets it sag to ~0.25 m (measured:
    # min 0.240 while landing, 0.247 at 2 s).
    assert heights.min() > 0.22 and heights.max() < 0.345
    assert heights[-1].min() > 0.23
    # Level: landing rocks it (|g_xy| up to ~0.13), then it settles under 0.05 over the last 0.5 s (measured 0.024).
    assert tilts.max() < 0.2 and tilts[75:].max() < 0.05
    assert (env.dof_pos - env.default_dof_pos).abs().max() < 0.4
    # It stands on its feet: the foot normal forces carry the weight m g = 15.017 x 9.81 = 147.3 N,
    # nothing else touches the ground.
    assert close(env.foot_forces.sum(dim=1), [ROBOT_MASS * 9.81] * 4, atol=0.03 * ROBOT_MASS * 9.81)
    assert (env.foot_forces > 20).all()
    assert (env.collision_forces == 0).all() and (env.base_contact_force == 0).all()
    # Nearly at rest, so the PD law holds on the last state: tau = kp (q_default - q) - kd qdot (kd qdot < 0.05).
    assert np.abs(env.sim.qvel).max() < 0.2
    assert close(env.torques, 20.0 * (env.default_dof_pos - env.dof_pos) - 0.5 * env.dof_vel, atol=0.02)


def foot_positions(env: Go2Env) -> np.ndarray:
    m = env.sim.model
    d = mujoco.MjData(m)
    out = []
    for qpos in env.sim.qpos:
        d.qpos[:] = qpos
        mujoco.mj_kinematics(m, d)
        out.append(d.geom_xpos[[m.geom(f"{leg}_foot").id for leg in ("FL", "FR", "RL", "RR")]].copy())
    return np.stack(out)


def test_feet_do_not_slide_while_standing():
    env = make_env(2)
    for step in range(100):
        env.step(torch.zeros(2, 12))
        if step == 49:
            feet_at_1s = foot_positions(env)
    slip = np.linalg.norm((foot_positions(env) - feet_at_1s)[..., :2], axis=-1)  # [env, foot] over the 2nd second
    hips = (env.dof_pos - env.default_dof_pos)[:, [0, 3, 6, 9]]
    assert slip.max() < 0.010, f"feet slid {slip.max() * 1000:.1f} mm in 1 s"
    assert hips.abs().max() < 0.1, f"hips splayed {hips.abs().max():.3f} rad"
    assert env.base_pos[:, 2].min() > 0.25


# ============================================================================ 2. PD torque
def test_pd_torque_formula_and_limit_at_one_physics_step():
    env = make_env(3, sim={"decimation": 1}, domain_rand={"randomize_motor_strength": True})
    sim = env.sim
    strength = np.array([sim.physical[v].motor_strength for v in sim.env_variant.tolist()])  # [3]
    assert np.all(np.abs(strength - 1.0) > 1e-4) and np.all((strength >= 0.9) & (strength <= 1.1))
    rng = np.random.default_rng(1)
    sim.qpos[:, 2] = 1.0  # in the air: no contacts
    sim.qpos[:, 7:] = np.asarray(DEFAULT_POSE) + rng.uniform(-0.3, 0.3, (3, 12))
    sim.qvel[:, 6:] = rng.uniform(-3.0, 3.0, (3, 12))
    env.sim.refresh()  # after writing the MuJoCo backend's numpy state
    env._refresh_state()
    actions = torch.tensor(rng.uniform(-2.0, 2.0, (3, 12)), dtype=torch.float32)
    actions[0, 0] = 100.0  # FL hip target +25 rad: +23.7 N m
    actions[1, 2] = -100.0  # FL calf target -25 rad: -35.55 N m
    actions[2, 4] = 1000.0  # FR thigh: clipped to the action limit 100, then to +23.7 N m
    actions[2, 11] = -60.0  # RR calf: -15 rad offset, -35.55 N m
    q, qdot = sim.qpos[:, 7:].copy(), sim.qvel[:, 6:].copy()
    # Targets as the env forms them (float32), then the PD law in float64 on the pre-step state.
    target = (torch.tensor(DEFAULT_POSE) + 0.25 * actions.clamp(-100, 100)).double().numpy()
    limit = np.asarray(TORQUE_LIMIT)
    expected = np.clip(strength[:, None] * (20.0 * (target - q) - 0.5 * qdot), -limit, limit)
    env.step(actions)
    measured = sim.sensordata[:, sim.torque_sensor]
    np.testing.assert_allclose(measured, expected, atol=1e-9, rtol=0)
    assert measured[0, 0] == 23.7 and measured[1, 2] == -35.55 and measured[2, 4] == 23.7
    assert measured[2, 11] == -35.55
    assert (np.abs(measured) < limit - 1e-6).sum() == 3 * 12 - 4  # every other joint is inside its limit
    assert close(env.torques, measured, atol=1e-5)


# ============================================================================ 3-4. resets, time-outs
def test_resets_touch_only_finished_envs():
    env = make_env(6)
    act = torch.full((6, 12), 0.1)
    for _ in range(3):
        env.step(act)
    flipped = [1, 4]
    env.sim.qpos[:, 0] += 0.5  # an x offset on every env: must survive where no reset happens
    env.sim.qpos[flipped, 3:7] = [0.0, 1.0, 0.0, 0.0]  # upside down (180 deg about x)
    env.sim.refresh()  # after writing the MuJoCo backend's numpy state
    env._refresh_state()
    x_before = env.sim.qpos[:, 0].copy()
    obs, _, dones, extras = env.step(act)
    assert dones.tolist() == [i in flipped for i in range(6)]
    assert not extras["time_outs"].any()
    kept = [i for i in range(6) if i not in flipped]
    # Reset envs: spawn pose (flat terrain origin, yaw 0, default joints, at rest), fresh buffers.
    assert close(env.base_pos[flipped], [[0.0, 0.0, SPAWN_HEIGHT]] * 2)
    assert close(env.base_quat[flipped], [[1.0, 0.0, 0.0, 0.0]] * 2)
    assert close(env.dof_pos[flipped], [DEFAULT_POSE] * 2)
    assert np.all(env.sim.qvel[flipped] == 0.0)
    assert env.episode_length_buf[flipped].tolist() == [0, 0]
    assert (env.actions[flipped] == 0).all() and (env.last_actions[flipped] == 0).all()
    assert close(obs["policy"][flipped, 3:6], [[0.0, 0.0, -1.0]] * 2)
    assert (obs["policy"][flipped, 33:45] == 0).all()  # last action cleared
    # The others: untouched by the reset.
    assert env.episode_length_buf[kept].tolist() == [4] * 4
    assert np.all(np.abs(env.sim.qpos[kept, 0] - x_before[kept]) < 0.01) and np.all(env.sim.qpos[kept, 0] > 0.4)
    assert close(env.actions[kept], act[kept]) and close(obs["policy"][kept, 33:45], act[kept])
    assert close(env.projected_gravity[kept, 2], [-1.0] * 4, atol=0.01)


def test_time_outs_and_terminals_are_flagged_apart_with_final_observations():
    env = make_env(4)
    n = env.max_episode_length
    tilt = 2.5  # rad about x: beyond max_tilt = 1 rad
    s = env.sim
    # Envs 0-2 in free fall at 1 m (no contact, no joint torque: q = target, qdot = 0).
    s.qpos[0:3, 0:3] = [0.0, 0.0, 1.0]
    s.qpos[1:3, 3:7] = quat_x(tilt)
    s.qvel[0, 0:3] = [0.3, -0.2, 0.0]
    env.sim.refresh()  # after writing the MuJoCo backend's numpy state
    env._refresh_state()
    env.episode_length_buf[:] = torch.tensor([n - 1, n - 1, 10, 10])
    obs, rewards, dones, extras = env.step(torch.zeros(4, 12))
    assert dones.tolist() == [True, True, True, False]
    assert extras["time_outs"].tolist() == [True, False, False, False]  # upright at the limit: time-out only
    assert env.terminated.tolist() == [False, True, True, False]
    final = extras["final_observations"]
    # Gravity before the reset: (0, 0, -1) upright; (0, -sin 2.5, -cos 2.5) = (0, -0.5985, 0.8011) tilted.
    assert close(final["policy"][0, 3:6], [0.0, 0.0, -1.0])
    assert close(final["policy"][1:3, 3:6], [gravity_in_rot_x(tilt)] * 2, atol=1e-5)
    assert final["policy"][1, 5] > 0.8
    # Free fall for 4 steps of 5 ms: v = (0.3, -0.2, -4 x 0.005 x 9.81 = -0.1962), scaled by 2.
    assert close(final["privileged"][0, 0:3], [0.6, -0.4, -0.3924], atol=1e-5)
    # The returned observations are the first ones of the new episodes: upright, at rest.
    assert close(obs["policy"][0:3, 3:6], [[0.0, 0.0, -1.0]] * 3)
    assert close(obs["privileged"][0:3, 0:3], [[0.0, 0.0, 0.0]] * 3)
    assert env.episode_length_buf.tolist() == [0, 0, 0, 11]
    # Rows that are not done: final observation = returned observation, but for the yaw-rate command, which the
    # heading controller updates after the rewards.
    keep = [i for i in range(45) if i != 8]
    assert torch.equal(final["policy"][3, keep], obs["policy"][3, keep])
    assert torch.equal(final["privileged"][3], obs["privileged"][3])


# ============================================================================ 5. rewards
def reward_state(cfg=None) -> types.SimpleNamespace:
    """Three envs in hand-made states (A: walking well, B: a crash that terminates, C: B without terminating)."""
    dof_b = list(DEFAULT_POSE)
    dof_b[0] = 1.0  # FL hip 0.05752 above its soft limit 0.94248
    dof_b[5] = -2.7  # FR calf 0.071547 below its soft limit -2.628453
    ones = [1.0] * 12
    b = {
        "commands": [0.0, 0.0, 0.0], "base_lin_vel": [0.0, 0.0, -0.5], "base_ang_vel": [1.0, 0.0, 0.5],
        "projected_gravity": [0.6, 0.0, -0.8], "base_height": 0.10, "torques": [2.0] * 12,
        "dof_vel": [0.0] * 12, "last_dof_vel": [0.1] * 12, "actions": ones, "last_actions": [0.0] * 12,
        "feet_air_time": [0.9, 0.9, 0.0, 0.0], "first_contact": [True, True, False, False],
        "collision_forces": [1.0] * 8, "dof_pos": dof_b, "base_lin_vel_mean": [0.0, 0.0],
    }
    a = {
        "commands": [1.0, 0.5, 0.3], "base_lin_vel": [0.5, 0.5, 0.1], "base_ang_vel": [0.2, -0.3, 0.8],
        "projected_gravity": [0.1, -0.2, -0.9747], "base_height": 0.25, "torques": [1.0, -2.0, 3.0] + [0.0] * 9,
        "dof_vel": [0.5] * 12, "last_dof_vel": [0.3] * 12, "actions": [0.5] * 12, "last_actions": [0.2] * 12,
        "feet_air_time": [0.8, 0.3, 0.6, 0.1], "first_contact": [True, True, False, False],
        "collision_forces": [0.05, 0.0, 0.0, 0.1, 0.0, 0.0, 0.0, 0.0], "dof_pos": list(DEFAULT_POSE),
        "base_lin_vel_mean": [0.9, 0.45],
    }
    rows = [a, b, b]
    ns = types.SimpleNamespace(
        cfg_task=cfg or make_config(), dt=DT, soft_dof_limits=torch.tensor(SOFT_LIMITS),
        terminated=torch.tensor([False, True, False]),
    )
    for key in a:
        value = torch.tensor([r[key] for r in rows])
        setattr(ns, key, value if value.dtype == torch.bool else value.float())
    return ns


E1 = math.exp(-1.0)  # 0.36787944
# Unweighted values of every term for envs A, B, C (hand computed from reward_state):
TERM_VALUES = {
    # A: |(1, 0.5) - (0.5, 0.5)|^2 = 0.25 -> exp(-0.25 / 0.25); B, C: command 0, v_xy 0 -> exp(0)
    "tracking_lin_vel": [E1, 1.0, 1.0],
    # the same squared error over the narrow kernel 0.05: A exp(-0.25 / 0.05) = exp(-5); B, C exp(0)
    "tracking_lin_vel_fine": [math.exp(-5.0), 1.0, 1.0],
    # the averaged velocity over the kernel 0.01: A |(1, 0.5) - (0.9, 0.45)|^2 = 0.0125 -> exp(-1.25); B, C exp(0)
    "tracking_lin_vel_mean": [math.exp(-1.25), 1.0, 1.0],
    # the error itself: A sqrt(0.25) = 0.5; B, C sqrt(0 + 1e-8) = 1e-4 (the epsilon under the root)
    "tracking_lin_vel_abs": [0.5, 1e-4, 1e-4],
    # A: |(0.5, 0.5) - (0.9, 0.45)|^2 = 0.16 + 0.0025; B, C: v_xy = mean = 0
    "lin_vel_sway": [0.1625, 0.0, 0.0],
    # A: (0.3 - 0.8)^2 = 0.25; B: (0 - 0.5)^2 = 0.25
    "tracking_ang_vel": [E1, E1, E1],
    "lin_vel_z": [0.01, 0.25, 0.25],  # 0.1^2, 0.5^2
    "ang_vel_xy": [0.13, 1.0, 1.0],  # 0.2^2 + 0.3^2, 1^2
    "orientation": [0.05, 0.36, 0.36],  # 0.1^2 + 0.2^2, 0.6^2
    "base_height": [0.0025, 0.04, 0.04],  # (0.25 - 0.30)^2, (0.10 - 0.30)^2
    "torques": [14.0, 48.0, 48.0],  # 1 + 4 + 9, 12 x 4
    "dof_vel": [3.0, 0.0, 0.0],  # 12 x 0.25
    "dof_acc": [1200.0, 300.0, 300.0],  # 12 x (0.2 / 0.02)^2, 12 x (0.1 / 0.02)^2
    "action_rate": [1.08, 12.0, 12.0],  # 12 x 0.3^2, 12 x 1
    # A: (0.8 - 0.3) + (0.3 - 0.3) over the two feet touching down (target 0.3 s) = 0.5; B: command 0 -> 0
    "feet_air_time": [0.5, 0.0, 0.0],
    "collision": [0.0, 8.0, 8.0],  # A: 0.05 and 0.1 are not > 0.1
    "dof_pos_limits": [0.0, 0.129067, 0.129067],  # 0.05752 + 0.071547
    "termination": [0.0, 1.0, 0.0],
}
WEIGHTS = {"tracking_lin_vel": 1.0, "tracking_lin_vel_fine": 0.0, "tracking_lin_vel_mean": 0.0,
           "tracking_lin_vel_abs": 0.0, "lin_vel_sway": 0.0, "tracking_ang_vel": 0.5, "lin_vel_z": -2.0, "ang_vel_xy": -0.05,
           "orientation": -1.0, "base_height": -10.0, "torques": -1.0e-4, "dof_vel": 0.0, "dof_acc": -2.5e-7,
           "action_rate": -0.01, "feet_air_time": 1.0, "collision": -1.0, "dof_pos_limits": -2.0,
           "termination": 0.0}


@pytest.mark.parametrize("name", sorted(TERM_VALUES))
def test_reward_term_hand_values(name):
    value = R.REWARD_TERMS[name](reward_state())
    assert value.shape == (3,)
    assert close(value, TERM_VALUES[name], atol=1e-5), f"{name}: {value.tolist()} != {TERM_VALUES[name]}"


def test_mean_velocity_is_a_moving_average_of_the_planar_velocity_and_restarts_at_reset():
    """base_lin_vel_mean (tracking_lin_vel_mean's input): m <- m + dt / tau (v_xy - m) after every step's physics,
    zero for a new episode; with a 0.04 s time constant it is half the last velocity plus half the average before."""
    env = make_env(3, rewards={"mean_vel_tau": 0.04})
    expected = torch.zeros(3, 2)
    actions = 0.5 * torch.randn(5, 3, 12, generator=torch.Generator().manual_seed(0))
    for a in actions:
        env.step(a)
        expected += 0.5 * (env.base_lin_vel[:, :2] - expected)  # dt / tau = 0.02 / 0.04
        assert close(env.base_lin_vel_mean, expected, atol=1e-6)
    assert expected.abs().max() > 0.01  # it moved
    state = copy.deepcopy(env.state_dict())  # part of the env state; a state saved before it existed: from rest
    other = make_env(3, rewards={"mean_vel_tau": 0.04})
    other.load_state_dict(copy.deepcopy(state))
    assert torch.equal(other.base_lin_vel_mean, env.base_lin_vel_mean)
    del state["base_lin_vel_mean"]
    other.load_state_dict(state)
    assert torch.equal(other.base_lin_vel_mean, torch.zeros(3, 2))
    env._reset_envs(torch.tensor([1]))
    assert close(env.base_lin_vel_mean[1], [0.0, 0.0], atol=0.0) and close(env.base_lin_vel_mean[0], expected[0])


def test_feet_air_time_on_turns_pays_steps_under_a_turn_in_place():
    """A turn-only command (no planar part): the air-time term is 0 by default (legged_gym) and, with
    rewards.feet_air_time_on_turns, the same sum over touching-down feet as for a planar command."""
    off, on = reward_state(), reward_state(make_config({"rewards": {"feet_air_time_on_turns": True}}))
    for ns in (off, on):  # A turns in place at 1 rad/s; B and C: a yaw rate of 0.05, under the 0.1 threshold
        ns.commands = torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 0.05], [0.0, 0.0, 0.05]])
    assert close(R.feet_air_time(off), [0.0, 0.0, 0.0], atol=1e-7)
    # A: (0.8 - 0.3) + (0.3 - 0.3); B and C: below the threshold, still 0 (their feet at 0.9 s would pay 1.2)
    assert close(R.feet_air_time(on), [0.5, 0.0, 0.0], atol=1e-6)


def test_every_reward_term_is_tested_and_default_weights():
    assert set(R.REWARD_TERMS) == set(TERM_VALUES)
    assert make_config().rewards.weights == WEIGHTS


def test_total_reward_weights_times_dt_clip_then_termination():
    env = make_env(3, rewards={"weights": {"termination": -100.0}})
    weights = dict(WEIGHTS, termination=-100.0)
    assert {name: w for name, _, w in env.reward_terms} == {
        k: pytest.approx(w * DT) for k, w in weights.items() if w != 0}  # dof_vel (weight 0) is left out
    state = reward_state(env.cfg_task)
    for key, value in vars(state).items():
        if key not in ("cfg_task", "dt", "soft_dof_limits"):
            setattr(env, key, value)
    assert close(env.soft_dof_limits, state.soft_dof_limits, atol=2e-6)
    raw = [sum(weights[k] * DT * TERM_VALUES[k][i] for k in weights if k != "termination") for i in range(3)]
    # A: (0.551819 - 0.02 - 0.0065 - 0.05 - 0.025 - 0.0014 - 0.0003 - 0.0108 + 0.5) x 0.02 = 0.937819 x 0.02
    assert raw[0] == pytest.approx(0.937819 * DT, abs=1e-7) and raw[1] < 0 and raw[2] < 0
    total = env._compute_rewards()
    # Clip at 0 first, then the termination penalty: A unchanged, B = 0 - 100 x 0.02, C = 0.
    assert close(total, [raw[0], -2.0, 0.0], atol=1e-6)
    for name, _, w in env.reward_terms:  # episode sums got the weighted values
        assert close(env.episode_sums[name], [w * v for v in TERM_VALUES[name]], atol=1e-6)
    env.cfg_task.rewards.only_positive_rewards = False
    assert close(env._compute_rewards(), [raw[0], raw[1] - 2.0, raw[2]], atol=1e-6)


# ============================================================================ 7. terrain, height scan
ROUGH = {"type": "rough", "num_levels": 3, "num_cols": 5, "tile_size": 4.0}


@pytest.fixture(scope="module")
def rough_env():
    return make_env(2, terrain=ROUGH)


class GroundRay:
    """Height of MuJoCo's own ground surface under (x, y), by a ray cast straight down onto the ground geom."""

    def __init__(self, env: Go2Env) -> None:
        self.m = env.sim.model
        self.d = mujoco.MjData(self.m)
        self.d.qpos[2] = 100.0  # the robot far above the rays' start
        mujoco.mj_forward(self.m, self.d)
        self.ground = env.sim.ground_geom
        self.geomgroup = np.zeros(6, dtype=np.uint8)
        self.geomgroup[self.m.geom_group[self.ground]] = 1

    def __call__(self, x: float, y: float) -> float:
        geomid = np.full(1, -1, dtype=np.int32)
        dist = mujoco.mj_ray(self.m, self.d, np.array([x, y, 20.0]), np.array([0.0, 0.0, -1.0]),
                             self.geomgroup, 1, -1, geomid)
        assert geomid[0] == self.ground and dist > 0
        return 20.0 - dist


def triangle_height(h: np.ndarray, hscale: float, x: float, y: float) -> float:
    """MuJoCo's height-field surface: each cell split into two triangles along (x0, y0)-(x0+1, y0+1)."""
    gx, gy = x / hscale, y / hscale
    j, i = int(gx), int(gy)
    fx, fy = gx - j, gy - i
    if fx >= fy:  # triangle (0,0) (1,0) (1,1)
        return h[i, j] + fx * (h[i, j + 1] - h[i, j]) + fy * (h[i + 1, j + 1] - h[i, j + 1])
    return h[i, j] + fy * (h[i + 1, j] - h[i, j]) + fx * (h[i + 1, j + 1] - h[i + 1, j])


def test_rough_terrain_layout(rough_env):
    rough_env.reset()
    t = rough_env.terrain
    # 3 levels along x, 5 columns along y (the default shares over 5 columns: 1 slope, 1 rough slope, 1 stairs up,
    # 1 stairs down, 1 discrete; random's 0.1 loses the remainder to discrete's 0.2), 40 cells of 0.1 m per 4 m tile,
    # inside a flat 3 m (30 cell) border: heights [30 + 5 x 40 + 1 + 30, 30 + 3 x 40 + 1 + 30].
    b = 30
    assert t.border == pytest.approx(3.0)
    assert tuple(t.heights.shape) == (261, 181) and t.tile_kinds() == [
        "slope", "rough_slope", "stairs_up", "stairs_down", "discrete"]
    # Envs spawn on their tile centre (3 + (level + 0.5) x 4, 3 + (col + 0.5) x 4), 0.34 m above its height 0.
    origins = t.origins()
    assert close(origins[:, 0], 3.0 + (t.levels.double() + 0.5) * 4.0)
    assert close(origins[:, 1], 3.0 + (t.cols.double() + 0.5) * 4.0)
    assert close(origins[:, 2], [0.0, 0.0], atol=1e-6)
    assert close(rough_env.base_pos[:, 2], [SPAWN_HEIGHT] * 2, atol=1e-6)
    h = t.heights_np
    assert np.all(h[:b] == 0.0) and np.all(h[-b:] == 0.0) and np.all(h[:, :b] == 0.0) and np.all(h[:, -b:] == 0.0)
    # The level 0 slope tile is flat; on the hardest one (slope tan 25 deg = 0.4663, a hill: the first slope column)
    # the last vertex of the centre row lies 1.9 m from the centre (vertex j of a 4 m tile at j x 0.1 - 2 m), 0.9 m
    # past the 1 m platform: 0.9 x 0.4663 = 0.420 m below it, and so on the rough slope's hill (with +-0.5 x 6 cm of
    # roughness on it). With 5 columns neither is a pit: each is the
    # first column of its kind (every other column of a kind is a pit, tests/tasks/test_go2_terrain.py).
    assert np.all(h[b:b + 40, b:b + 40] == 0.0)
    assert h[b + 20, b + 80 + 39] == pytest.approx(-math.tan(math.radians(25.0)) * (1.9 - 1.0), abs=1e-9)
    assert h[b + 20, b + 80 + 31:b + 120].max() < 0.0  # walking out of the platform goes down
    assert h[b + 60, b + 80 + 39] == pytest.approx(-0.4197, abs=0.03 + 1e-4)  # +-3 cm of roughness
    assert h[b + 60, b + 80 + 39] != pytest.approx(-0.4197, abs=1e-4)  # the rough slope is rough


def test_height_at_matches_mujoco_ground_at_vertices(rough_env):
    ray, t = GroundRay(rough_env), rough_env.terrain
    h, hs = t.heights_np, t.hscale
    rng = np.random.default_rng(0)
    rows, cols = h.shape
    # (the last row and column are left to test_height_at_clamps_points_on_and_beyond_the_far_edges)
    ij = np.stack([rng.integers(0, rows - 1, 300), rng.integers(0, cols - 1, 300)], axis=1)
    ij = np.concatenate([ij, [[0, 0], [rows - 2, cols - 2], [100, 60], [120, 45]]])
    xy = torch.tensor(ij[:, ::-1] * hs, dtype=torch.float32)
    ours = t.height_at(xy).numpy()
    mj = np.array([ray(x, y) for x, y in (ij[:, ::-1] * hs)])
    assert np.abs(h[ij[:, 0], ij[:, 1]]).max() > 0.3  # the sample covers real relief
    np.testing.assert_allclose(mj, h[ij[:, 0], ij[:, 1]], atol=1e-5)  # MuJoCo's field = our grid, row = y
    np.testing.assert_allclose(ours, mj, atol=1e-5)


def test_triangle_model_of_mujoco_ground_inside_cells(rough_env):
    """Inside cells MuJoCo's surface is two triangles per cell (this oracle), checked at random points."""
    ray, t = GroundRay(rough_env), rough_env.terrain
    rng = np.random.default_rng(1)
    rows, cols = t.heights_np.shape
    pts = rng.uniform([0, 0], [(cols - 1) * t.hscale, (rows - 1) * t.hscale], (400, 2))
    mj = np.array([ray(x, y) for x, y in pts])
    tri = np.array([triangle_height(t.heights_np, t.hscale, x, y) for x, y in pts])
    np.testing.assert_allclose(mj, tri, atol=1e-5)


def test_height_at_matches_mujoco_ground_mid_cell(rough_env):
    ray, t = GroundRay(rough_env), rough_env.terrain
    rng = np.random.default_rng(2)
    rows, cols = t.heights_np.shape
    ij = np.stack([rng.integers(0, rows - 1, 1000), rng.integers(0, cols - 1, 1000)], axis=1)
    xy = (ij[:, ::-1] + 0.5) * t.hscale
    ours = t.height_at(torch.tensor(xy, dtype=torch.float32)).numpy()
    mj = np.array([ray(x, y) for x, y in xy])
    assert np.abs(ours - mj).max() < 0.002, f"max {np.abs(ours - mj).max() * 1000:.1f} mm"


def test_height_at_clamps_points_on_and_beyond_the_far_edges(rough_env):
    t = rough_env.terrain
    h, hs = t.heights_np, t.hscale
    rows, cols = h.shape
    far_x, far_y = (cols - 1) * hs, (rows - 1) * hs  # 12 m, 20 m
    pts = torch.tensor([[far_x, 5.0], [5.0, far_y], [far_x + 3.0, far_y + 3.0], [-2.0, -2.0]], dtype=torch.float32)
    expected = [h[50, cols - 1], h[rows - 1, 50], h[rows - 1, cols - 1], h[0, 0]]
    assert close(t.height_at(pts), expected, atol=1e-5)
    rough_env.sim.qpos[0, 0:3] = [far_x - 0.5, 5.0, 0.5]  # a robot half a metre from the last level's edge
    rough_env.sim.qpos[0, 3:7] = [1.0, 0.0, 0.0, 0.0]
    rough_env.sim.refresh()  # after writing the MuJoCo backend's numpy state
    rough_env._refresh_state()
    assert torch.isfinite(rough_env._observe()["height_scan"]).all()


def test_height_scan_observation_at_a_known_pose(rough_env):
    env = rough_env
    yaw, pitch = 0.7, 0.2
    # q = q_z(yaw) * q_y(pitch): the heading is yaw, the scan grid turns with the yaw only.
    cy, sy, cp, sp = math.cos(yaw / 2), math.sin(yaw / 2), math.cos(pitch / 2), math.sin(pitch / 2)
    quat = [cy * cp, -sy * sp, cy * sp, sy * cp]
    # Level 1 (x 7..11 after the 3 m border), stairs_up column (y 11..15), 0.9 / 1.1 m from the tile centre (9, 13):
    # the scan reaches the first steps (0.115 m each at this level, every 0.3 m beyond the 1 m platform).
    base = [3.0 + 6.9, 3.0 + 8.9, 0.45]  # after the flat 3 m border
    env.sim.qpos[0, 0:3] = base
    env.sim.qpos[0, 3:7] = quat
    env.sim.qpos[1, 0:3] = [2.0, 2.0, 3.0]  # 3 m above flat ground: every point clipped at +1 m
    env.sim.qpos[1, 3:7] = [1.0, 0.0, 0.0, 0.0]
    env.sim.refresh()  # after writing the MuJoCo backend's numpy state
    env._refresh_state()
    scan = env._observe()["height_scan"]
    xs, ys = np.linspace(-0.8, 0.8, 17), np.linspace(-0.5, 0.5, 11)
    lx, ly = np.meshgrid(xs, ys)  # [11 (y), 17 (x)]
    wx = base[0] + math.cos(yaw) * lx - math.sin(yaw) * ly
    wy = base[1] + math.sin(yaw) * lx + math.cos(yaw) * ly
    terrain = env.terrain.height_at(torch.tensor(np.stack([wx, wy], -1), dtype=torch.float32)).double().numpy()
    expected = np.clip(base[2] - terrain - 0.30, -1.0, 1.0) * 5.0
    assert np.ptp(terrain) > 0.05  # the scan sees steps
    np.testing.assert_allclose(scan[0, 0].numpy(), expected, atol=1e-4)
    assert torch.all(scan[1] == 5.0)
    # base_height (rewards, termination) is measured above the terrain under the base.
    under = env.terrain.height_at(torch.tensor([base[:2]], dtype=torch.float32)).item()
    assert env.base_height[0].item() == pytest.approx(base[2] - under, abs=1e-5)


# ============================================================================ observations, randomisation, commands
def test_observation_layout_and_scales_at_a_written_state():
    env = make_env(1)
    s = env.sim
    s.qpos[0, 0:7] = [0.0, 0.0, 0.6, math.cos(math.pi / 4), 0.0, 0.0, math.sin(math.pi / 4)]  # yaw 90 deg
    dq = np.linspace(-0.2, 0.2, 12)
    s.qpos[0, 7:] = np.asarray(DEFAULT_POSE) + dq
    qd = np.linspace(-2.0, 2.0, 12)
    qd[11] = 3000.0  # 150 after the 0.05 scale: clipped at 100
    s.qvel[0] = np.concatenate([[1.0, 0.5, 0.2], [0.4, -0.8, 1.2], qd])  # world lin vel, body ang vel, joints
    s.sensordata[0, s.foot_sensor] = [50.0, 0.0, 25.0, 100.0]
    env.commands[:] = torch.tensor([[0.5, -0.3, 0.8]])
    env.actions[:] = torch.linspace(-1.0, 1.0, 12)
    env.push_vel[:] = torch.tensor([[0.3, -0.1]])
    env.sim.refresh()  # after writing the MuJoCo backend's numpy state
    env._refresh_state()
    obs = env._observe()
    p, q = obs["policy"][0], obs["privileged"][0]
    assert close(p[0:3], [0.1, -0.2, 0.3])  # ang vel x 0.25
    assert close(p[3:6], [0.0, 0.0, -1.0])
    assert close(p[6:9], [1.0, -0.6, 0.2])  # command x (2, 2, 0.25)
    assert close(p[9:21], dq)
    assert close(p[21:32], qd[:11] * 0.05) and p[32].item() == 100.0
    assert close(p[33:45], np.linspace(-1.0, 1.0, 12))
    # World velocity (1, 0.5, 0.2) seen from a base yawed by 90 deg: (0.5, -1, 0.2), x 2.
    assert close(q[0:3], [1.0, -2.0, 0.4])
    assert close(q[3:6], [1.0, 0.0, 1.0])  # friction, added mass, motor strength without randomisation
    assert close(q[6:10], [0.5, 0.0, 0.25, 1.0])  # foot forces / 100
    assert close(q[10:12], [0.3, -0.1])
    assert torch.equal(q[12:47], torch.zeros(35))  # the nominal robot's parameters and no bias read as zeros
    assert close(obs["height_scan"], torch.full((1, 1, 11, 17), (0.6 - 0.30) * 5.0))  # flat ground


def test_flat_height_scan_skips_the_grid_bit_for_bit():
    # On flat ground the scan skips the scan grid and the height lookup; the values must be those of the
    # general path (grid points -> sim.heights), noise included, step after step (the scan's map errors, which
    # the general path would add, off: they exist on rough terrain only).
    dr = {"randomize_height_scan": False}
    fast, general = make_env(6, seed=3, quiet=False, domain_rand=dr), make_env(6, seed=3, quiet=False, domain_rand=dr)
    general.terrain.is_flat = False  # the terrain is still the flat plane: only the shortcut is off
    g = torch.Generator().manual_seed(0)
    for _ in range(5):
        a = 0.5 * torch.randn(6, 12, generator=g)
        (o1, *_), (o2, *_) = fast.step(a), general.step(a)
        assert torch.equal(o1["height_scan"], o2["height_scan"]) and torch.equal(o1["policy"], o2["policy"])
    general.sim.qpos[0, 2] = 2.0  # far above the ground: the relative height clips at 1 on both paths
    fast.sim.qpos[0, 2] = 2.0
    for e in (fast, general):
        e.sim.refresh()
        e._refresh_state()
    o1, o2 = fast._observe(), general._observe()
    assert torch.equal(o1["height_scan"], o2["height_scan"])
    assert o1["height_scan"][0].min() >= 0.85 * fast.cfg_task.obs.height_scale


def test_domain_randomisation_variants():
    env = make_env(8, quiet=False, domain_rand={"curriculum_steps": 0})  # the full ranges from the start
    s = env.sim
    k = len(s.variants)
    assert k == 64 and s.model.body_mass[s.base_body] == pytest.approx(6.921)  # the nominal model is untouched
    f = np.array([v.ground_friction for v in s.physical])
    m = np.array([v.base_added_mass for v in s.physical])
    st = np.array([v.motor_strength for v in s.physical])
    kp = np.array([v.kp_scale for v in s.physical])
    kd = np.array([v.kd_scale for v in s.physical])
    assert np.all((f >= 0.4) & (f <= 1.25)) and np.ptp(f) > 0.5
    assert np.all((m >= -1.0) & (m <= 3.0)) and np.ptp(m) > 2.5
    assert np.all((st >= 0.9) & (st <= 1.1)) and np.ptp(st) > 0.1
    for i, v in enumerate(s.variants):
        assert v.geom_friction[s.ground_geom, 0] == f[i]
        assert v.body_mass[s.base_body] == pytest.approx(6.921 + m[i], abs=1e-12)
        assert np.allclose(v.actuator_gainprm[:, 0], 20.0 * st[i] * kp[i])
        assert np.allclose(v.actuator_biasprm[:, 1], -20.0 * st[i] * kp[i])
        assert np.allclose(v.actuator_biasprm[:, 2], -0.5 * st[i] * kd[i])
    for e in range(8):
        assert s._models[e] is s.variants[s.env_variant[e]]
    priv = env.get_observations()["privileged"]
    assert close(priv[:, 3:6], np.stack([f, m, st], 1)[s.env_variant.numpy()], atol=1e-6)


def test_reset_randomisation_ranges():
    env = make_env(64, quiet=False, domain_rand={"curriculum_steps": 0})
    qpos, qvel = env.sim.qpos, env.sim.qvel
    assert np.allclose(qpos[:, 0:3], [0.0, 0.0, SPAWN_HEIGHT])
    yaw = 2 * np.arctan2(qpos[:, 6], qpos[:, 3])
    assert np.allclose(qpos[:, 4:6], 0.0) and np.allclose(np.linalg.norm(qpos[:, 3:7], axis=1), 1.0)
    assert np.ptp(yaw) > 4.0  # yaw spread over (-pi, pi)
    ratio = qpos[:, 7:] / np.asarray(DEFAULT_POSE)
    assert np.all((ratio >= 0.8 - 1e-6) & (ratio <= 1.2 + 1e-6)) and np.ptp(ratio) > 0.3
    assert np.all(np.abs(qvel[:, 0:2]) <= 0.5) and np.all(qvel[:, 2] == 0.0) and np.ptp(qvel[:, 0]) > 0.5
    assert np.all(np.abs(qvel[:, 3:6]) <= 0.5) and np.all(qvel[:, 6:] == 0.0)
    variant = env.sim.env_variant.numpy()
    assert np.all((variant >= 0) & (variant < 64)) and len(set(variant.tolist())) > 10


def test_pushes_set_the_planar_velocity_and_fade_in_the_privileged_record():
    env = make_env(3, domain_rand={"push_robots": True, "push_interval_s": 0.1})  # every 5 steps
    for _ in range(4):
        obs, *_ = env.step(torch.zeros(3, 12))
        assert (env.push_vel == 0).all()
    obs, *_ = env.step(torch.zeros(3, 12))  # episode step 5: push
    push = env.push_vel.clone()
    assert (push.abs() > 0).all() and (push.abs() <= 1.0).all()
    assert np.array_equal(env.sim.qvel[:, 0:2], push.double().numpy())  # world planar velocity replaced
    assert torch.equal(obs["privileged"][:, 10:12], push)
    assert close(obs["privileged"][:, 0:2], 2.0 * env.base_lin_vel[:, 0:2])
    env.step(torch.zeros(3, 12))
    assert close(env.push_vel, push * 0.95, atol=1e-7)


@pytest.mark.slow  # builds four 400-env Go2 tasks (0.65 s, 2.5 s once late in a full run)
def test_heading_fraction_holds_the_sampled_yaw_rate_of_the_other_envs():
    env = make_env(400, commands={"heading_fraction": 0.25})
    env._resample_commands(torch.arange(400))
    sampled = env.commands[:, 2].clone()
    under = env.heading_envs.clone()
    assert 60 < int(under.sum()) < 140  # ~100 of 400 (binomial sd ~9)
    env._update_heading_commands()
    assert torch.equal(env.commands[~under, 2], sampled[~under])  # held: the sampled rate
    from rlcore_tasks.go2.env import wrap_to_pi, yaw_of
    expected = (0.5 * wrap_to_pi(env.heading_target - yaw_of(env.base_quat))).clamp(-1.0, 1.0)
    assert close(env.commands[under, 2], expected[under], atol=1e-6)
    assert not torch.equal(env.commands[under, 2], sampled[under])
    # The split is part of the MDP state: a resume restores it; a state saved before it existed means all heading.
    state = env.state_dict()
    other = make_env(400, commands={"heading_fraction": 0.25}, seed=1)
    other.load_state_dict(state)
    assert torch.equal(other.heading_envs, under)
    del state["heading_envs"]
    other.load_state_dict(state)
    assert other.heading_envs.all()
    # 1.0 (the default) draws nothing: the command stream is the one without the option.
    a, b = make_env(50), make_env(50, commands={"heading_fraction": 1.0})
    for e in (a, b):
        e._resample_commands(torch.arange(50))
    assert torch.equal(a.commands, b.commands) and a.heading_envs.all()
    with pytest.raises(ConfigError, match="heading_fraction: 1.5 must lie in"):
        make_env(2, commands={"heading_fraction": 1.5})


def test_command_sampling_zeroing_heading_and_timer():
    env = make_env(300)
    env._resample_commands(torch.arange(300))
    c = env.commands
    assert ((c >= -1.0) & (c <= 1.0)).all()
    norm = c[:, :2].norm(dim=1)
    assert ((norm == 0) | (norm > 0.2)).all() and (norm == 0).sum() > 0 and (norm > 0).sum() > 250
    assert ((env.heading_target >= -3.14159) & (env.heading_target <= 3.14159)).all()
    # Heading mode: yaw rate = clip(0.5 x wrap(heading - yaw), -1, 1).
    small = make_env(3)
    for i, yaw in enumerate([-3.0, 0.3, 0.0]):
        small.sim.qpos[i, 3:7] = [math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]
    small.heading_target[:] = torch.tensor([3.0, 2.0, 3.0])
    small.sim.refresh()  # after writing the MuJoCo backend's numpy state
    small._refresh_state()
    small._update_heading_commands()
    # 3 - (-3) = 6 -> 6 - 2 pi = -0.28319 -> -0.14159; 2 - 0.3 = 1.7 -> 0.85; 3 -> 1.5 -> clipped to 1
    assert close(small.commands[:, 2], [0.5 * (6.0 - 2 * math.pi), 0.85, 1.0], atol=1e-5)
    # Resampling every 10 s = 500 steps of each env's own clock.
    small.commands[:, :2] = 5.0  # out of range: a resample is visible
    small.episode_length_buf[:] = torch.tensor([499, 0, 250])
    small.step(torch.zeros(3, 12))
    assert (small.commands[0, :2].abs() <= 1.0).all() and (small.commands[1:, :2] == 5.0).all()


def test_terminations_by_height_and_base_contact():
    env = make_env(2, termination={"min_base_height": 0.5})  # standing at ~0.3 m is now too low
    _, _, dones, extras = env.step(torch.zeros(2, 12))
    assert dones.all() and not extras["time_outs"].any()
    # Upside down on the ground with the tilt test off (max_tilt = pi): only the base contact ends it.
    for base_contact in (True, False):
        env = make_env(1, termination={"base_contact": base_contact, "min_base_height": 0.0, "max_tilt": math.pi})
        env.sim.qpos[0, 2:7] = [0.07, 0.0, 1.0, 0.0, 0.0]
        ended = False
        for _ in range(5):
            _, _, dones, _ = env.step(torch.zeros(1, 12))
            ended |= bool(dones[0])
            if not base_contact:
                assert env.base_contact_force[0] >= 0.0
        assert ended == base_contact
    assert env.base_contact_force[0] > 50.0  # it is lying on its back (force measured, no termination)


def test_terrain_curriculum_levels():
    env = make_env(4, terrain=ROUGH)  # 3 levels, 4 m tiles
    t = env.terrain
    t.levels[:] = torch.tensor([1, 1, 1, 2])
    ids = torch.arange(4)
    # walked > 2 m (half a tile): up; < half the commanded distance: down; hardest level mastered: random level
    t.update_curriculum(ids, torch.tensor([2.5, 0.2, 1.0, 2.5]), torch.tensor([1.0, 1.0, 1.0, 1.0]))
    assert t.levels[:3].tolist() == [2, 0, 1] and 0 <= t.levels[3].item() <= 2
    t.levels[:] = 0
    t.update_curriculum(ids, torch.zeros(4), torch.ones(4))
    assert t.levels.tolist() == [0, 0, 0, 0]  # no level below 0
    # A reset spawns each env on its tile centre, at the new level.
    t.levels[:] = torch.tensor([2, 0, 1, 2])
    env.cfg_task.terrain.curriculum = False
    env._reset_envs(ids)
    env.sim.refresh()  # after writing the MuJoCo backend's numpy state
    env._refresh_state()
    assert close(env.base_pos[:, 0], t.border + (t.levels.double() + 0.5) * 4.0)  # after the flat border
    assert close(env.base_pos[:, 1], t.border + (t.cols.double() + 0.5) * 4.0)


# ============================================================================ 8. config errors
@pytest.mark.parametrize("overrides, path, bad", [
    ({"rewards": {"weights": {"feet_air_tme": 1.0}}}, "go2.rewards.weights", "feet_air_tme"),
    ({"sim": {"dtt": 1}}, "go2.sim.dtt", "dtt"),
    ({"terrain": {"proportion": {}}}, "go2.terrain.proportion", "proportion"),
    ({"episode_lenght_s": 5}, "go2.episode_lenght_s", "episode_lenght_s"),
])
def test_unknown_config_key_names_path_and_valid_keys(overrides, path, bad):
    with pytest.raises(ConfigError) as info:
        make_config(overrides)
    msg = str(info.value)
    assert path in msg and bad in msg and "valid" in msg
    if "weights" in path:
        assert "feet_air_time" in msg and "tracking_lin_vel" in msg
    if path == "go2.sim.dtt":
        assert "decimation" in msg and "dt" in msg and "solver_iterations" in msg
    with pytest.raises(ConfigError, match=path.replace(".", r"\.")):  # also from the env constructor
        Go2Env(num_envs=1, **overrides)


@pytest.mark.parametrize("overrides, path", [
    ({"sim": {"decimation": "four"}}, "go2.sim.decimation"),
    ({"sim": {"decimation": 2.5}}, "go2.sim.decimation"),
    ({"obs": {"add_noise": 1}}, "go2.obs.add_noise"),
    ({"commands": {"lin_vel_x": [1.0]}}, "go2.commands.lin_vel_x"),
    ({"rewards": {"weights": {"collision": "x"}}}, "go2.rewards.weights.collision"),
    ({"sim": 3}, "go2.sim"),
])
def test_wrong_config_type_names_path(overrides, path):
    with pytest.raises(ConfigError) as info:
        make_config(overrides)
    assert str(info.value).startswith(path + ":")
    assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)


def test_config_overrides_merge():
    cfg = make_config({"sim": {"decimation": 2, "dt": 1}, "rewards": {"weights": {"collision": -2}}})
    assert cfg.sim.decimation == 2 and cfg.sim.dt == 1.0 and isinstance(cfg.sim.dt, float)
    assert cfg.rewards.weights["collision"] == -2.0 and cfg.rewards.weights["tracking_lin_vel"] == 1.0
    assert make_config().sim.decimation == 4  # defaults are not shared between configs


# ============================================================================ 10. logging, exact resume
def record_terms(env: Go2Env) -> tuple[dict, list]:
    """Wrap the env's reward terms to record every unweighted value, and the planar velocity error."""
    recorded = {name: [] for name, _, _ in env.reward_terms}
    errors = []

    def recording(name, fn):
        def wrapped(e):
            value = fn(e)
            recorded[name].append(value.clone())
            if name == "tracking_lin_vel":
                errors.append(torch.norm(e.commands[:, :2] - e.base_lin_vel[:, :2], dim=1))
            return value
        return wrapped

    env.reward_terms = [(name, recording(name, fn), w) for name, fn, w in env.reward_terms]
    return recorded, errors


def test_log_has_per_term_rewards_and_episode_means():
    env = make_env(3)
    recorded, errors = record_terms(env)
    for _ in range(3):
        _, _, _, extras = env.step(torch.zeros(3, 12))
    keys = {f"/reward/{name}" for name, _, _ in env.reward_terms} | {"/metrics/lin_vel_error"}
    assert keys <= set(extras["log"]) and "/reward/tracking_lin_vel" in keys and "/reward/dof_vel" not in keys
    env.sim.qpos[:, 3:7] = [0.0, 1.0, 0.0, 0.0]  # every env ends at its 4th step
    _, _, dones, extras = env.step(torch.zeros(3, 12))
    assert dones.all()
    log = extras["log"]
    for name, _, w in env.reward_terms:  # per second: sum of weighted values / (4 steps x 0.02 s), mean over envs
        expected = (torch.stack(recorded[name]).double().sum(0) * w / (4 * DT)).mean().item()
        assert log[f"/reward/{name}"].item() == pytest.approx(expected, rel=1e-5, abs=1e-7), name
    assert log["/reward/tracking_lin_vel"].item() > 0.1  # a real value, not an empty mean
    # per step: mean planar velocity error over the 4 steps, mean over envs
    assert log["/metrics/lin_vel_error"].item() == pytest.approx(torch.stack(errors).double().sum(0).mean().item() / 4,
                                                                 rel=1e-5)


def test_log_is_nan_before_any_episode_ends():
    env = make_env(3)
    recorded, _ = record_terms(env)
    _, _, _, extras = env.step(torch.zeros(3, 12))
    assert torch.isnan(extras["log"]["/reward/tracking_lin_vel"])
    assert torch.isnan(extras["log"]["/metrics/lin_vel_error"])
    env.sim.qpos[0, 3:7] = [0.0, 1.0, 0.0, 0.0]  # env 0 ends at its 2nd step; the others have not finished
    _, _, dones, extras = env.step(torch.zeros(3, 12))
    assert dones.tolist() == [True, False, False]
    expected = (recorded["tracking_lin_vel"][0][0] + recorded["tracking_lin_vel"][1][0]).item() / 2  # env 0 only
    assert extras["log"]["/reward/tracking_lin_vel"].item() == pytest.approx(expected, rel=1e-5)


def test_log_means_use_the_steps_summed_after_random_episode_start():
    env = make_env(2)
    env.episode_length_buf[:] = torch.tensor([500, 0])  # as OnPolicyRunner.learn(init_at_random_ep_len=True)
    recorded, _ = record_terms(env)
    for _ in range(3):
        env.step(torch.zeros(2, 12))
    env.sim.qpos[:, 3:7] = [0.0, 1.0, 0.0, 0.0]
    _, _, dones, extras = env.step(torch.zeros(2, 12))
    assert dones.all()
    expected = torch.stack(recorded["tracking_lin_vel"]).double().sum(0).mean().item() / 4  # weight 1 / s
    assert extras["log"]["/reward/tracking_lin_vel"].item() == pytest.approx(expected, rel=1e-4)


def test_state_dict_round_trip_is_exact():
    over = {"domain_rand": {"push_interval_s": 0.1}}  # a push every 5 steps: exercises the generator
    a = make_env(4, seed=3, quiet=False, **over)
    b = make_env(4, seed=3, quiet=False, **over)
    gen = torch.Generator().manual_seed(0)
    for _ in range(5):
        a.step(torch.randn(4, 12, generator=gen))
    b.step(torch.randn(4, 12, generator=gen))  # b elsewhere before loading
    a.sim.qpos[1, 3:7] = [0.0, 1.0, 0.0, 0.0]  # env 1 will reset on the next step (variant, yaw, joints drawn)
    a.sim.refresh()  # after writing the MuJoCo backend's numpy state
    a._refresh_state()
    state = a.state_dict()
    actions = [torch.randn(4, 12, generator=gen) for _ in range(8)]
    out_a = [a.step(act) for act in actions]
    b.load_state_dict(copy.deepcopy(state))
    out_b = [b.step(act) for act in actions]
    assert out_a[0][2][1]  # the reset happened
    for (oa, ra, da, ea), (ob, rb, db, eb) in zip(out_a, out_b):
        for key in ("policy", "privileged", "height_scan"):
            assert torch.equal(oa[key], ob[key]), key
        assert torch.equal(ra, rb) and torch.equal(da, db) and torch.equal(ea["time_outs"], eb["time_outs"])
    assert np.array_equal(a.sim.state, b.sim.state)
    with pytest.raises(ValueError, match="num_envs"):
        make_env(2).load_state_dict(state)


def test_state_of_other_reward_weights_loads_with_the_new_terms_from_zero():
    """A resume may change the reward weights (a term added, one removed): the terms both envs compute keep their
    episode sums, a new term starts from zero, a dropped one is forgotten, and stepping works (this used to raise
    KeyError on the first step)."""
    a = make_env(4, seed=3)
    for _ in range(5):
        a.step(torch.zeros(4, 12))
    state = a.state_dict()
    weights = {**a.cfg_task.rewards.weights, "tracking_lin_vel_fine": 1.0, "feet_air_time": 0.0}
    b = make_env(4, seed=3, rewards={"weights": weights})
    b.load_state_dict(copy.deepcopy(state))
    assert torch.equal(b.episode_sums["tracking_lin_vel"], state["episode_sums"]["tracking_lin_vel"])
    assert torch.count_nonzero(state["episode_sums"]["tracking_lin_vel"]) == 4
    assert torch.equal(b.episode_sums["tracking_lin_vel_fine"], torch.zeros(4))
    assert torch.isnan(b._last_episode["tracking_lin_vel_fine"]).all()
    assert "feet_air_time" not in b.episode_sums
    _, rewards, _, _ = b.step(torch.zeros(4, 12))
    fine = R.tracking_lin_vel_fine(b) * b.dt  # weight 1 per second
    assert torch.allclose(b.episode_sums["tracking_lin_vel_fine"], fine) and torch.isfinite(rewards).all()


def test_reward_weight_schedule_follows_the_env_step_counter_and_resumes():
    """rewards.weight_schedule: piecewise linear in env steps, the configured weight before the first point, the
    last value after the last; the rewards and episode sums use the current weight; a resume continues it."""
    schedule = {"tracking_lin_vel_fine": [[2, 0.0], [4, 1.0]], "tracking_lin_vel": [[3, 2.0]]}
    env = make_env(3, rewards={"weight_schedule": schedule})
    assert "tracking_lin_vel_fine" in [name for name, _, _ in env.reward_terms]  # weight 0 yet scheduled: kept
    expected = {0: (1.0, 0.0), 2: (1.0, 0.0), 3: (2.0, 0.5), 4: (2.0, 1.0), 50: (2.0, 1.0)}
    for counter, (wide, fine) in expected.items():
        env.common_step_counter = counter
        assert env.reward_weight("tracking_lin_vel") == pytest.approx(wide)
        assert env.reward_weight("tracking_lin_vel_fine") == pytest.approx(fine)
    assert env.reward_weight("orientation") == WEIGHTS["orientation"]  # unscheduled: the config's
    env.common_step_counter = 2  # the next step is counted 3: wide term x2, fine term at half weight
    for name in env.episode_sums:
        env.episode_sums[name].zero_()
    env.step(torch.zeros(3, 12))
    assert close(env.episode_sums["tracking_lin_vel"], R.tracking_lin_vel(env) * 2.0 * DT, atol=1e-6)
    assert close(env.episode_sums["tracking_lin_vel_fine"], R.tracking_lin_vel_fine(env) * 0.5 * DT, atol=1e-6)
    assert env._log()["/reward_weight/tracking_lin_vel_fine"].item() == pytest.approx(0.5)
    resumed = make_env(3, rewards={"weight_schedule": schedule})
    resumed.load_state_dict(copy.deepcopy(env.state_dict()))
    assert resumed.reward_weight("tracking_lin_vel_fine") == pytest.approx(0.5)


@pytest.mark.parametrize("schedule, match", [
    ({"tracking_lin_vel_fin": [[2, 1.0]]}, "unknown reward term.*tracking_lin_vel_fin.*valid:.*tracking_lin_vel_fine"),
    ({"collision": [[5, -1.0], [5, -2.0]]}, r"weight_schedule\.collision: env steps must increase"),
    ({"collision": [[5]]}, r"weight_schedule\.collision must be a list of \[env step, value\] pairs"),
])
def test_reward_weight_schedule_errors_name_the_problem(schedule, match):
    with pytest.raises(ConfigError, match=match):
        make_env(1, rewards={"weight_schedule": schedule})


def test_mean_velocity_time_constant_must_be_positive():
    with pytest.raises(ConfigError, match=r"go2\.rewards\.mean_vel_tau: 0\.0 must be > 0"):
        make_env(1, rewards={"mean_vel_tau": 0.0})


# ============================================================================ 9. learning
LEARN_SEED = int(os.environ.get("RLCORE_LEARNING_SEED", "0"))
LEARN_ENVS = 256
LEARN_ITERATIONS = 20
LEARN_MARGIN = 0.04
"""Tracking reward per second (Env/reward/tracking_lin_vel), 256 envs x 24 steps x 20 iterations, forward
commands 0.3-0.8 m/s, 1.92 s episodes (96 steps, so every env finishes an episode every 4 iterations):

=====  =====================  ====================  ======
seed   first (it 3-5 mean)    last (it 16-19 mean)  gain
=====  =====================  ====================  ======
0      0.307                  0.370                 +0.063
1      0.264                  0.362                 +0.098
2      0.285                  0.373                 +0.088
3      0.293                  0.382                 +0.089
=====  =====================  ====================  ======

Settings: go2.yaml's observation groups (actor: policy; critic: policy + privileged), MLPs [64, 64] with
observation normalisation, init std 0.5, PPO 5 epochs x 4 mini-batches at a fixed learning rate 1e-3 (the
adaptive schedule of go2.yaml cuts the rate to ~5e-5 within the first iteration here and nothing is learned
in 20 iterations). Episodes start together (no random initial episode length): the per-episode means of the
first episode after a random start are biased (see test_log_means_use_the_steps_summed_after_random_episode_start),
and the logged mean only holds real episodes once every env has finished one (the 2nd iteration here), so
"first" is read right after that. 15-45 s on one core.
"""


@pytest.mark.learning
def test_short_training_improves_velocity_tracking():
    from rlcore.runners import OnPolicyRunner

    env = make_task("go2", num_envs=LEARN_ENVS, seed=LEARN_SEED, sim={"threads": 1}, episode_length_s=1.92,
                    commands={"lin_vel_x": [0.3, 0.8], "lin_vel_y": [0.0, 0.0], "ang_vel_yaw": [0.0, 0.0],
                              "heading_command": False})
    mlp = {"class_name": "MLPModel", "hidden_dims": [64, 64], "obs_normalization": True}
    cfg = {
        "seed": LEARN_SEED, "num_steps_per_env": 24, "logger": "none", "log_interval": 1000,
        "obs_groups": {"actor": ["policy"], "critic": ["policy", "privileged"]},
        "actor": {**mlp, "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 0.5}},
        "critic": dict(mlp),
        "algorithm": {"class_name": "PPO", "num_learning_epochs": 5, "num_mini_batches": 4, "learning_rate": 1e-3,
                      "schedule": "fixed", "entropy_coef": 0.01, "gamma": 0.99, "lam": 0.95},
    }
    runner = OnPolicyRunner(env, cfg, log_dir=None, device="cpu")
    tracking, finished = [], []

    def on_iteration(it: int, stats: dict) -> None:
        tracking.append(stats["Env/reward/tracking_lin_vel"])
        finished.append(stats["Episode/finished"] + stats["Episode/finished_partial"])  # the first ones are partial

    start = time.perf_counter()
    runner.learn(LEARN_ITERATIONS, init_at_random_ep_len=False, callback=on_iteration)
    seconds = time.perf_counter() - start
    env.close()
    assert len(tracking) == LEARN_ITERATIONS
    # The first iteration in which most envs finished an episode (the first time-outs), then 3 iterations on.
    first_it = next(i for i, n in enumerate(finished) if n >= LEARN_ENVS / 2)
    first = float(np.mean(tracking[first_it + 1 : first_it + 4]))
    last = float(np.mean(tracking[-4:]))
    print(f"\n[learning] go2 tracking_lin_vel (seed {LEARN_SEED}): "
          f"first {first:.3f} (it {first_it + 1}-{first_it + 3}) "
          f"-> last {last:.3f} (it {LEARN_ITERATIONS - 4}-{LEARN_ITERATIONS - 1}) in {seconds:.1f} s; "
          f"per iteration {[round(v, 3) for v in tracking]}")
    assert all(math.isfinite(v) for v in tracking[first_it + 1 :])
    assert last > first + LEARN_MARGIN, f"tracking {first:.3f} -> {last:.3f}"


def test_stepping_under_inference_mode_leaves_buffers_modifiable():
    """Runners step under torch.inference_mode; a reset or a command set afterwards (play, tests) must still work."""
    env = make_env(num_envs=2)
    with torch.inference_mode():
        for _ in range(3):
            env.step(torch.full((2, 12), 0.3))
    assert not env.actions.is_inference() and not env.last_contacts.is_inference()
    env.commands[:] = torch.tensor([0.5, 0.0, 0.0])  # would raise on an inference tensor
    env.reset()
    assert torch.equal(env.actions, torch.zeros(2, 12))
    assert torch.equal(env.episode_length_buf, torch.zeros(2, dtype=torch.long))
