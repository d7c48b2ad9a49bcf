"""The MuJoCo Warp backend of the Go2 simulator (rlcore_tasks/go2/sim_warp.py) on Warp's CPU device, against the
rollout backend: the protocol, parity per step and per world variant, resets, pushes, physics failures, checkpoints
across backends, the height field, and a policy trained on the rollout backend walking on it.

Slow: MuJoCo Warp compiles its kernels on first use (about 30 s per scene on this CPU; Warp caches them on disk)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

pytest.importorskip("mujoco_warp")

from rlcore_tasks.go2.config import make_config, no_randomization
from rlcore_tasks.go2.env import Go2Env, simulator_class
from rlcore_tasks.go2.randomization import Variant
from rlcore_tasks.go2.sim import Go2Sim
from rlcore_tasks.go2.sim_interface import Simulator
from rlcore_tasks.go2.sim_warp import WarpSim
from rlcore_tasks.go2.terrain import Terrain
from tests.cli.cli_helpers import TINY, check_ok, run_module

pytestmark = pytest.mark.slow
N = 8


def make_pair(terrain: str = "flat", iterations: int = 10, **domain_rand) -> tuple[Go2Sim, WarpSim]:
    """The rollout and the Warp backend of one config (no randomisation unless asked), the same initial state."""
    cfg = make_config({"sim": {"threads": 1, "solver_iterations": iterations},
                       "domain_rand": {**no_randomization(), "num_variants": 1, **domain_rand},
                       "terrain": {"type": terrain, "num_levels": 2, "num_cols": 2, "tile_size": 4.0}})
    terrain_ = Terrain(cfg.terrain, N, torch.device("cpu"), torch.Generator().manual_seed(0))
    a = Go2Sim(cfg, N, terrain_, np.random.default_rng(0))
    b = WarpSim(cfg, N, terrain_, np.random.default_rng(0))
    return a, b


def standing(cfg, k: int, height: float = 0.33) -> tuple[torch.Tensor, torch.Tensor]:
    pose = torch.tensor(cfg.control.default_joint_pos)
    return torch.cat([torch.tensor([0.0, 0.0, height, 1.0, 0.0, 0.0, 0.0]), pose]).repeat(k, 1), torch.zeros(k, 18)


def targets_of(sim, gen: torch.Generator, std: float = 0.1) -> torch.Tensor:
    return torch.tensor(sim.cfg.control.default_joint_pos) + std * torch.randn(N, 12, generator=gen)


def diff(a: Go2Sim, b: WarpSim) -> tuple[np.ndarray, np.ndarray]:
    """Per-env largest |qpos| and |qvel| difference."""
    return (np.abs(a.qpos - b.qpos.double().numpy()).max(axis=1), np.abs(a.qvel - b.qvel.double().numpy()).max(axis=1))


def test_backend_choice_and_protocol():
    assert simulator_class("warp") is WarpSim and simulator_class("rollout") is Go2Sim
    with pytest.raises(Exception, match=r"go2.sim.backend: 'physx'; use one of \['rollout', 'warp'\]"):
        simulator_class("physx")
    a, b = make_pair()
    assert isinstance(b, Simulator)
    for name in ("root_pos", "root_quat", "root_lin_vel", "root_ang_vel", "joint_pos", "joint_vel", "joint_torque",
                 "foot_forces", "collision_forces", "base_contact_force", "unstable", "env_variant", "joint_range",
                 "torque_limit"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.shape == y.shape and x.dtype == y.dtype and y.device == b.device, name
    assert b.solver_options() == a.solver_options()
    # the state views are the Warp arrays themselves (zero copy): a write through Warp shows in the tensor
    b.wp_data.qpos.numpy()  # synchronised
    import warp as wp

    wp.to_torch(b.wp_data.qpos)[0, 2] = 1.25
    assert b.root_pos[0, 2].item() == 1.25


def one_step_errors(a: Go2Sim, b: WarpSim, steps: int, seed: int, std: float = 0.1) -> np.ndarray:
    """``[steps, N]`` largest |qpos| difference after one control step from the rollout backend's state."""
    gen, errors = torch.Generator().manual_seed(seed), []
    for _ in range(steps):
        b.load_state_dict(a.state_dict())
        t = targets_of(a, gen, std)
        a.step(t), b.step(t)
        errors.append(diff(a, b)[0])
    return np.array(errors)


