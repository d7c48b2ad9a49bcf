"""Domain randomisation of the Go2 task (rlcore_tasks/go2/randomization.py, DomainRandCfg): each randomisation changes
the compiled MuJoCo model (read back from the variants) or the applied torque, and nothing else; each turns off to
the nominal model; array edits equal compiling the edited MJCF; latency, per-episode sensor biases, privileged
observations of the drawn values; physics failures are counted, terminated and reset.
"""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import torch

from rlcore.env import ConfigError
from rlcore_tasks.go2 import Go2Env
from rlcore_tasks.go2.config import no_randomization
from rlcore_tasks.go2.randomization import FOOT_GEOMS, LEG_BODIES, SOFT_SOLIMP, Variant, apply_variant, sample_variant

DEFAULT_POSE = [0.1, 0.8, -1.5, -0.1, 0.8, -1.5, 0.1, 1.0, -1.5, -0.1, 1.0, -1.5]
LEG_DOFS = slice(6, 18)  # after the free joint
ARRAYS = ("dof_damping", "dof_frictionloss", "dof_armature", "geom_solref", "geom_solimp", "geom_condim",
          "geom_solmix", "body_mass", "body_inertia", "body_ipos", "actuator_gainprm", "actuator_biasprm",
          "geom_friction")
OFF = no_randomization()  # also no curriculum: a randomisation turned on draws from its full range


def env_with(num_envs: int = 2, num_variants: int = 8, **dr) -> Go2Env:
    """An env with only the randomisations named in ``dr`` on (and its settings)."""
    return Go2Env(num_envs=num_envs, seed=3, sim={"threads": 1},
                  domain_rand={**OFF, "num_variants": num_variants, **dr})


def changed_arrays(m: mujoco.MjModel, n: mujoco.MjModel) -> set[str]:
    return {a for a in ARRAYS if not np.array_equal(getattr(m, a), getattr(n, a))}


def feet(m: mujoco.MjModel) -> np.ndarray:
    return np.array([m.geom(g).id for g in FOOT_GEOMS])


def legs(m: mujoco.MjModel) -> np.ndarray:
    return np.array([m.body(b).id for b in LEG_BODIES])


# ---------------------------------------------------------------------------- each randomisation, read back
def _check_damping(m, n, v):
    assert np.all(m.dof_damping[LEG_DOFS] == v.joint_damping) and 0.0 <= v.joint_damping <= 3.0
    assert np.all(m.dof_damping[:6] == 0)


def _check_frictionloss(m, n, v):
    assert np.all(m.dof_frictionloss[LEG_DOFS] == v.joint_frictionloss) and 0.0 <= v.joint_frictionloss <= 0.4


def _check_armature(m, n, v):
    assert np.all(m.dof_armature[LEG_DOFS] == v.joint_armature) and 0.005 <= v.joint_armature <= 0.02
    assert np.all(n.dof_armature[LEG_DOFS] == 0.01)


def _check_contact(m, n, v):
    f = feet(m)
    s = (v.foot_solimp[0] - 0.9) / (0.015 - 0.9)  # the softness drawn: solimp on the line default -> soft
    assert 0.0 <= s <= 1.0
    assert np.allclose(m.geom_solimp[f, :3], [0.9 + s * (0.015 - 0.9), 0.95 + s * 0.05, 0.001 + s * 0.029])
    assert np.all(m.geom_solref[f, 0] == v.foot_solref[0]) and 0.02 <= v.foot_solref[0] <= 0.03
    assert np.all(m.geom_solref[f, 1] == 1.0) and np.all(m.geom_solmix[f] == 1e9)  # the foot's parameters win


def _check_condim(m, n, v):
    assert np.all(m.geom_condim[feet(m)] == v.foot_condim) and v.foot_condim in (3, 6)


def _check_leg_mass(m, n, v):
    ids, s = legs(m), np.asarray(v.leg_mass_scale)
    assert s.shape == (16,) and np.all((s >= 0.85) & (s <= 1.3)) and np.ptp(s) > 0.1  # one factor per link
    np.testing.assert_allclose(m.body_mass[ids], n.body_mass[ids] * s, rtol=1e-12)
    np.testing.assert_allclose(m.body_inertia[ids], n.body_inertia[ids] * s[:, None], rtol=1e-12)


def _check_base_mass(m, n, v):
    b = m.body("base").id
    assert m.body_mass[b] == pytest.approx(6.921 + v.base_added_mass, abs=1e-12) and -1 <= v.base_added_mass <= 3


