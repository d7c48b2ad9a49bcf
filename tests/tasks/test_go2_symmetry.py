"""Tests of rlcore_tasks.go2.symmetry (left/right mirror y -> -y for PPO's symmetry extension).

The expected mirror images are built here from the physics (a mirrored robot state put into a second env),
not from the permutation tables of the module under test.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from rlcore.extensions import Symmetry
from rlcore_tasks.go2 import Go2Env
from rlcore_tasks.go2.symmetry import go2_mirror, mirror_actions, mirror_observations

DEFAULT_POSE = [0.1, 0.8, -1.5, -0.1, 0.8, -1.5, 0.1, 1.0, -1.5, -0.1, 1.0, -1.5]
LEGS = ["FL", "FR", "RL", "RR"]
SWAP = {"FL": "FR", "FR": "FL", "RL": "RR", "RR": "RL"}
QUIET = {
    "sim": {"threads": 1},
    "obs": {"add_noise": False},
    "domain_rand": {"push_robots": False, "curriculum_steps": 0},  # the physics stays randomised
    "init": {"joint_pos_scale": [1.0, 1.0], "base_lin_vel": 0.0, "base_ang_vel": 0.0, "random_yaw": False},
}


def mirror_joints(v) -> np.ndarray:
    """Per-joint vector [..., 12] of the mirrored robot: the left leg takes the right leg's values and vice
    versa; hip (abduction, x axis) angles and rates change sign, thigh and calf (y axis) ones do not."""
    v = np.asarray(v, dtype=np.float64)
    out = np.empty_like(v)
    for leg_i, leg in enumerate(LEGS):
        src = LEGS.index(SWAP[leg])
        for part in range(3):
            out[..., 3 * leg_i + part] = (-1.0 if part == 0 else 1.0) * v[..., 3 * src + part]
    return out


def mirror_feet(v) -> np.ndarray:
    """Per-foot vector [..., 4] (FL, FR, RL, RR) of the mirrored robot."""
    v = np.asarray(v, dtype=np.float64)
    return v[..., [LEGS.index(SWAP[leg]) for leg in LEGS]]


def expected_mirror(obs: TensorDict) -> dict[str, np.ndarray]:
    """Hand-written mirror of one observation row (policy 45, privileged 47, height scan [1, 11, 17])."""
    p = obs["policy"].double().numpy()
    q = obs["privileged"].double().numpy()
    policy = np.concatenate([
        p[..., 0:3] * [-1, 1, -1],  # body angular velocity: axial vector, wx and wz flip
        p[..., 3:6] * [1, -1, 1],  # gravity in the body frame: polar vector, y flips
        p[..., 6:9] * [1, -1, -1],  # command vx, vy, yaw rate
        mirror_joints(p[..., 9:21]), mirror_joints(p[..., 21:33]), mirror_joints(p[..., 33:45]),
    ], axis=-1)
    privileged = np.concatenate([
        q[..., 0:3] * [1, -1, 1],  # linear velocity
        q[..., 3:6],  # friction, added mass, motor strength
        mirror_feet(q[..., 6:10]),
        q[..., 10:12] * [1, -1],  # push velocity
        q[..., 12:22],  # gains, joint damping / friction / armature, latency, foot contact: the same both sides
        mirror_feet(q[..., 22:26]),  # per-leg mass factors
        q[..., 26:29] * [1, -1, 1],  # base CoM offset
        q[..., 29:32] * [-1, 1, -1],  # gyro bias: like the angular velocity
        q[..., 32:35] * [1, -1, 1],  # gravity bias: like gravity
        mirror_joints(q[..., 35:47]),  # encoder biases
    ], axis=-1)
    return {"policy": policy, "privileged": privileged, "height_scan": obs["height_scan"].flip(-2).double().numpy()}


def make_env(num_envs: int = 2, **overrides) -> Go2Env:
    cfg = {k: dict(v) for k, v in QUIET.items()}
    for k, v in overrides.items():
        cfg[k] = {**cfg.get(k, {}), **v}
    return Go2Env(num_envs=num_envs, seed=0, **cfg)


def use_mirrored_variants(env: Go2Env) -> None:
    """Env 0 simulates a drawn variant, env 1 its mirror image: per-link leg masses swapped left/right, the base's
    CoM offset reflected (every other parameter is the same on both sides).

    The feet keep condim 3: with condim-6 feet together with joint damping and frictionloss, the contact solution
    depends on the order of the constraints (FL before FR) and the pair drifts 0.027 apart in 0.5 s on the ground
    (measured; 3e-5 without any one of the three, whatever the solver iterations).
    """
    v = dataclasses.replace(env.sim.physical[5], foot_condim=3)
    links = np.asarray(v.leg_scales()).reshape(4, 4)  # FL, FR, RL, RR x hip, thigh, calf, foot
    mirrored = dataclasses.replace(v, leg_mass_scale=tuple(links[[1, 0, 3, 2]].ravel().tolist()),
                                   base_com_offset=(v.base_com_offset[0], -v.base_com_offset[1], v.base_com_offset[2]))
    assert np.ptp(links) > 0.01 and abs(v.base_com_offset[1]) > 1e-4  # the variant is really asymmetric
    env.sim.set_physical_variants([v, mirrored])
    env.update_variant_params()
    env.sim.set_variants(np.array([0, 1]), np.array([0, 1]))


def put_mirrored_pair(env: Go2Env, z: float = 0.6) -> None:
    """Env 0 in an asymmetric state, env 1 in its mirror image (reflection y -> -y)."""
    s = env.sim
    use_mirrored_variants(env)
    quat = np.array([0.9, 0.1, 0.2, 0.3])
    quat /= np.linalg.norm(quat)
    dq = np.array([0.05, -0.1, 0.2, -0.07, 0.15, -0.05, 0.12, 0.03, -0.2, -0.02, -0.08, 0.1])
    joints = np.asarray(DEFAULT_POSE) + dq
    joint_vel = np.linspace(-1.1, 1.3, 12) * np.array([1, -1, 1, 1, 1, -1, -1, 1, 1, -1, 1, 1])
    lin_world, ang_body = np.array([0.4, 0.3, -0.1]), np.array([0.5, -0.2, 0.7])
    s.qpos[0] = np.concatenate([[0.3, 0.2, z], quat, joints])
    s.qvel[0] = np.concatenate([lin_world, ang_body, joint_vel])
    w, x, y, zq = quat
    s.qpos[1] = np.concatenate([[0.3, -0.2, z], [w, -x, y, -zq], mirror_joints(joints)])
    s.qvel[1] = np.concatenate([lin_world * [1, -1, 1], ang_body * [-1, 1, -1], mirror_joints(joint_vel)])
    feet = np.array([10.0, 20.0, 30.0, 40.0])
    s.sensordata[0, s.foot_sensor] = feet
    s.sensordata[1, s.foot_sensor] = mirror_feet(feet)
    command = np.array([0.6, 0.3, -0.4])
    env.commands[:] = torch.tensor(np.stack([command, command * [1, -1, -1]]), dtype=torch.float32)
    env.heading_target[:] = torch.tensor([0.8, -0.8])
    action = np.linspace(-0.9, 1.2, 12) ** 2 - 0.3
    env.actions[:] = torch.tensor(np.stack([action, mirror_joints(action)]), dtype=torch.float32)
    env.push_vel[:] = torch.tensor([[0.2, 0.1], [0.2, -0.1]])
    env.sim.refresh()  # after writing the MuJoCo backend's numpy state
    env._refresh_state()


# ============================================================================ layout, involution
def test_go2_mirror_layout_and_involution():
    env = make_env(3)
    for _ in range(3):
        env.step(torch.randn(3, 12) * 0.3)
    obs, actions = env.get_observations(), torch.randn(3, 12)
    obs_aug, actions_aug = go2_mirror(env=env, obs=obs, actions=actions)
    assert obs_aug.batch_size == torch.Size([6]) and actions_aug.shape == (6, 12)
    for key in ("policy", "privileged", "height_scan"):
        assert torch.equal(obs_aug[key][:3], obs[key])
        assert not torch.equal(obs_aug[key][3:], obs[key]) or key == "height_scan"  # flat: scan rows all equal
        twice = mirror_observations(mirror_observations(obs))[key]
        assert torch.equal(twice, obs[key]), key
    assert torch.equal(actions_aug[:3], actions) and torch.equal(mirror_actions(mirror_actions(actions)), actions)
    assert torch.allclose(actions_aug[3:].double(), torch.tensor(mirror_joints(actions.numpy())))
    # Random data of every group too (nothing in the tables may be a non-involutive permutation or sign).
    rnd = TensorDict({"policy": torch.randn(5, 45), "privileged": torch.randn(5, 47),
                      "height_scan": torch.randn(5, 1, 11, 17)}, batch_size=[5])
    for key in rnd.keys():
        assert torch.equal(mirror_observations(mirror_observations(rnd))[key], rnd[key])
        assert torch.allclose(mirror_observations(rnd)[key].double(),
                              torch.tensor(expected_mirror(rnd)[key]), atol=1e-6), key
    assert go2_mirror(obs=obs)[1] is None and go2_mirror(actions=actions)[0] is None
    Symmetry(env=env, use_data_augmentation=True, data_augmentation_func=go2_mirror).augment(obs, actions)
    with pytest.raises(ValueError, match="camera"):
        mirror_observations(TensorDict({"camera": torch.zeros(2, 3)}, batch_size=[2]))


# ============================================================================ states -> observations
def test_mirrored_state_gives_mirrored_observation():
    env = make_env(2)
    put_mirrored_pair(env)
    obs = env._observe()
    # The state is really asymmetric (no trivially symmetric observation).
    assert not torch.allclose(obs["policy"][0], obs["policy"][1])
    want = expected_mirror(obs[0:1])
    for key in ("policy", "privileged", "height_scan"):
        assert np.allclose(obs[key][1:2].double().numpy(), want[key], atol=1e-6), key
        assert torch.allclose(mirror_observations(obs[0:1])[key], obs[key][1:2], atol=1e-6), key
    # Spot values against the written state: mirrored ang vel (-0.5, -0.2, -0.7) x 0.25, command (0.6, -0.3, 0.4).
    assert torch.allclose(obs["policy"][1, 0:3], torch.tensor([-0.125, -0.05, -0.175]), atol=1e-6)
    assert torch.allclose(obs["policy"][1, 6:9], torch.tensor([1.2, -0.6, 0.1]), atol=1e-6)  # x (2, 2, 0.25)


@pytest.mark.parametrize("where", ["air", "ground"])
def test_mirrored_actions_keep_mirrored_states_mirrored(where):
    """Physics check of the mirror: the mirrored state under the mirrored actions stays (nearly) the mirror image.

    The Go2 model is symmetric but for the base's small products of inertia (ixy 1.2e-4, iyz -3.1e-5) and
    the front-left calf capsule (r 0.012 vs 0.013), hence the tolerance. "air": the asymmetric pair 1 m up;
    "ground": both from the spawn pose (its own mirror image), landing and stepping on the ground.
    """
    env = make_env(2)
    if where == "air":
        put_mirrored_pair(env, z=1.0)
    else:
        use_mirrored_variants(env)
        env.commands[:] = torch.tensor([[0.5, 0.2, 0.3], [0.5, -0.2, -0.3]])
        env.heading_target[:] = torch.tensor([0.4, -0.4])
    gen = torch.Generator().manual_seed(0)
    for _ in range(10 if where == "air" else 25):
        a0 = torch.randn(1, 12, generator=gen) * 0.5
        obs, _, dones, _ = env.step(torch.cat([a0, mirror_actions(a0)]))
        assert not dones.any()
    want = expected_mirror(obs[0:1])
    for key, atol in (("policy", 5e-3), ("privileged", 5e-3)):  # measured 2e-4 .. 4e-4
        diff = np.abs(obs[key][1:2].double().numpy() - want[key]).max()
        assert diff < atol, f"{key}: {diff}"
    # And the unmirrored pairing is far off (the check has teeth).
    assert np.abs(obs["policy"][1:2].double().numpy() - obs["policy"][0:1].double().numpy()).max() > 0.1


# ============================================================================ height scan rows = y
def test_height_scan_mirror_flips_the_lateral_axis():
    """On rough terrain: row i of the mirrored scan must be the terrain seen at local (x_j, -y_i)."""
    env = make_env(1, terrain={"type": "rough", "num_levels": 3, "num_cols": 5, "tile_size": 4.0})
    yaw = 0.4
    base = [6.9, 8.9, 0.45]  # level 1, stairs_up tile, off-centre: the relief differs left and right
    env.sim.qpos[0, 0:3] = base
    env.sim.qpos[0, 3:7] = [math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]
    env.sim.refresh()  # after writing the MuJoCo backend's numpy state
    env._refresh_state()
    scan = env._observe()["height_scan"]
    mirrored = mirror_observations(TensorDict({"height_scan": scan}, batch_size=[1]))["height_scan"][0, 0]
    xs, ys = np.linspace(-0.8, 0.8, 17), np.linspace(-0.5, 0.5, 11)
    lx, ly = np.meshgrid(xs, -ys)  # local points reflected across the base's x axis
    wx = base[0] + math.cos(yaw) * lx - math.sin(yaw) * ly
    wy = base[1] + math.sin(yaw) * lx + math.cos(yaw) * ly
    h = env.terrain.height_at(torch.tensor(np.stack([wx, wy], -1), dtype=torch.float32)).double().numpy()
    expected = np.clip(base[2] - h - 0.30, -1, 1) * 5.0
    assert not np.allclose(scan[0, 0].numpy(), expected, atol=1e-3)  # left and right differ here
    np.testing.assert_allclose(mirrored.numpy(), expected, atol=1e-4)