def test_parity_on_the_nominal_robot():
    """In the air (no contact) the float32 Warp trajectory stays within 1e-5 of the float64 rollout one over 60
    control steps; standing and stepping, one control step from the same state lands within 1e-5 (median) and
    beyond 1e-4 on under 3 % of the env-steps (a contact that one precision makes and the other does not)."""
    a, b = make_pair()
    q, v = standing(a.cfg, N, height=10.0)  # 1.4 s of free fall: no contact in 60 steps
    a.reset(torch.arange(N), q, v), b.reset(torch.arange(N), q, v)
    gen = torch.Generator().manual_seed(0)
    worst = np.zeros(2)
    for _ in range(60):
        t = targets_of(a, gen)
        a.step(t), b.step(t)
        worst = np.maximum(worst, [d.max() for d in diff(a, b)])
    assert worst[0] < 1e-5 and worst[1] < 1e-3, worst
    q, v = standing(a.cfg, N)
    a.reset(torch.arange(N), q, v), b.reset(torch.arange(N), q, v)
    errors = one_step_errors(a, b, 40, seed=1)
    assert np.median(errors) < 1e-5 and (errors > 1e-4).mean() < 0.03, np.sort(errors.ravel())[-10:]
    assert a.foot_forces.sum() > 100  # on the ground
    np.testing.assert_allclose(b.foot_forces.numpy(), a.foot_forces.numpy(), atol=1.0)


def test_each_world_simulates_its_own_variant():
    """Eight worlds, eight variants (per-world arrays of one Warp model); from the rollout state at every step,
    one control step: every world lands where the rollout backend's own model of its variant puts it. A converged
    solver (50 iterations) takes the solvers' stopping points out; a rare contact that one precision makes and the
    other does not (a jump of up to ~2e-2 at one step) is allowed on under 3 % of the env-steps - a variant whose
    rows did not reach its world would miss on all of its steps (12.5 %)."""
    variants = [Variant("nominal"), Variant("damping_3", joint_damping=3.0),
                Variant("frictionloss_0.4", joint_frictionloss=0.4), Variant("kp_+50%", kp_scale=1.5, kd_scale=0.7),
                Variant("soft_feet", foot_solref=(0.03, 1.0), foot_solimp=(0.015, 1.0, 0.03)),
                Variant("heavy", leg_mass_scale=1.3, base_added_mass=3.0, base_com_offset=(0.03, 0.01, 0.0)),
                Variant("ice", ground_friction=0.3, joint_armature=0.03), Variant("latency", latency_s=0.01)]
    a, b = make_pair(iterations=50)
    for s in (a, b):
        s.set_physical_variants(variants)
        s.set_variants(torch.arange(N), torch.arange(N))
    assert b.unsupported == [] and {"dof_damping", "actuator_gainprm", "geom_friction", "body_mass"} <= set(b.batched)
    q, v = standing(a.cfg, N)
    a.reset(torch.arange(N), q, v), b.reset(torch.arange(N), q, v)
    errors = one_step_errors(a, b, 40, seed=1)
    assert (errors > 1e-4).mean() < 0.03 and np.median(errors) < 1e-5, errors.max(axis=0)
    assert np.abs(a.qpos[3] - a.qpos[0]).max() > 1e-3  # the variants do move the robot differently


def test_condim_cannot_vary_per_world_and_says_so(capsys):
    a, b = make_pair()
    b.set_physical_variants([Variant("nominal"), Variant("condim6_feet", foot_condim=6)])
    assert b.unsupported == ["geom_condim"]
    assert "cannot vary ['geom_condim'] per world: 1 variant(s) (condim6_feet)" in capsys.readouterr().out