def _check_base_com(m, n, v):
    b = m.body("base").id
    np.testing.assert_allclose(m.body_ipos[b], [0.021112 + v.base_com_offset[0], v.base_com_offset[1],
                                                -0.005366 + v.base_com_offset[2]], atol=1e-12)
    assert all(abs(o) <= r for o, r in zip(v.base_com_offset, (0.05, 0.05, 0.01)))


def _check_gains(m, n, v):
    assert 0.75 <= v.kp_scale <= 1.25 and 0.75 <= v.kd_scale <= 1.25 and v.kp_scale != v.kd_scale
    assert np.allclose(m.actuator_gainprm[:, 0], 20.0 * v.kp_scale)
    assert np.allclose(m.actuator_biasprm[:, 1:3], [-20.0 * v.kp_scale, -0.5 * v.kd_scale])


def _check_friction(m, n, v):
    assert m.geom_friction[m.geom("ground").id, 0] == v.ground_friction and 0.4 <= v.ground_friction <= 1.25


CASES = {  # flag -> (arrays it may change, check(model, nominal, variant))
    "randomize_joint_damping": ({"dof_damping"}, _check_damping),
    "randomize_joint_frictionloss": ({"dof_frictionloss"}, _check_frictionloss),
    "randomize_armature": ({"dof_armature"}, _check_armature),
    "randomize_foot_contact": ({"geom_solref", "geom_solimp", "geom_solmix"}, _check_contact),
    "randomize_foot_condim": ({"geom_condim"}, _check_condim),
    "randomize_leg_mass": ({"body_mass", "body_inertia"}, _check_leg_mass),
    "randomize_base_mass": ({"body_mass"}, _check_base_mass),
    "randomize_base_com": ({"body_ipos"}, _check_base_com),
    "randomize_pd_gains": ({"actuator_gainprm", "actuator_biasprm"}, _check_gains),
    "randomize_friction": ({"geom_friction"}, _check_friction),
}


@pytest.mark.parametrize("flag", list(CASES))
def test_each_randomisation_changes_only_its_part_of_the_model(flag):
    env = env_with(**{flag: True})
    allowed, check = CASES[flag]
    nominal, changed = env.sim.model, set()
    for m, v in zip(env.sim.variants, env.sim.physical):
        changed |= changed_arrays(m, nominal)
        check(m, nominal, v)
    if flag == "randomize_foot_condim":  # 8 draws of two choices: both appear (probability 1 - 2^-7)
        assert {v.foot_condim for v in env.sim.physical} == {3, 6}
    assert changed and changed <= allowed, f"{flag} changed {sorted(changed)}"
    env.close()


def test_everything_off_is_the_nominal_robot():
    assert OFF["curriculum_steps"] == 0 and not any(v for k, v in OFF.items() if k.startswith("randomize_"))
    env = env_with(num_variants=4)
    for m in env.sim.variants:
        assert changed_arrays(m, env.sim.model) == set()
    assert bool((env.sim.latency == 0).all()) and np.all(env.sim.variant_latency == 0)
    assert torch.equal(env.imu_bias, torch.zeros(2, 6)) and torch.equal(env.joint_pos_bias, torch.zeros(2, 12))
    env.close()


