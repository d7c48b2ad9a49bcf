"""The deployment interface inside an exported ONNX file (``metadata_props``, keys ``rlcore.*``).

Values read back from the file are compared with the Go2 task's settings written out here (or with the
compiled MuJoCo model), never with the dict that was written; the observation layout is checked by rebuilding
Go2Env's ``policy`` (and ``privileged``) vector from the env's state tensors with it.
"""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from tensordict import TensorDict

import rlcore
from rlcore.deployment import METADATA_PREFIX, export_onnx, policy_metadata, read_onnx_interface, write_onnx_metadata
from rlcore.models import MLPModel, RNNModel

pytest.importorskip("mujoco")

from rlcore_tasks.go2 import Go2Env

JOINTS = [f"{leg}_{part}_joint" for leg in ("FL", "FR", "RL", "RR") for part in ("hip", "thigh", "calf")]
DEFAULT_POSE = [0.1, 0.8, -1.5, -0.1, 0.8, -1.5, 0.1, 1.0, -1.5, -0.1, 1.0, -1.5]
# Non-default settings, so that a value taken from the defaults instead of the env would be caught.
OVERRIDES = {"sim": {"threads": 1, "decimation": 5, "solver_iterations": 7},
             "control": {"kp": 30.0, "kd": 0.7, "action_scale": 0.3, "clip_actions": 50.0},
             "commands": {"lin_vel_y": [-0.5, 0.5], "ang_vel_yaw": [-1.5, 1.5]},
             "obs": {"ang_vel_scale": 0.3, "dof_vel_scale": 0.06, "command_scale": [2.0, 2.5, 0.3], "clip": 80.0}}


@pytest.fixture(scope="module")
def env():
    e = Go2Env(num_envs=3, seed=1, **OVERRIDES)
    yield e
    e.close()


def _go2_policy(env, kind: str, groups: list[str]) -> torch.nn.Module:
    obs = env.get_observations()
    cls, extra = (RNNModel, {"rnn_type": kind, "rnn_hidden_dim": 16}) if kind != "mlp" else (MLPModel, {})
    torch.manual_seed(0)
    model = cls(obs, {"actor": groups}, "actor", 12, hidden_dims=[32], obs_normalization=True,
                distribution_cfg={"class_name": "GaussianDistribution", "init_std": 1.0}, **extra)
    with torch.no_grad():  # outputs of order 1, not the small ones of the initial head
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    model.update_normalization(obs)  # statistics that are not the identity
    model.update_normalization(TensorDict({k: v * 3 + 1 for k, v in obs.items()}, batch_size=obs.batch_size))
    return model.eval()


def _export(tmp_path, policy, env, task="go2", name="policy.onnx"):
    module = policy.as_onnx()
    path = export_onnx(module, tmp_path / name, metadata=policy_metadata(module, policy, env, task))
    return path, read_onnx_interface(path)


def _check_go2_settings(meta: dict) -> None:
    """The Go2 interface against OVERRIDES and the task's fixed facts (hand-written above)."""
    assert meta["robot"] == "unitree_go2"
    assert meta["joint_names"] == JOINTS
    assert meta["default_joint_pos"] == DEFAULT_POSE
    assert meta["kp"] == [30.0] * 12 and meta["kd"] == [0.7] * 12
    assert meta["torque_limits"] == [23.7, 23.7, 35.55] * 4
    assert meta["action_scale"] == 0.3 and meta["action_clip"] == 50.0
    assert meta["physics_dt"] == 0.005 and meta["decimation"] == 5
    assert meta["control_dt"] == pytest.approx(0.025, abs=1e-15)
    assert meta["solver"]["iterations"] == 7 and meta["solver"]["cone"] == "mjCONE_PYRAMIDAL"
    ranges = meta["commands"]["ranges"]
    assert ranges["lin_vel_x"] == [-1.0, 1.0] and ranges["lin_vel_y"] == [-0.5, 0.5]
    assert ranges["ang_vel_yaw"] == [-1.5, 1.5] and meta["commands"]["heading"]["in_training"] is True
    assert meta["commands"]["heading"]["gain"] == 0.5 and meta["commands"]["zero_below"] == 0.2
    assert meta["spawn"]["base_height"] == 0.34 and meta["spawn"]["previous_actions"] == 0.0
    assert meta["interface_version"] == 2 and "upgraded_from" not in meta
    assert meta["version"] == rlcore.__version__ and meta["task"] == "go2"
    assert meta["normalizer"] == "in_graph"


