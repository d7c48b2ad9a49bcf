"""An env rebuilt from an exported Go2 file simulates what the file states (issue 52, items 6 and 7).

A Go2 env is built with physics unlike the task's defaults (timestep, decimation, solver iterations, integrator,
cone, impratio, spawn height, gains, action scale and clip, reset randomisation); its policy's interface is then
rebuilt the two ways rlcore replays a file: ``play onnx=`` / ``pretrained=`` (the task's ``env_from_interface``)
and ``rlcore.robustness`` (``Go2VariantEnv.from_interface``). Every physics field of the interface must equal what
the rebuilt env's compiled MjModels (nominal and variants), its config and its spawn state say.

The action clip: the file states the bound training applied (the runner's ``clip_actions`` where it is tighter than
the task's), and the robustness env and the reference deployer clamp the actions they receive to it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch

from rlcore.deployment import policy_metadata
from rlcore.env.task import get_task
from rlcore.models import MLPModel
from rlcore_tasks.go2.env import Go2Env
from rlcore_tasks.go2.variants import ROBUSTNESS_GRID, Go2VariantEnv

pytestmark = pytest.mark.slow  # MuJoCo Go2 envs built and stepped: seconds

ROOT = Path(__file__).resolve().parents[2]
SCENE = ROOT / "rlcore_tasks" / "go2" / "assets" / "scene.xml"

#: A training run's task settings, each physics value unlike the task's default.
TRAINED = {
    "sim": {"threads": 1, "dt": 0.004, "decimation": 5, "solver_iterations": 7, "solver_ls_iterations": 4,
            "integrator": "implicitfast", "cone": "elliptic", "impratio": 1.0},
    "init": {"base_height": 0.37, "joint_pos_scale": [0.9, 1.1], "base_lin_vel": 0.2, "base_ang_vel": 0.3,
             "random_yaw": False},
    "control": {"kp": 25.0, "kd": 0.6, "action_scale": 0.3, "clip_actions": 2.0},
}


def interface(runner_clip: float | None = None, **settings) -> dict:
    """The interface of an MLP policy of a Go2 env with ``settings`` (``policy_metadata``, as export writes it)."""
    env = Go2Env(num_envs=1, seed=0, **settings)
    mlp = MLPModel(env.get_observations(), {"actor": ["policy"]}, "actor", 12, hidden_dims=[8])
    extra = {} if runner_clip is None else {"action_clip": runner_clip}
    meta = policy_metadata(mlp.as_onnx(), mlp, env, "go2", **extra)
    env.close()
    return meta


@pytest.fixture(scope="module")
def meta() -> dict:
    return interface(**TRAINED)


def solver_of(model: mujoco.MjModel) -> dict:
    """The interface's ``solver`` fields as ``model`` holds them."""
    opt = model.opt
    return {"integrator": mujoco.mjtIntegrator(opt.integrator).name, "cone": mujoco.mjtCone(opt.cone).name,
            "iterations": int(opt.iterations), "ls_iterations": int(opt.ls_iterations), "impratio": float(opt.impratio)}


def check_physics(env: Go2Env, meta: dict) -> None:
    """Every physics field of ``meta`` equals what ``env`` simulates."""
    solver = meta["solver"]
    assert set(solver) == {"integrator", "cone", "iterations", "ls_iterations", "impratio"}, (
        f"the interface's solver has fields {sorted(solver)}: extend solver_of and the rebuild to the new ones")
    for model in [env.sim.model, *env.sim.variants]:  # the scene and every variant the envs step
        assert solver_of(model) == solver
        assert model.opt.timestep == pytest.approx(meta["physics_dt"], abs=0)
    for variant, model in zip(env.sim.physical, env.sim.variants):  # the PD gains (a variant may scale them)
        strength = variant.motor_strength
        assert model.actuator_gainprm[:, 0] == pytest.approx([meta["kp"][0] * variant.kp_scale * strength] * 12)
        assert model.actuator_biasprm[:, 2] == pytest.approx([-meta["kd"][0] * variant.kd_scale * strength] * 12)
    assert env.cfg_task.sim.decimation == meta["decimation"]
    assert env.step_dt == pytest.approx(meta["control_dt"])
    c = env.cfg_task.control
    assert (c.action_scale, c.clip_actions) == (meta["action_scale"], meta["action_clip"])
    assert list(c.default_joint_pos) == meta["default_joint_pos"]
    mine = env.deployment_interface()
    for key in ("kp", "kd", "torque_limits", "physics_dt", "decimation", "action_scale", "action_clip", "solver"):
        assert mine[key] == meta[key], key
    spawn = meta["spawn"]
    assert env.cfg_task.init.base_height == spawn["base_height"]
    assert {k: v for k, v in mine["spawn"].items() if k != "training_randomisation"} == \
           {k: v for k, v in spawn.items() if k != "training_randomisation"}