def test_resets_pushes_and_failures_touch_only_their_worlds():
    a, b = make_pair()
    gen = torch.Generator().manual_seed(2)
    b.step(targets_of(b, gen))
    before_pos, before_vel = b.root_pos.clone(), b.root_lin_vel.clone()
    ids = torch.tensor([1, 3])
    q, v = standing(b.cfg, 2, height=0.5)
    v[:, 0] = torch.tensor([0.3, -0.4])
    b.reset(ids, q, v)
    kept = torch.tensor([0, 2, 4, 5, 6, 7])
    assert torch.equal(b.root_pos[kept], before_pos[kept]) and torch.equal(b.root_pos[ids], q[:, :3])
    assert torch.equal(b.root_lin_vel[ids, 0], v[:, 0]) and (b.foot_forces[ids] == 0).all()
    b.push(torch.tensor([2]), torch.tensor([[0.7, -0.2]]))
    assert torch.equal(b.root_lin_vel[2, :2], torch.tensor([0.7, -0.2]))
    assert torch.equal(b.root_lin_vel[kept[kept != 2]], before_vel[kept[kept != 2]])
    # failures: a non-finite state and a state past MAX_SPEED restart from the model's initial state; the rest steps on
    q, v = standing(b.cfg, 2)
    v[0, 6] = float("nan")
    v[1, 8] = 500.0
    b.reset(torch.tensor([5, 6]), q, v)
    b.step(targets_of(b, gen))
    assert b.unstable.tolist() == [False] * 5 + [True, True, False]
    assert torch.isfinite(b.qvel).all() and torch.isfinite(b.sensordata).all()
    initial = torch.as_tensor(b._initial[b._qpos_cols], dtype=torch.float32)
    assert torch.equal(b.qpos[5], initial) and torch.equal(b.qpos[6], initial) and (b.foot_forces[5:7] == 0).all()
    b.step(targets_of(b, gen))
    assert not b.unstable.any()


def test_checkpoint_state_crosses_backends():
    """Both backends save the rollout backend's state layout: a run saved on one resumes on the other."""
    a, b = make_pair(randomize_latency=True, latency_range_s=[0.005, 0.015], num_variants=3)
    gen = torch.Generator().manual_seed(3)
    for _ in range(5):
        a.step(targets_of(a, gen))
    saved = a.state_dict()
    b.load_state_dict(saved)
    again = b.state_dict()
    assert set(again) == set(saved)
    for key in saved:
        assert again[key].shape == saved[key].shape, key
    np.testing.assert_allclose(again["sim_state"].numpy(), saved["sim_state"].numpy(), atol=1e-6)
    t = targets_of(a, gen)
    a.step(t), b.step(t)
    assert max(d.max() for d in diff(a, b)) < 1e-3


def test_height_field_contacts_and_scan():
    """Rough terrain: the same heights under the scan points, and robots standing on the height field on both
    backends. The two engines' height-field collisions differ (MuJoCo: several contacts per foot from the field's
    prisms; MuJoCo Warp: its own convex-field test, fewer and deeper contacts), so one control step from the same
    state differs by about 1e-2 (median), not by float precision as on the plane."""
    a, b = make_pair(terrain="rough")
    xy = torch.rand(N, 2, generator=torch.Generator().manual_seed(4)) * 6.0 + 1.0
    ground = b.heights(xy)
    assert torch.equal(ground, a.heights(xy)) and ground.abs().max() > 0.01
    q, v = standing(a.cfg, N)
    q[:, :2], q[:, 2] = xy, ground + 0.36
    a.reset(torch.arange(N), q, v), b.reset(torch.arange(N), q, v)
    errors = one_step_errors(a, b, 25, seed=5, std=0.05)
    assert np.median(errors) < 0.05, np.median(errors)
    for s in (a, b):  # standing on the field, not through it
        assert (s.foot_forces.sum(dim=1) > 20).all() and (s.root_pos[:, 2] > ground + 0.2).all()


def test_shipped_policy_transfers_to_warp():
    """go2_flat, trained on the rollout backend, on the Warp backend's nominal robot through rlcore.robustness: no
    fall, and its planar error within 0.02 m/s of the rollout backend's."""
    figures = {}
    for backend in ("rollout", "warp"):
        proc = check_ok(run_module("rlcore.robustness", "policy=go2_flat", "variants=nominal", "table=none",
                                   f"task.env.sim.backend={backend}", "threads=1", timeout=600))
        line = re.search(r"robustness: nominal_err=(\S+) .* falls=(\d+)/(\d+)", proc.stdout)
        figures[backend] = (float(line.group(1)), int(line.group(2)))
    assert figures["warp"][1] == 0 and figures["rollout"][1] == 0
    assert abs(figures["warp"][0] - figures["rollout"][0]) <= 0.02, figures