def _quantities(env) -> dict[str, torch.Tensor]:
    """Go2Env's state tensors by the term names of the layout (what each term is computed from)."""
    variant = env.variant_params[env.sim.env_variant]
    return {"base_ang_vel": env.base_ang_vel, "projected_gravity": env.projected_gravity,
            "velocity_commands": env.commands, "joint_pos": env.dof_pos, "joint_vel": env.dof_vel,
            "last_actions": env.actions, "base_lin_vel": env.base_lin_vel, "ground_friction": variant[:, 0:1],
            "added_base_mass": variant[:, 1:2], "motor_strength": variant[:, 2:3], "foot_forces": env.foot_forces,
            "push_velocity": env.push_vel, **_physical_quantities(env)}


def _physical_quantities(env) -> dict[str, torch.Tensor]:
    """The randomised physical parameters of each env, read back from its compiled MuJoCo model."""
    s, nominal = env.sim, env.sim.model
    legs = [[nominal.body(f"{leg}_{part}").id for part in ("hip", "thigh", "calf", "foot")]
            for leg in ("FL", "FR", "RL", "RR")]
    rows = []
    for e, v in enumerate(s.env_variant):
        m, p, foot, base = s.variants[v], s.physical[v], nominal.geom("FL_foot").id, nominal.body("base").id
        rows.append([p.kp_scale, p.kd_scale, m.dof_damping[6], m.dof_frictionloss[6], m.dof_armature[6],
                     s.latency[e] * m.opt.timestep, m.geom_solref[foot, 0], m.geom_solimp[foot, 0],
                     m.geom_solimp[foot, 2], float(m.geom_condim[foot] == 6),
                     *(m.body_mass[ids].sum() / nominal.body_mass[ids].sum() for ids in legs),
                     *(m.body_ipos[base] - nominal.body_ipos[base])])
    q = torch.tensor(rows, dtype=torch.float32)
    names = ["kp_scale", "kd_scale", "joint_damping", "joint_frictionloss", "joint_armature", "latency",
             "foot_solref_timeconst", "foot_solimp_dmin", "foot_solimp_width", "foot_condim6"]
    out = {name: q[:, i:i + 1] for i, name in enumerate(names)}
    out.update(leg_mass_scale=q[:, 10:14], base_com_offset=q[:, 14:17], ang_vel_bias=env.imu_bias[:, :3],
               gravity_bias=env.imu_bias[:, 3:], joint_pos_bias=env.joint_pos_bias)
    return out


def _rebuild(layout: list[dict], env, size: int, clip: dict[str, float | None]) -> torch.Tensor:
    """The ``obs`` input rebuilt term by term from the layout: ``(quantity - offset) * scale``, clipped per group."""
    out = torch.full((env.num_envs, size), float("nan"))
    q = _quantities(env)
    for term in layout:
        value = q[term["name"]] - torch.tensor(term.get("offset", 0.0))
        value = value * torch.tensor(term["scale"])
        if clip[term["group"]] is not None:
            value = value.clamp(-clip[term["group"]], clip[term["group"]])
        out[:, term["input_start"]:term["input_stop"]] = value
    return out


