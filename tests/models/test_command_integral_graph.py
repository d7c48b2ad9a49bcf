"""The command integral in the exported graph (rlcore_tasks.go2.command_integral, ``export command_integral_gain=``):
the policy is shown its command shifted by ``u`` (current and history frames), ``u`` integrates ``cmd - estimate``
within its limit, the ONNX file carries ``u_in``/``u_out`` as a recurrent state that the robustness tool feeds back."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from rlcore.errors import ConfigError

pytestmark = pytest.mark.slow  # every test uses the session's trained tiny Go2 run


@pytest.fixture(scope="module")
def go2_run(tiny_go2_run) -> dict:
    """The session's tiny Go2 run (default actor: history and a base_lin_vel estimator), its policy and env."""
    from rlcore.checkpoint.run_files import load_run, make_run_env, make_run_policy

    info = load_run(tiny_go2_run)
    env = make_run_env(info, 4, "cpu", 0)
    yield {"dir": tiny_go2_run, "info": info, "env": env, "policy": make_run_policy(info, env, "cpu")}
    env.close()


def integral_module(go2_run, gain: float = 2.0, limit: float = 0.3, band: float = 0.0, **yaw: float):
    """The exported graph with these loop settings; ``yaw``: ``yaw_gain`` / ``yaw_limit`` / ``yaw_band`` (default:
    no yaw axis)."""
    from rlcore.export import _command_integral_module

    yaw.setdefault("yaw_gain", 0.0)
    return _command_integral_module(go2_run["policy"], go2_run["env"], {
        "format": "onnx", "command_integral_gain": gain, "command_integral_limit": limit,
        "command_integral_band": band, **{f"command_integral_{k}": v for k, v in yaw.items()}})


def test_the_policy_sees_its_command_shifted_by_u_and_u_integrates_cmd_minus_estimate(go2_run):
    """With ``u``, the graph's actions are the eager policy's on observations whose command columns (the current
    frame's and the 5 history frames') are moved by ``u * 2.0`` (the command scale); ``u_out`` is ``u + gain * dt *
    (cmd - estimate)`` computed by hand from the eager estimator, clipped to the limit."""
    policy, env = go2_run["policy"], go2_run["env"]
    module = integral_module(go2_run, gain=2.0, limit=0.3)
    obs = env.get_observations()
    x = torch.cat([obs[g] for g in policy.obs_groups_1d], dim=-1)  # [4, 270]
    u = torch.tensor([[0.1, -0.05], [0.0, 0.0], [-0.2, 0.3], [0.25, 0.1]])
    actions, u_out = module(x, u.unsqueeze(0))
    cols_x = [6] + [45 + 6 + 45 * k for k in range(5)]  # vx of the current frame and of each history frame
    shifted = obs.clone()
    shifted["policy"][:, 6] += 2.0 * u[:, 0]
    shifted["policy"][:, 7] += 2.0 * u[:, 1]
    for col in cols_x[1:]:
        shifted["policy_history"][:, col - 45] += 2.0 * u[:, 0]
        shifted["policy_history"][:, col - 45 + 1] += 2.0 * u[:, 1]
    with torch.no_grad():
        eager = policy(shifted, stochastic_output=False)
        estimate = policy.last_estimate[:, :2] / 2.0  # the estimator's base velocity, in m/s
    torch.testing.assert_close(actions, eager, atol=1e-5, rtol=0)
    cmd = obs["policy"][:, 6:8] / 2.0  # the command to reach: the unshifted one
    expected = (u + 2.0 * env.step_dt * (cmd - estimate)).clamp(-0.3, 0.3)
    torch.testing.assert_close(u_out[0], expected, atol=1e-5, rtol=0)
    small = integral_module(go2_run, gain=2.0, limit=0.01)(x, u.unsqueeze(0))[1]
    assert small.abs().max() <= 0.01 + 1e-7  # the limit bounds the correction