def test_training_runs_on_warp_and_resumes_on_rollout(tmp_path):
    """task.env.sim.backend=warp trains end to end (2 iterations, 8 envs on Warp's CPU device); its checkpoint
    resumes on the rollout backend."""
    run = tmp_path / "warp"
    proc = check_ok(run_module("rlcore.train", "task=go2", *TINY, "task.env.sim.backend=warp",
                               f"hydra.run.dir={run}", timeout=900))
    assert (run / "model_1.pt").is_file() and re.search(r"^it 2/2 ", proc.stdout, re.M), proc.stdout[-2000:]
    assert "Warp 1.19" not in proc.stdout  # Warp's banner and kernel lines are quiet
    ckpt = torch.load(run / "model_1.pt", weights_only=True)
    assert ckpt["env_state"]["sim_state"].dtype == torch.float64 and ckpt["iter"] == 1
    resumed = tmp_path / "rollout"
    proc = check_ok(run_module("rlcore.train", "task=go2", *TINY, "runner.max_iterations=3", f"resume={run}",
                               f"hydra.run.dir={resumed}", timeout=600))
    assert (resumed / "model_2.pt").is_file()


def test_env_on_warp_matches_env_on_rollout_for_a_few_steps():
    """The whole MDP on each backend (Go2Env, sim.backend), randomisation off: observations agree to float32
    physics precision for the first steps."""
    kw = dict(num_envs=4, seed=0, sim={"threads": 1}, domain_rand={**no_randomization(), "num_variants": 1},
              obs={"add_noise": False})
    ea, eb = Go2Env(**kw), Go2Env(**{**kw, "sim": {"threads": 1, "backend": "warp"}})
    assert type(eb.sim) is WarpSim
    gen = torch.Generator().manual_seed(6)
    for _ in range(10):
        act = 0.3 * torch.randn(4, 12, generator=gen)
        oa, ob = ea.step(act)[0], eb.step(act)[0]
    torch.testing.assert_close(ob["policy"], oa["policy"], atol=2e-3, rtol=0)


def test_play_takes_task_settings_on_the_command_line():
    """``rlcore.play pretrained=go2_flat task.env.sim.backend=warp`` plays on MuJoCo Warp (the setting reaches the
    env: a misspelt one is refused by the task, naming it)."""
    proc = check_ok(run_module("rlcore.play", "pretrained=go2_flat", "episodes=1", "max_steps=30",
                               "task.env.sim.backend=warp", timeout=600))
    assert "episode" in proc.stdout
    bad = run_module("rlcore.play", "pretrained=go2_flat", "episodes=1", "max_steps=5", "task.env.sim.backnd=warp")
    assert bad.returncode != 0 and "backnd" in bad.stderr


def test_split_env_overrides():
    from rlcore.config.cli import UserError, merge_settings, split_env_overrides

    rest, env = split_env_overrides(["policy=x", "task.env.sim.backend=warp", "+task.env.sim.threads=2",
                                     "task.env.commands.lin_vel_x=[-2,2]"], "robustness")
    assert rest == ["policy=x"]
    assert env == {"sim": {"backend": "warp", "threads": 2}, "commands": {"lin_vel_x": [-2, 2]}}
    merged = merge_settings({"sim": {"dt": 0.005, "threads": 1}, "obs": {"clip": 5}}, env)
    assert merged == {"sim": {"dt": 0.005, "threads": 2, "backend": "warp"}, "obs": {"clip": 5},
                      "commands": {"lin_vel_x": [-2, 2]}}
    with pytest.raises(UserError, match="expected task.env.<setting>=<value>"):
        split_env_overrides(["task.env.sim"], "play")


def test_rough_task_with_its_height_scan_on_warp():
    """task=go2_rough's env on the Warp backend (randomisation off): the first observations, the height scan
    included, are the rollout backend's; ten steps later the robots still stand on the field (no physics failure)."""
    from rlcore_tasks.go2.task import make_go2_rough

    kw = dict(num_envs=4, seed=0, sim={"threads": 1, "solver_iterations": 20}, obs={"add_noise": False},
              domain_rand={**no_randomization(), "num_variants": 1},
              terrain={"num_levels": 2, "num_cols": 2, "tile_size": 4.0})
    ea, eb = make_go2_rough(**kw), make_go2_rough(**{**kw, "sim": {**kw["sim"], "backend": "warp"}})
    assert type(eb.sim) is WarpSim
    oa, ob = ea.get_observations(), eb.get_observations()
    assert "height_scan" in ob.keys()
    torch.testing.assert_close(ob["height_scan"], oa["height_scan"], atol=1e-5, rtol=0)
    torch.testing.assert_close(ob["policy"], oa["policy"], atol=1e-5, rtol=0)
    for _ in range(10):
        eb.step(torch.zeros(4, 12))
        assert not eb.sim.unstable.any()
    assert (eb.base_pos[:, 2] - eb.sim.heights(eb.base_pos[:, :2]) > 0.2).all()