def test_go2_mlp_interface_round_trips(tmp_path, env):
    policy = _go2_policy(env, "mlp", ["policy"])
    path, meta = _export(tmp_path, policy, env)
    _check_go2_settings(meta)
    assert meta["model"] == "MLPModel" and meta["obs_groups"] == ["policy"]
    assert meta["inputs"] == [{"name": "obs", "shape": ["batch", 45]}]
    assert meta["outputs"] == [{"name": "actions", "shape": ["batch", 12]}] and meta["recurrent_state"] == []
    assert [(t["name"], t["input_start"], t["input_stop"]) for t in meta["obs_layout"]] == [
        ("base_ang_vel", 0, 3), ("projected_gravity", 3, 6), ("velocity_commands", 6, 9), ("joint_pos", 9, 21),
        ("joint_vel", 21, 33), ("last_actions", 33, 45)]
    scales = {t["name"]: t["scale"] for t in meta["obs_layout"]}
    assert scales["base_ang_vel"] == 0.3 and scales["joint_vel"] == 0.06
    assert scales["velocity_commands"] == [2.0, 2.5, 0.3]
    assert meta["obs_layout"][3]["offset"] == DEFAULT_POSE
    # the layout rebuilds what Go2Env feeds the policy (noise off, a state away from the default pose)
    env.cfg_task.obs.add_noise = False
    try:
        gen = torch.Generator().manual_seed(3)
        for _ in range(5):
            obs, *_ = env.step(torch.randn(3, 12, generator=gen))
        expected = obs["policy"]
        rebuilt = _rebuild(meta["obs_layout"], env, 45, {"policy": meta["observation_groups"]["policy"]["clip"]})
    finally:
        env.cfg_task.obs.add_noise = True
    assert expected[:, 9:21].abs().max() > 0.05 and expected[:, 33:].abs().max() > 0.5  # not a trivial state
    torch.testing.assert_close(rebuilt, expected, rtol=0, atol=1e-6)
    # the metadata sits beside an unchanged graph: onnxruntime still reproduces the eager policy, normaliser included
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (actions,) = session.run(None, {"obs": expected.numpy()})
    with torch.inference_mode():
        eager = policy(TensorDict({"policy": expected}, batch_size=[3])).numpy()
    np.testing.assert_allclose(actions, eager, rtol=0, atol=1e-5)
    assert np.abs(eager).max() > 0.1


def test_go2_teacher_layout_spans_both_groups(tmp_path, env):
    policy = _go2_policy(env, "mlp", ["policy", "privileged"])
    _, meta = _export(tmp_path, policy, env)
    assert meta["obs_groups"] == ["policy", "privileged"] and meta["inputs"][0]["shape"] == ["batch", 92]
    layout = meta["obs_layout"]
    assert [(t["group"], t["name"], t["input_start"], t["input_stop"]) for t in layout[6:]] == [
        ("privileged", "base_lin_vel", 45, 48), ("privileged", "ground_friction", 48, 49),
        ("privileged", "added_base_mass", 49, 50), ("privileged", "motor_strength", 50, 51),
        ("privileged", "foot_forces", 51, 55), ("privileged", "push_velocity", 55, 57),
        ("privileged", "kp_scale", 57, 58), ("privileged", "kd_scale", 58, 59), ("privileged", "joint_damping", 59, 60),
        ("privileged", "joint_frictionloss", 60, 61), ("privileged", "joint_armature", 61, 62),
        ("privileged", "latency", 62, 63), ("privileged", "foot_solref_timeconst", 63, 64),
        ("privileged", "foot_solimp_dmin", 64, 65), ("privileged", "foot_solimp_width", 65, 66),
        ("privileged", "foot_condim6", 66, 67), ("privileged", "leg_mass_scale", 67, 71),
        ("privileged", "base_com_offset", 71, 74), ("privileged", "ang_vel_bias", 74, 77),
        ("privileged", "gravity_bias", 77, 80), ("privileged", "joint_pos_bias", 80, 92)]
    obs = env.get_observations()
    groups = meta["observation_groups"]
    rebuilt = _rebuild(layout, env, 92, {g: groups[g]["clip"] for g in ("policy", "privileged")})
    expected = torch.cat([obs["policy"], obs["privileged"]], dim=1)
    # noise is on here: compare the noiseless privileged part exactly and the policy part within the noise
    torch.testing.assert_close(rebuilt[:, 45:], expected[:, 45:], rtol=1e-6, atol=1e-6)
    noise = torch.cat([torch.full((t["input_stop"] - t["input_start"],), t["training_perturbations"]["noise"])
                       for t in layout[:6]])
    assert noise.tolist() == pytest.approx([0.2 * 0.3] * 3 + [0.05] * 3 + [0.0] * 3 + [0.01] * 12 + [1.5 * 0.06] * 12
                                           + [0.0] * 12)
    bias = torch.cat([torch.full((t["input_stop"] - t["input_start"],), t["training_perturbations"]["bias"])
                      for t in layout[:6]])  # per-episode offsets
    assert bias.tolist() == pytest.approx([0.05 * 0.3] * 3 + [0.02] * 3 + [0.0] * 3 + [0.02] * 12 + [0.0] * 24)
    assert ((rebuilt[:, :45] - expected[:, :45]).abs() <= (noise + bias) * 1.0001 + 1e-6).all()