def test_array_edits_equal_compiling_the_edited_mjcf():
    """apply_variant (array edits + mj_setConst) against an independent MjSpec edit and compile."""
    from rlcore_tasks.go2.config import make_config
    from rlcore_tasks.go2.sim import build_spec
    from rlcore_tasks.go2.terrain import Terrain

    cfg = make_config({"sim": {"threads": 1}})
    terrain = Terrain(cfg.terrain, 1, torch.device("cpu"), torch.Generator())
    scales = tuple(np.linspace(0.85, 1.3, 16).tolist())
    v = Variant("all", joint_damping=2.5, joint_frictionloss=0.3, joint_armature=0.015, foot_solref=(0.025, 1.0),
                foot_solimp=SOFT_SOLIMP, foot_condim=6, leg_mass_scale=scales, base_added_mass=2.0,
                base_com_offset=(0.03, -0.02, 0.01), kp_scale=1.2, kd_scale=0.8, motor_strength=1.05,
                ground_friction=0.6)
    mine = apply_variant(build_spec(cfg, terrain).compile(), v, 30.0, 0.5)
    spec = build_spec(cfg, terrain)
    for j in spec.joints:
        if j.name.endswith(("hip_joint", "thigh_joint", "calf_joint")):
            j.damping, j.frictionloss, j.armature = [2.5, *list(j.damping)[1:]], 0.3, 0.015
    for g in FOOT_GEOMS:
        geom = spec.geom(g)
        geom.solref, geom.solimp = [0.025, 1.0], [*SOFT_SOLIMP, *list(geom.solimp)[3:]]
        geom.condim, geom.solmix = 6, 1e9
    for name, s in zip(LEG_BODIES, scales):
        body = spec.body(name)
        body.mass *= s
        if body.fullinertia[0] == body.fullinertia[0]:  # NaN when given as a diagonal
            body.fullinertia = [x * s for x in body.fullinertia]
        else:
            body.inertia = [x * s for x in body.inertia]
    base = spec.body("base")
    base.mass += 2.0
    base.ipos = [a + b for a, b in zip(base.ipos, (0.03, -0.02, 0.01))]
    spec.geom("ground").friction = [0.6, *list(spec.geom("ground").friction)[1:]]
    for a in spec.actuators:
        a.gainprm[0], a.biasprm[1], a.biasprm[2] = 30.0 * 1.2 * 1.05, -30.0 * 1.2 * 1.05, -0.5 * 0.8 * 1.05
    ref = spec.compile()
    for name in (*ARRAYS, "body_subtreemass", "body_invweight0", "dof_invweight0", "actuator_acc0", "body_iquat"):
        np.testing.assert_allclose(getattr(mine, name), getattr(ref, name), rtol=1e-9, atol=1e-12, err_msg=name)


def test_kd_scale_reaches_the_applied_torque():
    env = env_with(num_envs=2, num_variants=2, randomize_pd_gains=True)
    env.cfg_task.sim.decimation = 1
    s = env.sim
    s.decimation = 1
    s._state_out, s._sensor_out = s._state_out[:, :1].copy(), s._sensor_out[:, :1].copy()
    s.ctrl = s.ctrl[:, :1].copy()
    s.set_variants(np.arange(2), np.array([0, 1]))
    s.qpos[:, 2] = 1.0  # in the air
    s.qpos[:, 7:] = np.asarray(DEFAULT_POSE)
    s.qvel[:, 6:] = 2.0
    kp = np.array([p.kp_scale for p in s.physical]) * 20.0
    kd = np.array([p.kd_scale for p in s.physical]) * 0.5
    target = np.asarray(DEFAULT_POSE) + 0.1
    s.step(np.tile(target, (2, 1)))
    expected = kp[:, None] * 0.1 - kd[:, None] * 2.0  # tau = kp (target - q) - kd qdot on the pre-step state
    np.testing.assert_allclose(s.sensordata[:, s.torque_sensor], np.repeat(expected, 12, axis=1), atol=1e-9)
    env.close()


def test_curriculum_grades_the_pool_and_widens_the_draw():
    env = Go2Env(num_envs=64, seed=1, sim={"threads": 1}, domain_rand={"num_variants": 8, "curriculum_steps": 100})
    pool = env.sim.physical
    for i, v in enumerate(pool):  # variant i at strength (i + 1) / 8: values between nominal and the full draw
        strength = (i + 1) / 8
        assert v.joint_damping <= 3.0 * strength + 1e-12 and abs(v.kp_scale - 1) <= 0.25 * strength + 1e-12
        assert v.latency_s <= round(4 * strength) * 0.005 + 1e-12
        assert max(abs(x - 1) for x in v.leg_mass_scale) <= 0.3 * strength + 1e-12
    # strength s moves each value of the same draw towards nominal: nominal + s (draw - nominal)
    dr, m = env.cfg_task.domain_rand, env.sim.model
    full = sample_variant(dr, np.random.default_rng(7), 0.005, strength=1.0, nominal=m)
    half = sample_variant(dr, np.random.default_rng(7), 0.005, strength=0.5, nominal=m)
    assert half.joint_damping == pytest.approx(0.5 * full.joint_damping, abs=1e-12)
    assert half.joint_armature == pytest.approx(0.01 + 0.5 * (full.joint_armature - 0.01), abs=1e-12)
    assert half.ground_friction == pytest.approx(1.0 + 0.5 * (full.ground_friction - 1.0), abs=1e-12)
    assert half.base_added_mass == pytest.approx(0.5 * full.base_added_mass, abs=1e-12)
    assert half.latency_s == pytest.approx(round(full.latency_s / 0.005 * 0.5) * 0.005, abs=1e-12)
    assert np.allclose(np.asarray(half.leg_mass_scale) - 1, 0.5 * (np.asarray(full.leg_mass_scale) - 1))
    assert set(env.sim.env_variant.tolist()) == {0}  # at the start: the mildest variant only, and no sensor bias
    assert torch.equal(env.imu_bias, torch.zeros(64, 6))
    env.common_step_counter = 50  # half way: the first ceil(8 * 0.5) = 4 variants, biases at half amplitude
    env._reset_envs(torch.arange(64))
    assert set(env.sim.env_variant.tolist()) == {0, 1, 2, 3}
    assert env.imu_bias[:, :3].abs().max() <= 0.025 and env.imu_bias[:, :3].abs().max() > 0.015
    env.common_step_counter = 100
    env._reset_envs(torch.arange(64))
    assert set(env.sim.env_variant.tolist()) == set(range(8))
    env.close()