def test_the_yaw_axis_shifts_the_yaw_command_and_integrates_cmd_minus_gyro(go2_run, tmp_path):
    """``yaw_gain``: ``u`` has a third axis. The yaw-rate command columns (current and history frames) move by
    ``u_yaw * 0.25`` (their scale), and ``u_yaw`` integrates ``cmd_yaw - gyro_z`` (both read from the observation,
    unscaled by hand) within its band and limit; the planar axes are as before. The ONNX file carries it."""
    import onnxruntime as ort

    from rlcore.deployment import export_onnx, policy_metadata, read_onnx_interface

    policy, env = go2_run["policy"], go2_run["env"]
    module = integral_module(go2_run, gain=2.0, limit=0.3, band=0.0, yaw_gain=1.5, yaw_limit=0.2, yaw_band=0.5)
    obs = env.get_observations()
    obs["policy"][:, 8] = torch.tensor([1.0, -1.0, 0.2, 0.0]) * 0.25  # yaw commands [rad/s], scaled
    obs["policy"][:, 2] = torch.tensor([0.8, -0.1, 0.1, 0.3]) * 0.25  # gyro z [rad/s], scaled
    x = torch.cat([obs[g] for g in policy.obs_groups_1d], dim=-1)
    u = torch.tensor([[0.1, -0.05, 0.1], [0.0, 0.0, -0.15], [-0.2, 0.3, 0.0], [0.25, 0.1, 0.05]])
    actions, u_out = module(x, u.unsqueeze(0))
    shifted = obs.clone()
    shifted["policy"][:, 6:9] += u * torch.tensor([2.0, 2.0, 0.25])
    for k in range(5):
        shifted["policy_history"][:, 45 * k + 6:45 * k + 9] += u * torch.tensor([2.0, 2.0, 0.25])
    with torch.no_grad():
        eager = policy(shifted, stochastic_output=False)
        estimate = policy.last_estimate[:, :2] / 2.0
    torch.testing.assert_close(actions, eager, atol=1e-5, rtol=0)
    error_yaw = torch.tensor([1.0 - 0.8, -1.0 + 0.1, 0.2 - 0.1, 0.0 - 0.3])  # cmd - gyro, by hand
    yaw = (u[:, 2] + 1.5 * env.step_dt * error_yaw * (error_yaw.abs() < 0.5)).clamp(-0.2, 0.2)
    planar = (u[:, :2] + 2.0 * env.step_dt * (obs["policy"][:, 6:8] / 2.0 - estimate)).clamp(-0.3, 0.3)
    torch.testing.assert_close(u_out[0], torch.cat([planar, yaw[:, None]], dim=1), atol=1e-5, rtol=0)
    assert u_out[0, 1, 2] == u[1, 2]  # |error| 0.9 is outside the band: the yaw axis holds
    path = export_onnx(module, tmp_path / "yaw.onnx", metadata=policy_metadata(module, policy, env, "go2"))
    loop = read_onnx_interface(path)["command_integral"]
    assert loop["axes"] == ["lin_vel_x", "lin_vel_y", "ang_vel_yaw"] and loop["yaw_gain"] == 1.5
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    out = session.run(None, {"obs": x.numpy(), "u_in": u.unsqueeze(0).numpy()})
    np.testing.assert_allclose(out[1][0], u_out[0].detach().numpy(), atol=1e-6)
    np.testing.assert_allclose(out[0], actions.detach().numpy(), atol=1e-5)


def test_the_band_integrates_an_axis_only_near_its_command(go2_run):
    """band=b: each axis of ``u`` integrates its error only where ``|cmd - estimate| < b`` (integral separation);
    errors at or over the band leave that axis of ``u`` as it was. Checked against the hand-computed law, on
    commands set so that both kinds of axis occur; the file's metadata states the band."""
    policy, env = go2_run["policy"], go2_run["env"]
    obs = env.get_observations()
    x = torch.cat([obs[g] for g in policy.obs_groups_1d], dim=-1)
    u = torch.zeros(4, 2)  # the policy sees its command unshifted, so the eager estimate is the graph's
    with torch.no_grad():
        policy(obs, stochastic_output=False)
        estimate = policy.last_estimate[:, :2] / 2.0
    cmd = obs["policy"][:, 6:8] / 2.0
    error = cmd - estimate
    band = float(error.abs().median())  # about half of the axes inside the band
    inside = error.abs() < band
    assert 0 < int(inside.sum()) < inside.numel()
    module = integral_module(go2_run, gain=2.0, limit=0.3, band=band)
    u_out = module(x, u.unsqueeze(0))[1][0]
    expected = (u + 2.0 * env.step_dt * torch.where(inside, error, 0.0)).clamp(-0.3, 0.3)
    torch.testing.assert_close(u_out, expected, atol=1e-5, rtol=0)
    assert torch.equal(u_out[~inside], u[~inside]) and (u_out[inside] != 0).all()
    assert module.metadata()["band"] == band and module.metadata()["applied_in_graph"] is True
    assert integral_module(go2_run, band=0.0).metadata()["band"] == 0.0
    with pytest.raises(ConfigError, match="band >= 0"):
        integral_module(go2_run, band=-0.1)


