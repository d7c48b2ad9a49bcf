"""The Go2 simulator interface (rlcore_tasks/go2/sim_interface.py): the MuJoCo rollout backend conforms to it, and the
MDP (rlcore_tasks/go2/env.py) reaches the simulator through its members only."""

from __future__ import annotations

import ast
import inspect

import numpy as np
import pytest
import torch

import rlcore_tasks.go2.env as go2_env
from rlcore_tasks.go2 import checkpoint, commands, curriculum, deployment, observations, resets, scan
from rlcore_tasks.go2.config import make_config, no_randomization
from rlcore_tasks.go2.sim import Go2Sim
from rlcore_tasks.go2.sim_interface import Simulator
from rlcore_tasks.go2.terrain import Terrain

N = 4
PROTOCOL_MEMBERS = set(Simulator.__annotations__) | {k for k in vars(Simulator) if not k.startswith("_")}
#: documented shape (N for num_envs) and dtype of every tensor member
TENSORS = {"joint_range": ((12, 2), torch.float32), "torque_limit": ((12,), torch.float32),
           "root_pos": ((N, 3), torch.float32), "root_quat": ((N, 4), torch.float32),
           "root_lin_vel": ((N, 3), torch.float32), "root_ang_vel": ((N, 3), torch.float32),
           "joint_pos": ((N, 12), torch.float32), "joint_vel": ((N, 12), torch.float32),
           "joint_torque": ((N, 12), torch.float32), "foot_forces": ((N, 4), torch.float32),
           "collision_forces": ((N, 8), torch.float32), "base_contact_force": ((N,), torch.float32),
           "unstable": ((N,), torch.bool), "env_variant": ((N,), torch.int64)}


def make_sim(terrain: str = "flat", **domain_rand) -> Go2Sim:
    cfg = make_config({"sim": {"threads": 1}, "domain_rand": {**no_randomization(), **domain_rand},
                       "terrain": {"type": terrain, "num_levels": 2, "num_cols": 2, "tile_size": 4.0}})
    terrain_ = Terrain(cfg.terrain, N, torch.device("cpu"), torch.Generator().manual_seed(0))
    return Go2Sim(cfg, N, terrain_, np.random.default_rng(0))


def standing(sim: Go2Sim, k: int, height: float = 0.4) -> tuple[torch.Tensor, torch.Tensor]:
    pose = torch.tensor(sim.cfg.control.default_joint_pos)
    qpos = torch.cat([torch.tensor([0.0, 0.0, height, 1.0, 0.0, 0.0, 0.0]), pose]).repeat(k, 1)
    return qpos, torch.zeros(k, 18)


def check_members(sim: Go2Sim) -> None:
    for name, (shape, dtype) in TENSORS.items():
        value = getattr(sim, name)
        assert isinstance(value, torch.Tensor), name
        assert tuple(value.shape) == shape and value.dtype == dtype and value.device == sim.device, name


def test_backend_satisfies_the_protocol_with_documented_shapes():
    sim = make_sim(num_variants=3, randomize_joint_damping=True)
    assert isinstance(sim, Simulator)
    assert sim.num_envs == N and sim.decimation == 4 and sim.num_variants == len(sim.physical) == 3
    check_members(sim)
    sim.step(torch.zeros(N, 12))
    check_members(sim)  # views rebuilt by step keep the documented shapes
    assert tuple(sim.variant_features().shape) == (3, 17)
    assert tuple(sim.heights(torch.zeros(2, 5, 2)).shape) == (2, 5)
    options = sim.solver_options()
    assert options["torque_limits"] == pytest.approx(sim.torque_limit.tolist())
    assert set(options["solver"]) == {"integrator", "cone", "iterations", "ls_iterations", "impratio"}
    sim.close()