def test_the_interface_states_the_trained_physics(meta):
    """The file itself is not the task's default (else the round trips below would prove nothing)."""
    assert meta["solver"] == {"integrator": "mjINT_IMPLICITFAST", "cone": "mjCONE_ELLIPTIC", "iterations": 7,
                              "ls_iterations": 4, "impratio": 1.0}
    assert meta["spawn"]["base_height"] == 0.37 and meta["physics_dt"] == 0.004 and meta["decimation"] == 5
    assert meta["spawn"]["training_randomisation"] == {k: v for k, v in TRAINED["init"].items() if k != "base_height"}


def test_play_rebuilds_every_physics_field(meta):
    """``play onnx=<file>`` / ``pretrained=``: the env from the task's ``env_from_interface``."""
    settings = get_task("go2").env_from_interface(meta)
    env = Go2Env(num_envs=2, seed=0, **settings)
    try:
        check_physics(env, meta)
        init = env.cfg_task.init  # episodes start as the file says training started them
        described = meta["spawn"]["training_randomisation"]
        assert (list(init.joint_pos_scale), init.base_lin_vel, init.base_ang_vel, init.random_yaw) == (
            described["joint_pos_scale"], described["base_lin_vel"], described["base_ang_vel"], described["random_yaw"])
        assert torch.allclose(env.base_pos[:, 2], torch.full((2,), meta["spawn"]["base_height"]))  # spawned there
    finally:
        env.close()


def test_robustness_rebuilds_every_physics_field(meta):
    """``rlcore.robustness``: ``Go2VariantEnv.from_interface``, its variants compiled with the file's solver, and
    every env spawned as ``spawn`` says (height, upright, default pose, at rest)."""
    env = Go2VariantEnv.from_interface(meta, 2, episode_s=1.0, threads=1)
    try:
        env.assign_variants([ROBUSTNESS_GRID[0], ROBUSTNESS_GRID[1]], np.array([0, 1]))
        check_physics(env, meta)
        env.reset()
        assert torch.allclose(env.base_pos[:, 2], torch.full((2,), meta["spawn"]["base_height"]))
        assert torch.allclose(env.base_quat, torch.tensor([meta["spawn"]["base_quat_wxyz"]] * 2))
        assert torch.allclose(env.dof_pos, torch.tensor([meta["default_joint_pos"]] * 2))
    finally:
        env.close()


# ---------------------------------------------------------------------------- one action clip, item 6
def test_the_file_states_the_clip_training_applied():
    """The runner's ``clip_actions`` (0.25) is tighter than the task's (100): the file says 0.25; a looser runner
    clip leaves the task's; no runner clip leaves the task's."""
    assert interface(0.25, sim={"threads": 1})["action_clip"] == 0.25
    assert interface(500.0, sim={"threads": 1})["action_clip"] == 100.0
    assert interface(None, sim={"threads": 1})["action_clip"] == 100.0


def test_robustness_and_the_deployer_apply_the_files_clip():
    """What the robustness env and the reference deployer pass to the PD law is the action clipped to the file's
    ``action_clip``, as training's env received it."""
    meta = interface(0.25, sim={"threads": 1})
    env = Go2VariantEnv.from_interface(meta, 1, episode_s=1.0, threads=1)
    try:
        env.step(torch.tensor([[3.0, -3.0] * 6]))
        assert env.actions.abs().max().item() == pytest.approx(0.25)  # the last_actions the policy sees next
    finally:
        env.close()
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import deploy_go2_mujoco as example
    finally:
        sys.path.pop(0)
    robot = example.Robot(str(SCENE), meta)
    robot.spawn()
    robot.apply(np.array([3.0, -3.0] * 6, dtype=np.float32))
    assert np.abs(robot.actions).max() == pytest.approx(0.25)