@pytest.mark.parametrize("rnn_type", ["lstm", "gru"])
def test_a_recurrent_policy_carries_the_loop_after_its_memory(go2_run, rnn_type):
    """An RNN policy (a distilled student's kind) with a base_lin_vel estimator on its memory's output: over 5 steps,
    each with its own ``u``, the graph's actions and memory equal the eager RNNModel's on observations whose command
    columns are moved by ``u * 2.0``, and ``u_out = u + gain * dt * (cmd - estimate)`` from the eager estimate."""
    from rlcore.models import RNNModel
    from rlcore_tasks.go2.command_integral import integral_for

    env = go2_run["env"]
    obs = env.get_observations()
    torch.manual_seed(0)
    model = RNNModel(obs, {"actor": ["policy"]}, "actor", 12, hidden_dims=[32], obs_normalization=True,
                     distribution_cfg={"class_name": "GaussianDistribution", "init_std": 1.0}, rnn_type=rnn_type,
                     rnn_hidden_dim=16, estimator_cfg={"target_groups": ["base_lin_vel"], "hidden_dims": [16]})
    gen = torch.Generator().manual_seed(1)
    frames = [obs.clone() for _ in range(5)]
    for frame in frames:
        frame["policy"] += 0.3 * torch.randn(frame["policy"].shape, generator=gen)
    model.update_normalization(torch.stack(frames))  # a normaliser that is not the identity
    module = integral_for(model, env, gain=2.0, limit=0.3, band=0.0, yaw_gain=0.0)
    memory = ["h", "c"] if rnn_type == "lstm" else ["h"]
    assert module.input_names == ["obs", *(f"{m}_in" for m in memory), "u_in"]
    assert module.output_names == ["actions", *(f"{m}_out" for m in memory), "u_out"]
    state = module.initial_state(4)
    model.reset()
    for frame in frames:
        u = (torch.rand(4, 2, generator=gen) - 0.5) * 0.4
        actions, *out = module(frame["policy"], *state[:-1], u.unsqueeze(0))
        shifted = frame.clone()
        shifted["policy"][:, 6:8] += 2.0 * u  # the command columns (vx, vy), observation scale 2.0
        with torch.no_grad():
            eager = model(shifted, stochastic_output=False)
            estimate = model.last_estimate[:, :2] / 2.0
        torch.testing.assert_close(actions, eager, atol=1e-5, rtol=0)
        hidden = model.get_hidden_state()
        for a, b in zip(out[:-1], hidden if isinstance(hidden, tuple) else (hidden,)):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
        expected = (u + 2.0 * env.step_dt * (frame["policy"][:, 6:8] / 2.0 - estimate)).clamp(-0.3, 0.3)
        torch.testing.assert_close(out[-1][0], expected, atol=1e-5, rtol=0)
        state = tuple(out)
    assert out[0].abs().sum() > 0  # the memory moved


def test_bad_requests_are_one_line(go2_run):
    from rlcore.config.cli import UserError
    from rlcore.export import _command_integral_module
    from rlcore_tasks.go2.command_integral import command_integral_policy

    with pytest.raises(UserError, match="use format=onnx"):
        _command_integral_module(go2_run["policy"], go2_run["env"], {
            "format": "jit", "command_integral_gain": 2.0, "command_integral_limit": 0.3})
    layout = [{"name": "joint_pos", "input_start": 0, "input_stop": 12, "scale": 1.0}]
    with pytest.raises(ConfigError, match="no 'velocity_commands' term; its terms: joint_pos"):
        command_integral_policy(go2_run["policy"], layout, 2.0, 2.0, 0.02, 0.3)
    with pytest.raises(ConfigError, match="must be > 0"):
        command_integral_policy(go2_run["policy"], layout, 2.0, 2.0, 0.02, 0.0)
    blind = torch.nn.Linear(2, 2)  # no estimator
    with pytest.raises(ConfigError, match="needs an actor with a base_lin_vel estimator"):
        command_integral_policy(blind, layout, 2.0, 2.0, 0.02, 0.3)
    seeing = torch.nn.Linear(2, 2)
    seeing.obs_groups_2d = ["height_scan"]  # a CNNModel's image input: the graph has more than obs
    with pytest.raises(ConfigError, match="reads images"):
        command_integral_policy(seeing, layout, 2.0, 2.0, 0.02, 0.3)