def test_views_are_the_backend_state_at_float32():
    sim = make_sim()
    sim.step(torch.full((N, 12), 0.1))
    assert torch.equal(sim.root_pos, torch.from_numpy(sim.qpos[:, :3]).float())
    assert torch.equal(sim.root_quat, torch.from_numpy(sim.qpos[:, 3:7]).float())
    assert torch.equal(sim.joint_pos, torch.from_numpy(sim.qpos[:, 7:]).float())
    assert torch.equal(sim.root_lin_vel, torch.from_numpy(sim.qvel[:, :3]).float())
    assert torch.equal(sim.root_ang_vel, torch.from_numpy(sim.qvel[:, 3:6]).float())
    assert torch.equal(sim.joint_vel, torch.from_numpy(sim.qvel[:, 6:]).float())
    assert torch.equal(sim.joint_torque, torch.from_numpy(sim.sensordata[:, sim.torque_sensor]).float())
    assert torch.equal(sim.foot_forces, torch.from_numpy(sim.sensordata[:, sim.foot_sensor]).float())
    sim.close()


def test_reset_and_push_change_only_the_selected_envs():
    sim = make_sim()
    for _ in range(3):
        sim.step(torch.full((N, 12), 0.2))
    before = {name: getattr(sim, name).clone() for name in TENSORS if name not in ("joint_range", "torque_limit")}
    ids = torch.tensor([1, 3])
    qpos, qvel = standing(sim, 2, height=0.5)
    qvel[:, 0] = torch.tensor([0.3, -0.4])
    sim.reset(ids, qpos, qvel)
    kept = torch.tensor([0, 2])
    for name, value in before.items():
        assert torch.equal(getattr(sim, name)[kept], value[kept]), name
    assert torch.equal(sim.root_pos[ids], qpos[:, :3]) and torch.equal(sim.joint_pos[ids], qpos[:, 7:])
    assert torch.equal(sim.root_lin_vel[ids, 0], qvel[:, 0])
    assert (sim.joint_torque[ids] == 0).all() and (sim.foot_forces[ids] == 0).all()  # no readings yet
    pos, lin = sim.root_pos.clone(), sim.root_lin_vel.clone()
    sim.push(torch.tensor([2]), torch.tensor([[0.7, -0.2]]))
    assert torch.equal(sim.root_lin_vel[2, :2], torch.tensor([0.7, -0.2])) and sim.root_lin_vel[2, 2] == lin[2, 2]
    assert torch.equal(sim.root_lin_vel[[0, 1, 3]], lin[[0, 1, 3]]) and torch.equal(sim.root_pos, pos)
    sim.close()


def test_step_applies_the_pd_law_with_the_torque_limit():
    sim = make_sim()
    sim.decimation = 1  # one physics step: the torque sensors read the PD law on the pre-step state
    sim._state_out, sim._sensor_out, sim.ctrl = sim._state_out[:, :1].copy(), sim._sensor_out[:, :1].copy(), \
        sim.ctrl[:, :1].copy()
    qpos, qvel = standing(sim, N, height=1.0)  # in the air: no contacts
    gen = torch.Generator().manual_seed(0)
    qpos[:, 7:] += 0.2 * torch.rand(N, 12, generator=gen) - 0.1
    qvel[:, 6:] = 4.0 * torch.rand(N, 12, generator=gen) - 2.0
    sim.reset(torch.arange(N), qpos, qvel)
    targets = qpos[:, 7:] + torch.linspace(-3.0, 3.0, N * 12).reshape(N, 12)  # far targets clip
    q, qd = sim.qpos[:, 7:].copy(), sim.qvel[:, 6:].copy()
    c = sim.cfg.control
    limit = np.asarray(sim.solver_options()["torque_limits"])
    expected = np.clip(c.kp * (targets.double().numpy() - q) - c.kd * qd, -limit, limit)
    sim.step(targets)
    np.testing.assert_allclose(sim.joint_torque.double().numpy(), expected, rtol=1e-6, atol=1e-4)
    assert (np.abs(expected) == limit).any() and (np.abs(expected) < limit).any()  # both regimes covered
    assert (sim.root_pos[:, 2] < 1.0).all()  # falling freely
    sim.close()