def test_loaded_robots_draw_every_load_from_the_harsh_half_and_keep_the_random_stream():
    env = Go2Env(num_envs=2, seed=1, sim={"threads": 1},
                 domain_rand={"num_variants": 8, "curriculum_steps": 0, "loaded_fraction": 0.25})
    dr, m, pool = env.cfg_task.domain_rand, env.sim.model, env.sim.physical
    assert [v.name for v in pool] == [f"drawn_{i}" for i in range(6)] + ["loaded_6", "loaded_7"]
    for v in pool[6:]:  # full strength (no curriculum): each load in its harsh half, the feet condim 6
        assert 1.5 <= v.joint_damping <= 3.0 and 0.2 <= v.joint_frictionloss <= 0.4
        assert 0.0125 <= v.joint_armature <= 0.02 and 1.0 <= v.base_added_mass <= 3.0
        assert min(v.leg_mass_scale) >= 1.075 and v.foot_condim == 6 and v.latency_s >= 0.010 - 1e-12
        assert v.foot_solimp[0] <= 0.5 * (0.9 + SOFT_SOLIMP[0]) + 1e-12  # softness >= 0.5
        assert 0.75 <= v.kp_scale <= 1.0 and 0.9 <= v.motor_strength <= 1.0
    # loaded robots consume the same random numbers as ordinary draws: the draws after them are unchanged
    rng_a, rng_b = np.random.default_rng(5), np.random.default_rng(5)
    sample_variant(dr, rng_a, 0.005, nominal=m, loaded=True)
    sample_variant(dr, rng_b, 0.005, nominal=m)
    assert sample_variant(dr, rng_a, 0.005, nominal=m) == sample_variant(dr, rng_b, 0.005, nominal=m)
    # and an ordinary pool is the one a run without loaded robots draws
    plain = Go2Env(num_envs=2, seed=1, sim={"threads": 1}, domain_rand={"num_variants": 8, "curriculum_steps": 0})
    assert plain.sim.physical[:6] == pool[:6] and plain.sim.physical[6:] != pool[6:]
    with pytest.raises(ConfigError, match="loaded_fraction: 1.5 must lie in"):
        Go2Env(num_envs=2, seed=1, sim={"threads": 1}, domain_rand={"loaded_fraction": 1.5})
    env.close()
    plain.close()


def test_nominal_fraction_puts_the_nominal_robot_first_in_the_pool():
    """domain_rand.nominal_fraction: the pool's first round(k * f) variants are the task's own model (compiled
    parameters equal the nominal model's), then the graded draws, then the loaded robots; bad fractions are named."""
    env = Go2Env(num_envs=2, seed=1, sim={"threads": 1},
                 domain_rand={"num_variants": 8, "nominal_fraction": 0.25, "loaded_fraction": 0.25})
    s, m = env.sim, env.sim.model
    assert [v.name for v in s.physical] == ["nominal_0", "nominal_1"] + [f"drawn_{i}" for i in range(2, 6)] + [
        "loaded_6", "loaded_7"]
    for i in range(8):
        same = all(np.array_equal(getattr(s.variants[i], f), getattr(m, f))
                   for f in ("dof_damping", "dof_frictionloss", "dof_armature", "body_mass", "geom_friction",
                             "geom_solimp", "geom_condim", "actuator_gainprm"))
        assert same == (i < 2), i  # the nominal ones, and only those, compile to the task's model
    assert s.variant_latency[:2].tolist() == [0, 0] and s.variant_latency[6:].min() > 0
    # with the curriculum (default 2400 steps), a run starts on the first variant only: the nominal robot
    assert env.randomization_progress() == 0.0 and env.sim.env_variant.tolist() == [0, 0]
    for bad, match in ((1.5, "nominal_fraction: 1.5 must lie in"), (0.9, "leave room for loaded_fraction 0.25")):
        with pytest.raises(ConfigError, match=match):
            Go2Env(num_envs=2, seed=1, sim={"threads": 1},
                   domain_rand={"num_variants": 8, "nominal_fraction": bad, "loaded_fraction": 0.25})
    env.close()