def test_export_writes_u_as_a_recurrent_state_that_onnxruntime_and_the_robustness_tool_carry(go2_run, tmp_path):
    import onnxruntime as ort

    from rlcore.deployment import read_onnx_interface
    from rlcore.export import export
    from rlcore.robustness import evaluate

    path = tmp_path / "integral.onnx"
    meta = export({"checkpoint": go2_run["dir"], "output": str(path), "num_envs": 2, "verify_steps": 8,
                   "command_integral_gain": 3.0})
    assert meta["verification"]["max_abs_diff"] <= 1e-5 and meta["recurrent"]
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["obs", "u_in"]
    assert [o.name for o in session.get_outputs()] == ["actions", "u_out"]
    interface = read_onnx_interface(str(path))
    assert interface["recurrent_state"] == [{"input": "u_in", "output": "u_out", "shape": [1, "batch", 3],
                                             "role": "command_integral", "initial": 0.0, "reset": "episode_start"}]
    assert interface["command_integral"]["axes"] == ["lin_vel_x", "lin_vel_y", "ang_vel_yaw"]  # the task's yaw axis
    assert interface["command_integral"]["gain"] == 3.0 and interface["command_integral"]["state"] == "u_in"
    # onnxruntime over a few steps equals the torch module, u fed back
    module = integral_module(go2_run, gain=3.0, limit=0.15, band=0.2, yaw_gain=2.0, yaw_limit=0.5,
                             yaw_band=0.5)  # the file: gain 3, the task's limit, band and yaw axis
    groups = go2_run["env"].get_observations()
    obs = torch.cat([groups[g] for g in go2_run["policy"].obs_groups_1d], dim=-1).numpy()  # [4, 270], the task's
    u_onnx, u_torch = np.zeros((1, 4, 3), np.float32), torch.zeros(1, 4, 3)
    for _ in range(4):
        a_onnx, u_onnx = session.run(None, {"obs": obs, "u_in": u_onnx})
        a_torch, u_torch = module(torch.from_numpy(obs), u_torch)
        np.testing.assert_allclose(a_onnx, a_torch.detach().numpy(), atol=1e-5)
    assert np.abs(u_onnx).max() > 0  # the state moved
    plain = tmp_path / "plain.onnx"
    export({"checkpoint": go2_run["dir"], "output": str(plain), "num_envs": 2, "verify_steps": 4,
            "command_integral_gain": 0})
    assert [i.name for i in ort.InferenceSession(str(plain)).get_inputs()] == ["obs"]  # gain 0: the policy alone
    out = []
    result = evaluate(str(path), ["nominal"], commands=[("vx_0.5", (0.5, 0.0, 0.0))], settle_s=0.1, measure_s=0.2,
                      threads=1, table="none", out=out.append)
    assert len(result["cases"]) == 1 and out[-1].startswith("robustness: nominal_err=")
    assert json.loads(json.dumps(interface["command_integral"]))["limit"] == 0.15  # the task default limit


def test_play_drives_an_integral_file_with_its_checkpoint_and_alone(go2_run, tmp_path):
    """``play onnx=<integral file> checkpoint=<run>`` and ``play onnx=<file>`` both run it, its state fed back."""
    from rlcore.export import export
    from rlcore.play import play

    path = tmp_path / "integral.onnx"
    export({"checkpoint": go2_run["dir"], "output": str(path), "num_envs": 2, "verify_steps": 4,
            "command_integral_gain": 2.0})
    for args in ({"checkpoint": go2_run["dir"], "onnx": str(path)}, {"onnx": str(path)}):
        result = play({**args, "episodes": 1, "num_envs": 1, "max_steps": 30})
        assert set(result) >= {"returns", "lengths"}  # with the checkpoint it was refused before: input 'u_in'


def test_go2_exports_carry_the_tasks_loop_by_default(go2_run, tmp_path):
    """Without the key, ``rlcore.export`` and the policy.onnx written at the end of training both carry Go2's
    ``commands.integral_gain`` (2.0), ``integral_limit`` (0.15) and ``integral_band`` (0.2); a pendulum policy has no loop to carry."""
    from rlcore.deployment import read_onnx_interface
    from rlcore.export import export
    from rlcore_tasks.go2.command_integral import integral_for, integral_from_interface

    default = tmp_path / "default.onnx"
    export({"checkpoint": go2_run["dir"], "output": str(default), "num_envs": 2, "verify_steps": 4})
    trained = read_onnx_interface(str(Path(go2_run["dir"]) / "policy.onnx"))
    for meta in (read_onnx_interface(str(default)), trained):
        assert meta["command_integral"]["gain"] == 2.0 and meta["command_integral"]["limit"] == 0.15
        assert meta["command_integral"]["band"] == 0.2
        assert integral_from_interface(go2_run["policy"], meta).band == 0.2  # the file's law, rebuilt in torch
        assert [i["name"] for i in meta["inputs"]] == ["obs", "u_in"]
    older = {**trained, "command_integral": {k: v for k, v in trained["command_integral"].items() if k != "band"}}
    assert integral_from_interface(go2_run["policy"], older).band == 0.0  # a file written before the band: none

    class Pendulum:  # a task without command_integral() / a velocity command
        step_dt = 0.05

    assert integral_for(go2_run["policy"], Pendulum()) is None
    with pytest.raises(ConfigError, match="does not describe its observation terms"):
        integral_for(go2_run["policy"], Pendulum(), gain=2.0)  # asked for explicitly: refused in one line