def test_variants_follow_the_assignment_and_state_dict_resumes_exactly():
    sim = make_sim(num_variants=3, randomize_latency=True, latency_range_s=[0.005, 0.015])
    sim.set_variants(torch.tensor([0, 2]), torch.tensor([2, 1]))
    assert sim.env_variant.tolist() == [2, 0, 1, 0]
    for _ in range(2):
        sim.step(torch.full((N, 12), 0.3))
    saved = sim.state_dict()
    targets = [torch.full((N, 12), 0.1 * t) for t in range(3)]
    for t in targets:
        sim.step(t)
    after = sim.root_pos.clone(), sim.joint_vel.clone()
    sim.set_variants(torch.arange(N), torch.zeros(N, dtype=torch.long))
    sim.load_state_dict(saved)
    assert sim.env_variant.tolist() == [2, 0, 1, 0]
    for t in targets:
        sim.step(t)
    assert torch.equal(sim.root_pos, after[0]) and torch.equal(sim.joint_vel, after[1])
    sim.close()


def test_heights_are_the_terrain_heights():
    sim = make_sim(terrain="rough")
    xy = torch.rand(3, 7, 2, generator=torch.Generator().manual_seed(1)) * 8.0
    h = sim.heights(xy)
    assert torch.equal(h, sim.terrain.height_at(xy)) and h.abs().max() > 0
    sim.close()


#: The MDP: env.py and the modules it is split into, which take the env as ``env``.
MDP_MODULES = (go2_env, checkpoint, commands, curriculum, deployment, observations, resets, scan)


@pytest.mark.parametrize("module", MDP_MODULES, ids=lambda m: m.__name__)
def test_the_mdp_uses_only_protocol_members(module):
    """rlcore_tasks/go2/env.py and its pieces touch ``self.sim`` / ``env.sim`` through :class:`Simulator`'s members
    alone."""
    tree = ast.parse(inspect.getsource(module))
    used = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Attribute) and node.value.attr == "sim"
            and isinstance(node.value.value, ast.Name) and node.value.value.id in ("self", "s", "env")}
    used |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
             and isinstance(node.value, ast.Name) and node.value.id == "s"}
    assert used <= PROTOCOL_MEMBERS, sorted(used - PROTOCOL_MEMBERS)
    if module is go2_env:
        assert used


def test_every_mdp_module_is_checked():
    """A new module of rlcore_tasks/go2 that reads ``env.sim`` is added to :data:`MDP_MODULES`."""
    import pathlib

    import rlcore_tasks.go2

    checked = {pathlib.Path(inspect.getsourcefile(m)).name for m in MDP_MODULES}
    readers = {p.name for p in pathlib.Path(rlcore_tasks.go2.__file__).parent.glob("*.py") if "env.sim." in p.read_text()}
    assert readers <= checked, sorted(readers - checked)


def test_the_mdp_state_is_the_backend_state_through_resets_and_pushes():
    """Through episodes ending, resets and pushes, the env's state tensors are the backend's float64 state at
    float32, and two envs of the same seed produce identical observations, rewards and dones."""
    kw = dict(num_envs=8, seed=2, sim={"threads": 1}, domain_rand={"curriculum_steps": 0, "push_interval_s": 0.1,
                                                                   "num_variants": 4})
    a, b = go2_env.Go2Env(**kw), go2_env.Go2Env(**kw)
    gen = torch.Generator().manual_seed(0)
    resets = 0
    for _ in range(40):
        actions = 3.0 * torch.randn(8, 12, generator=gen)
        (obs_a, rew_a, done_a, _), (obs_b, rew_b, done_b, _) = a.step(actions), b.step(actions)
        assert torch.equal(rew_a, rew_b) and torch.equal(done_a, done_b)
        assert all(torch.equal(obs_a[k], obs_b[k]) for k in obs_a.keys())
        resets += int(done_a.sum())
        s = a.sim
        assert torch.equal(a.base_pos, torch.from_numpy(s.qpos[:, :3]).float())
        assert torch.equal(a.dof_pos, torch.from_numpy(s.qpos[:, 7:]).float())
        assert torch.equal(a.dof_vel, torch.from_numpy(s.qvel[:, 6:]).float())
        assert torch.equal(a.base_lin_vel, go2_env.quat_rotate_inverse(a.base_quat, torch.from_numpy(s.qvel[:, :3]).float()))
        assert torch.equal(a.torques, torch.from_numpy(s.sensordata[:, s.torque_sensor]).float())
        assert torch.equal(obs_a["privileged"][:, 3:6], a.variant_params[s.env_variant, :3])
    assert resets > 0 and (a.push_vel != 0).any()
    a.close()
    b.close()