# ---------------------------------------------------------------------------- latency
def test_latency_is_drawn_per_variant_in_whole_physics_steps_and_follows_the_env():
    env = env_with(num_envs=16, num_variants=32, randomize_latency=True)
    s = env.sim
    drawn = np.array([p.latency_s for p in s.physical])
    steps = drawn / 0.005
    assert np.allclose(steps, np.round(steps)) and set(np.round(steps).astype(int)) == {0, 1, 2, 3, 4}
    np.testing.assert_array_equal(s.latency, np.round(steps[s.env_variant.numpy()]).astype(int))
    env._reset_envs(torch.arange(16))  # new variants: the latency comes along
    np.testing.assert_array_equal(s.latency, s.variant_latency[s.env_variant.numpy()])
    priv = env.get_observations()["privileged"]
    torch.testing.assert_close(priv[:, 17], torch.tensor(drawn[s.env_variant.numpy()] * 50.0, dtype=torch.float32))
    env.close()


# ---------------------------------------------------------------------------- sensor biases
def test_sensor_biases_are_constant_within_an_episode_and_redrawn_at_reset():
    env = Go2Env(num_envs=3, seed=5, sim={"threads": 1},
                 obs={"noise_ang_vel": 0.0, "noise_gravity": 0.0, "noise_dof_pos": 0.0, "noise_dof_vel": 0.0},
                 domain_rand={**OFF, "randomize_imu_bias": True, "randomize_encoder_bias": True})

    def seen_bias() -> torch.Tensor:
        p = env.get_observations()["policy"]
        gyro = p[:, 0:3] / 0.25 - env.base_ang_vel
        gravity = p[:, 3:6] - env.projected_gravity
        joints = p[:, 9:21] - (env.dof_pos - env.default_dof_pos)
        return torch.cat([gyro, gravity, joints], dim=1)

    first = seen_bias()
    assert (first[:, :3].abs() <= 0.05 + 1e-5).all() and (first[:, 3:6].abs() <= 0.02 + 1e-6).all()
    assert (first[:, 6:].abs() <= 0.02 + 1e-6).all() and first[:, 6:].abs().max() > 0.01
    torch.testing.assert_close(first, torch.cat([env.imu_bias, env.joint_pos_bias], dim=1), atol=2e-6, rtol=0)
    for _ in range(3):
        env.step(torch.zeros(3, 12))
        torch.testing.assert_close(seen_bias(), first, atol=2e-6, rtol=0)  # the same offsets every step
    env._reset_envs(torch.tensor([1]))
    env.sim.refresh()  # after writing the MuJoCo backend's numpy state
    env._refresh_state()
    after = seen_bias()
    torch.testing.assert_close(after[[0, 2]], first[[0, 2]], atol=2e-6, rtol=0)
    assert (after[1] - first[1]).abs().min() > 1e-6  # env 1 drew new offsets on every sensor
    priv = env.get_observations()["privileged"]
    torch.testing.assert_close(priv[:, 29:32], env.imu_bias[:, :3] * 20.0)
    torch.testing.assert_close(priv[:, 35:47], env.joint_pos_bias * 50.0)
    env.close()


# ---------------------------------------------------------------------------- privileged observations
def test_privileged_observations_carry_the_drawn_values():
    env = Go2Env(num_envs=6, seed=2, sim={"threads": 1}, domain_rand={"num_variants": 6})
    priv = env.get_observations()["privileged"]
    for e in range(6):
        v = env.sim.physical[env.sim.env_variant[e]]
        m = env.sim.variants[env.sim.env_variant[e]]
        q = priv[e].double().numpy()
        assert q[3:6] == pytest.approx([v.ground_friction, v.base_added_mass, v.motor_strength], abs=1e-6)
        assert q[12:16] == pytest.approx([(v.kp_scale - 1) * 4, (v.kd_scale - 1) * 4, v.joint_damping / 3,
                                          v.joint_frictionloss * 2.5], abs=1e-5)
        assert q[16] == pytest.approx((v.joint_armature - 0.01) * 100, abs=1e-5)
        assert q[18:22] == pytest.approx([(v.foot_solref[0] - 0.02) * 50, v.foot_solimp[0] - 0.9,
                                          (v.foot_solimp[2] - 0.001) * 33, float(v.foot_condim == 6)], abs=1e-5)
        ids = legs(m)[:4]  # the FL leg: hip, thigh, calf, foot
        fl = m.body_mass[ids].sum() / env.sim.model.body_mass[ids].sum()
        assert q[22] == pytest.approx((fl - 1) * 4, abs=1e-5)
        assert q[26:29] == pytest.approx(np.asarray(v.base_com_offset) * 20, abs=1e-5)
    env.close()