@pytest.mark.parametrize("rnn_type", ["lstm", "gru"])
def test_go2_rnn_interface_round_trips(tmp_path, env, rnn_type):
    policy = _go2_policy(env, rnn_type, ["policy"])
    path, meta = _export(tmp_path, policy, env)
    _check_go2_settings(meta)
    names = ["h", "c"] if rnn_type == "lstm" else ["h"]
    assert meta["model"] == "RNNModel" and meta["rnn_type"] == rnn_type
    roles = {"h": "rnn_hidden", "c": "rnn_cell"}
    assert meta["recurrent_state"] == [{"input": f"{n}_in", "output": f"{n}_out", "shape": [1, "batch", 16],
                                        "role": roles[n], "initial": 0.0, "reset": "episode_start"} for n in names]
    assert list(meta["observation_groups"]) == ["policy"]  # only what the graph reads: no privileged, no history
    assert [i["name"] for i in meta["inputs"]] == ["obs", *(f"{n}_in" for n in names)]
    assert [o["name"] for o in meta["outputs"]] == ["actions", *(f"{n}_out" for n in names)]
    # the file's real inputs agree with what the metadata says
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    real = {i.name: i.shape for i in session.get_inputs()}
    assert set(real) == {i["name"] for i in meta["inputs"]}
    for state in meta["recurrent_state"]:
        assert real[state["input"]][0] == 1 and real[state["input"]][2] == 16


def test_policy_without_task_interface_still_exports(tmp_path):
    obs = TensorDict({"state": torch.randn(4, 3)}, batch_size=[4])
    policy = MLPModel(obs, {"actor": ["state"]}, "actor", 1, hidden_dims=[8]).eval()

    class Plain:  # a VecEnv without deployment_interface()
        step_dt = 0.05

    path, meta = _export(tmp_path, policy, Plain(), task="pendulum")
    assert meta == {"interface_version": 2, "version": rlcore.__version__, "task": "pendulum", "model": "MLPModel",
                    "inputs": [{"name": "obs", "shape": ["batch", 3]}],
                    "outputs": [{"name": "actions", "shape": ["batch", 1]}],
                    "obs_groups": ["state"], "recurrent_state": [], "normalizer": None, "control_dt": 0.05}
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (actions,) = session.run(None, {"obs": obs["state"].numpy()})
    np.testing.assert_allclose(actions, policy(obs).detach().numpy(), rtol=0, atol=1e-6)
    # no env at all, no metadata at all: nothing rlcore-specific in the file
    bare = export_onnx(policy.as_onnx(), tmp_path / "bare.onnx")
    assert read_onnx_interface(bare) == {}


def test_metadata_is_json_per_key_and_rewriting_keeps_foreign_entries(tmp_path):
    obs = TensorDict({"state": torch.randn(2, 3)}, batch_size=[2])
    policy = MLPModel(obs, {"actor": ["state"]}, "actor", 1, hidden_dims=[8]).eval()
    path = export_onnx(policy.as_onnx(), tmp_path / "p.onnx", metadata={"a": [1, 2.5], "b": {"x": None}})
    model = onnx.load(path)
    model.metadata_props.add(key="vendor", value="kept")
    onnx.save(model, path)
    props = {p.key: p.value for p in onnx.load(path).metadata_props}
    assert props == {METADATA_PREFIX + "a": "[1, 2.5]", METADATA_PREFIX + "b": '{"x": null}', "vendor": "kept"}
    write_onnx_metadata(path, {"c": "new"})
    props = {p.key: p.value for p in onnx.load(path).metadata_props}
    assert props == {"vendor": "kept", METADATA_PREFIX + "c": json.dumps("new")}
    assert read_onnx_interface(path, raw=True) == {"c": "new"}
    write_onnx_metadata(path, {"gains": np.array([20.0, 0.5]), "dt": np.float32(0.25), "n": torch.tensor(3)})
    assert read_onnx_interface(path, raw=True) == {"gains": [20.0, 0.5], "dt": 0.25, "n": 3}
    with pytest.raises(ValueError):
        write_onnx_metadata(path, {"bad": float("nan")})


def test_export_validates_the_interface_against_its_schema(tmp_path, env):
    """A written interface follows the JSON Schema; what version 1 left to prose is refused in one line."""
    import jsonschema

    from rlcore.deployment import SCHEMA_PATH, InterfaceError, validate_interface

    policy = _go2_policy(env, "lstm", ["policy"])
    module = policy.as_onnx()
    meta = policy_metadata(module, policy, env, "go2")
    with open(SCHEMA_PATH) as f:
        jsonschema.Draft202012Validator.check_schema(json.load(f))  # the schema itself is valid JSON Schema
    validate_interface(meta)
    broken = json.loads(json.dumps(meta))
    broken["recurrent_state"][0].pop("initial")  # no initial value for h_in
    with pytest.raises(InterfaceError, match=r"recurrent_state/0: 'initial' is a required property"):
        export_onnx(module, tmp_path / "bad.onnx", metadata=broken)
    prose = json.loads(json.dumps(meta))
    prose["observation_groups"]["policy"]["terms"][0]["noise"] = 0.05  # version 1's ambiguous key
    with pytest.raises(InterfaceError, match="observation_groups/policy"):
        validate_interface(prose)
    history = json.loads(json.dumps(meta))
    history["observation_groups"]["policy"]["order"] = "newest first: ..."
    with pytest.raises(InterfaceError):
        validate_interface(history)


def test_version_1_files_read_as_version_2():
    """A file exported before version 2, read back, carries version 2's fields."""
    from pathlib import Path

    from rlcore.deployment import upgrade_interface

    path = Path(__file__).parents[1] / "compat" / "data" / "go2_flat_v1.onnx"  # go2_flat as shipped on 2026-12-05
    raw = read_onnx_interface(path, raw=True)
    assert "interface_version" not in raw and "command_ranges" in raw and "law" in raw["command_integral"]
    meta = read_onnx_interface(path)
    assert meta["upgraded_from"] == 1 and meta == upgrade_interface(raw) and upgrade_interface(meta) is meta
    assert meta["recurrent_state"] == [{"input": "u_in", "output": "u_out", "shape": [1, "batch", 2],
                                        "role": "command_integral", "initial": 0.0, "reset": "episode_start"}]
    loop = meta["command_integral"]
    assert "law" not in loop and loop["applied_in_graph"] is True and loop["estimate_scale"] == 2.0
    assert meta["commands"]["ranges"]["lin_vel_y"] == [-0.5, 0.5] and meta["commands"]["zero_below"] == 0.2
    history = meta["observation_groups"]["policy_history"]
    assert history["order"] == "newest_first" and history["lags"] == [1, 2, 3, 4, 5]
    layout = {t["name"]: t for t in meta["obs_layout"]}
    assert (layout["joint_pos@t-1"]["input_start"], layout["joint_pos@t-1"]["input_stop"]) == (45 + 9, 45 + 21)
    assert layout["base_ang_vel"]["training_perturbations"] == {"noise": 0.05, "bias": 0.0125}