# ---------------------------------------------------------------------------- physics failures
def test_unstable_steps_are_counted_terminated_and_reset():
    env = env_with(num_envs=3, num_variants=1)
    env.step(torch.zeros(3, 12))
    env.sim.qvel[1, 8] = np.nan  # MuJoCo resets env 1 (its clock jumps back)
    env.sim.qvel[2, 3] = 500.0  # env 2's base spins at 500 rad/s: the state explodes
    obs, rewards, dones, extras = env.step(torch.zeros(3, 12))
    assert env.sim.unstable.tolist() == [False, True, True]
    assert dones.tolist() == [False, True, True] and not extras["time_outs"].any()  # terminated, not timed out
    assert rewards[1:].tolist() == [0.0, 0.0] and rewards[0] >= 0
    assert extras["log"]["/physics_failures"].item() == 2 and env.physics_failures == 2
    for group in ("policy", "privileged"):  # no garbage in the batch, final observations included
        assert torch.isfinite(obs[group]).all() and torch.isfinite(extras["final_observations"][group]).all()
    assert env.episode_length_buf[1:].tolist() == [0, 0]  # reset
    assert np.isfinite(env.sim.state).all() and np.abs(env.sim.qvel[1:]).max() <= 0.5 + 1e-9
    assert env.sim.qpos[1, 2] == pytest.approx(0.34) and env.sim.qpos[2, 2] == pytest.approx(0.34)
    env.step(torch.zeros(3, 12))
    assert env.physics_failures == 2 and not env.sim.unstable.any()
    env.close()


@pytest.mark.slow
def test_a_real_instability_is_caught_with_too_few_solver_iterations():
    """Joint damping 3 at 4 solver iterations: an unconverged contact impulse spins joints past 100 rad/s within
    2 s of standing (the reason the task uses 10 iterations); at 10 iterations none."""
    counts = {}
    for iterations in (4, 10):
        env = Go2Env(num_envs=4, seed=0, sim={"threads": 1, "solver_iterations": iterations},
                     control={"kp": 30.0}, init={"joint_pos_scale": [1.0, 1.0], "random_yaw": False},
                     domain_rand={**OFF, "num_variants": 1})
        env.sim.set_physical_variants([Variant("damped", joint_damping=3.0)])
        env.reset()
        for _ in range(100):
            env.step(torch.zeros(4, 12))
        counts[iterations] = env.physics_failures
        env.close()
    assert counts[4] > 0 and counts[10] == 0, counts


@pytest.mark.slow
def test_a_resume_with_another_seed_keeps_the_physical_variant_pool():
    """The variant pool is drawn from the seed at construction; the env state carries it, so a resume whose
    seed differs (a changed command line) still simulates the same robots, step for step."""
    import io

    from rlcore_tasks.go2.env import Go2Env

    a, b = Go2Env(num_envs=4, seed=0), Go2Env(num_envs=4, seed=99)
    assert a.sim.physical != b.sim.physical
    gen = torch.Generator().manual_seed(0)
    for _ in range(3):
        a.step(0.3 * torch.randn(4, 12, generator=gen))
    buf = io.BytesIO()
    torch.save(a.state_dict(), buf)
    buf.seek(0)
    b.load_state_dict(torch.load(buf, weights_only=True))
    assert b.sim.physical == a.sim.physical
    for _ in range(5):
        actions = 0.3 * torch.randn(4, 12, generator=gen)
        obs_a, rew_a, _, _ = a.step(actions)
        obs_b, rew_b, _, _ = b.step(actions)
        assert torch.equal(obs_a["privileged"], obs_b["privileged"]) and torch.equal(rew_a, rew_b)
    a.close()
    b.close()
