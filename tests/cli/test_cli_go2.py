"""The commands of the README end-to-end on the Unitree Go2 MuJoCo tasks, as subprocesses with tiny settings:

- task=go2: train -> checkpoint -> play (MP4 video) -> export ONNX -> play the ONNX file;
- task=go2_rough (CNNModel, the 2D height_scan group): train -> export ONNX -> play the ONNX file;
- task=go2 model=rnn: train -> export ONNX (recurrent state in and out), parity with the eager policy;
- task=go2 extension=[symmetry] (in-process, with a spy on the task's go2_mirror);
- bad Go2 settings: one ``error:`` line naming the key path, exit status 2, no run directory left.

Every command runs 8 envs x 8 steps, 1-2 iterations, [32, 32] networks, one MuJoCo thread
(``+task.env.sim.threads=1``, which play and export inherit from the run's config).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest
import torch
from cli_helpers import assert_user_error, check_ok, run_module

pytestmark = pytest.mark.slow  # every test trains Go2 through the CLI or uses that run

pytest.importorskip("mujoco")

#: Steps of the short play runs: no Go2 episode ends this early from a fresh reset, so a video has STEPS + 1 frames.
STEPS = 10


def go2_args(task: str = "go2", iterations: int = 2, *extra: str) -> list[str]:
    """Tiny training settings for a Go2 task (each key given once: Hydra refuses a key given twice)."""
    return [f"task={task}", "task.num_envs=8", "runner.num_steps_per_env=8", f"runner.max_iterations={iterations}",
            "runner.save_interval=1", "logger=none", "model.actor.hidden_dims=[32,32]",
            "model.critic.hidden_dims=[32,32]", "algorithm.num_mini_batches=2", "algorithm.num_learning_epochs=1",
            "+task.env.sim.threads=1", "seed=3", *extra]


def train(tmp_path_factory, name: str, *args: str):
    run_dir = tmp_path_factory.mktemp("go2") / name
    proc = check_ok(run_module("rlcore.train", *args, f"hydra.run.dir={run_dir}"))
    return run_dir, proc


def export_onnx(run_dir, *extra: str) -> tuple[dict, object]:
    """``rlcore.export format=onnx`` into ``<run>/exported/``; returns the JSON description and the process."""
    proc = check_ok(run_module("rlcore.export", f"checkpoint={run_dir}", "format=onnx", "num_envs=2",
                               "verify_steps=8", *extra))
    assert (run_dir / "exported" / "policy.onnx").is_file()
    return json.loads((run_dir / "exported" / "policy.json").read_text()), proc


def partial_return(stdout: str) -> float:
    """The mean partial return ``rlcore.play`` prints when no episode finished within max_steps."""
    match = re.search(r"no episode finished within (\d+) steps \(max_steps\); mean partial return (\S+)", stdout)
    assert match, stdout
    assert int(match.group(1)) == STEPS
    return float(match.group(2))


# ---------------------------------------------------------------------------- task=go2: train, play, video, export
@pytest.fixture(scope="module")
def go2_run(tmp_path_factory):
    run_dir, proc = train(tmp_path_factory, "flat", *go2_args())
    return {"dir": run_dir, "proc": proc}


def test_train_go2_console_leads_with_the_tracking_error(go2_run):
    """task=go2's headline (runner.headline_metric=lin_vel_error) opens each iteration's first line (issue 52 item 15)."""
    first = next(line for line in go2_run["proc"].stdout.splitlines() if line.startswith("it 1/"))
    assert re.match(r"^it 1/2  lin_vel_error_now \d", first), first


def test_train_go2_writes_a_run_directory(go2_run):
    run = go2_run["dir"]
    assert (run / ".hydra" / "config.yaml").is_file() and (run / "config.yaml").is_file()
    assert (run / "model_0.pt").is_file() and (run / "model_1.pt").is_file() and (run / "policy.onnx").is_file()
    assert "it 2/2" in go2_run["proc"].stdout
    ckpt = torch.load(run / "model_1.pt", weights_only=True)
    assert ckpt["iter"] == 1
    task = ckpt["train_cfg"]["task"]
    assert task["name"] == "go2" and task["num_envs"] == 8
    assert task["env"]["sim"] == {"backend": "rollout", "threads": 1} and task["env"]["commands"]["lin_vel_y"] == [-0.5, 0.5]
    assert ckpt["train_cfg"]["actor"]["hidden_dims"] == [32, 32]
    # the default Go2 actor: blind, with its last 5 frames and a base-velocity estimator; a student set for distillation
    assert ckpt["train_cfg"]["obs_groups"] == {"actor": ["policy", "policy_history"],
                                               "critic": ["policy", "privileged"], "student": ["policy"]}
    assert ckpt["train_cfg"]["actor"]["estimator_cfg"]["target_groups"] == ["base_lin_vel"]
    assert ckpt["actor_state_dict"]["estimator.0.weight"].shape == (128, 5 * 45 + 45)
    assert ckpt["env_state"]["task"] == "Go2Env" and ckpt["env_state"]["num_envs"] == 8
    from rlcore.deployment import read_onnx_interface  # the policy.onnx that training writes carries its interface

    onnx_meta = read_onnx_interface(run / "policy.onnx")
    assert onnx_meta["task"] == "go2" and onnx_meta["kp"] == [30.0] * 12 and onnx_meta["decimation"] == 4


def _offscreen_rendering_works() -> bool:
    """Whether MuJoCo can open an offscreen GL context here (EGL or OSMesa system libraries present)."""
    probe = ("import rlcore_tasks.go2, mujoco; "
             "mujoco.Renderer(mujoco.MjModel.from_xml_string('<mujoco><worldbody/></mujoco>'), 8, 8).render()")
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=120).returncode == 0


RENDERS = _offscreen_rendering_works()


@pytest.fixture(scope="module")
def go2_played(go2_run):
    """``rlcore.play`` of the torch policy with a small video of env 0 (when this machine can render)."""
    video = ["video=true", "video_width=64", "video_height=48"] if RENDERS else []
    return check_ok(run_module("rlcore.play", f"checkpoint={go2_run['dir']}", "episodes=1", f"max_steps={STEPS}",
                               *video))


@pytest.mark.skipif(not RENDERS, reason="no offscreen GL here (install libegl1 or libosmesa6; see README)")
def test_play_go2_writes_an_mp4(go2_played, go2_run):
    from rlcore.logging.video import read_mp4

    out = go2_played.stdout
    assert "task=go2" in out and "policy=torch MLPModel" in out and "1 env(s)" in out
    assert np.isfinite(partial_return(out))
    # the task's extras["log"] metrics, named as the logs name them (no leading '/')
    assert re.search(r"^\s+metrics/lin_vel_error_now\s+\d", out, re.M)
    path = go2_run["dir"] / "videos" / "model_1.mp4"
    assert f"video: {path} ({STEPS + 1} frames, 50 fps)" in out  # 50 Hz control
    frames = read_mp4(path)
    assert frames.shape == (STEPS + 1, 48, 64, 3)  # the first frame + one per step
    assert frames.max() > 0 and frames.std() > 1.0  # a rendered scene, not a blank image


@pytest.fixture(scope="module")
def go2_exported(go2_run):
    # the policy alone (command_integral_gain=0): its ONNX actions are the torch policy's; the default Go2 export adds
    # the integral loop on the command, tested in tests/models/test_command_integral_graph.py
    meta, proc = export_onnx(go2_run["dir"], "command_integral_gain=0")
    return {"meta": meta, "proc": proc, "path": go2_run["dir"] / "exported" / "policy.onnx"}


def test_export_go2_onnx_is_verified(go2_exported):
    meta = go2_exported["meta"]
    assert meta["task"] == "go2" and meta["model"] == "MLPModel" and meta["iteration"] == 1
    assert meta["inputs"] == [{"name": "obs", "dtype": "float32", "shape": ["batch", 270],
                               "groups": [{"name": "policy", "size": 45}, {"name": "policy_history", "size": 225}]}]
    assert meta["outputs"] == [{"name": "actions", "dtype": "float32", "shape": ["batch", 12]}]
    assert meta["control_period_s"] == pytest.approx(0.02)
    assert len(meta["normalizer"]["mean"]) == 270
    assert meta["verification"]["passed"] and meta["verification"]["max_abs_diff"] <= 1e-5
    assert "verified on 8 recorded steps x 2 envs" in go2_exported["proc"].stdout
    # the interface inside the file, from conf/task/go2.yaml (kp 30, vy range +-0.5) and the task's defaults
    from rlcore.deployment import read_onnx_interface

    onnx_meta = read_onnx_interface(go2_exported["path"])
    assert onnx_meta["task"] == "go2" and onnx_meta["obs_groups"] == ["policy", "policy_history"]
    assert onnx_meta["recurrent_state"] == []
    assert onnx_meta["kp"] == [30.0] * 12 and onnx_meta["commands"]["ranges"]["lin_vel_y"] == [-0.5, 0.5]
    assert onnx_meta["control_dt"] == pytest.approx(0.02) and onnx_meta["obs_layout"][-1]["input_stop"] == 270


def test_play_go2_onnx_like_the_torch_policy(go2_exported, go2_played, go2_run):
    proc = check_ok(run_module("rlcore.play", f"checkpoint={go2_run['dir']}", "episodes=1", f"max_steps={STEPS}",
                               f"onnx={go2_exported['path']}"))
    assert f"policy=onnx {go2_exported['path']}" in proc.stdout
    assert partial_return(proc.stdout) == pytest.approx(partial_return(go2_played.stdout), abs=1e-3)


# ---------------------------------------------------------------------------- task=go2_rough: CNN over height_scan
@pytest.fixture(scope="module")
def rough_run(tmp_path_factory):
    run_dir, proc = train(tmp_path_factory, "rough", *go2_args("go2_rough", 1, "model.actor.cnn_cfg.output_channels=[4,8]"))
    return {"dir": run_dir, "proc": proc}


def test_go2_rough_trains_and_exports_the_height_scan_input(rough_run):
    run = rough_run["dir"]
    ckpt = torch.load(run / "model_0.pt", weights_only=True)
    assert ckpt["train_cfg"]["actor"]["class_name"] == "CNNModel"
    assert ckpt["train_cfg"]["obs_groups"]["actor"] == ["policy", "policy_history", "height_scan"]
    # the critic reads the scan's values directly: no conv weight in its state, the 11 x 17 cells in its first layer
    assert ckpt["train_cfg"]["critic"]["cnn_cfg"]["output_channels"] == []
    critic_state = ckpt["critic_state_dict"]
    assert not any(k.startswith("cnns.") for k in critic_state)
    one_d = critic_state["obs_normalizer._mean"].shape[-1]  # the critic's normalised 1D groups
    assert critic_state["mlp.0.weight"].shape[1] == one_d + 11 * 17
    assert ckpt["train_cfg"]["task"]["env"]["terrain"] == {"type": "rough"}
    meta, _ = export_onnx(run)
    assert meta["task"] == "go2_rough" and meta["model"] == "CNNModel"
    assert meta["inputs"] == [
        {"name": "obs", "dtype": "float32", "shape": ["batch", 270],
         "groups": [{"name": "policy", "size": 45}, {"name": "policy_history", "size": 225}]},
        {"name": "height_scan", "dtype": "float32", "shape": ["batch", 1, 11, 17],
         "groups": [{"name": "height_scan", "shape": [1, 11, 17]}]},
    ]
    assert meta["verification"]["passed"] and meta["verification"]["max_abs_diff"] <= 1e-5
    # the exported file, height scan and all, drives the task through onnxruntime
    onnx = run / "exported" / "policy.onnx"
    proc = check_ok(run_module("rlcore.play", f"checkpoint={run}", "episodes=1", f"max_steps={STEPS}", f"onnx={onnx}"))
    assert f"policy=onnx {onnx}" in proc.stdout and np.isfinite(partial_return(proc.stdout))
    assert re.search(r"^\s+terrain_level\s+\d", proc.stdout, re.M)


# ---------------------------------------------------------------------------- task=go2 model=rnn
def test_go2_rnn_exports_with_parity(tmp_path_factory):
    # an LSTM over `policy` alone (its memory instead of the default 5-frame history), with the default estimator:
    # by default its file carries the task's integral loop after the memory (u_in), verified against its torch twin
    run, _ = train(tmp_path_factory, "rnn", *go2_args("go2", 1, "model=rnn", "model.actor.rnn_hidden_dim=16",
                                                     "model.critic.rnn_hidden_dim=16", "task.obs_groups.actor=[policy]"))
    meta, _ = export_onnx(run)
    assert [i["name"] for i in meta["inputs"]] == ["obs", "h_in", "c_in", "u_in"]
    assert meta["verification"]["passed"] and meta["verification"]["max_abs_diff"] <= 1e-5
    meta, _ = export_onnx(run, "command_integral_gain=0")  # the LSTM policy alone
    assert meta["model"] == "RNNModel" and meta["recurrent"]
    assert [i["name"] for i in meta["inputs"]] == ["obs", "h_in", "c_in"]
    assert [o["name"] for o in meta["outputs"]] == ["actions", "h_out", "c_out"]
    assert meta["inputs"][1]["shape"] == [1, "batch", 16]
    from rlcore.deployment import read_onnx_interface

    onnx_meta = read_onnx_interface(run / "exported" / "policy.onnx")
    assert onnx_meta["rnn_type"] == "lstm" and onnx_meta["recurrent_state"] == [
        {"input": "h_in", "output": "h_out", "shape": [1, "batch", 16], "role": "rnn_hidden", "initial": 0.0,
         "reset": "episode_start"},
        {"input": "c_in", "output": "c_out", "shape": [1, "batch", 16], "role": "rnn_cell", "initial": 0.0,
         "reset": "episode_start"}]
    assert meta["verification"]["passed"] and meta["verification"]["max_abs_diff"] <= 1e-5

    # independently: onnxruntime with the state fed back vs the eager LSTM policy over a sequence
    import onnxruntime as ort
    from tensordict import TensorDict

    from rlcore.checkpoint.run_files import load_run, make_run_env, make_run_policy

    info = load_run(str(run))
    env = make_run_env(info, 2, "cpu", 0)
    policy = make_run_policy(info, env, "cpu")
    env.close()
    session = ort.InferenceSession(str(run / "exported" / "policy.onnx"), providers=["CPUExecutionProvider"])
    gen = torch.Generator().manual_seed(0)
    h = c = np.zeros((1, 5, 16), dtype=np.float32)
    policy.reset()
    outputs = []
    for _ in range(6):
        obs = TensorDict({"policy": torch.randn(5, 45, generator=gen), "privileged": torch.randn(5, 12, generator=gen),
                          "base_lin_vel": torch.randn(5, 3, generator=gen)}, batch_size=[5])
        with torch.inference_mode():
            eager = policy(obs).numpy()
        actions, h, c = session.run(None, {"obs": obs["policy"].numpy(), "h_in": h, "c_in": c})
        np.testing.assert_allclose(actions, eager, rtol=0, atol=1e-5)
        outputs.append(actions)
    assert np.abs(outputs[-1] - outputs[0]).max() > 0  # the state and inputs change the output


# ---------------------------------------------------------------------------- task=go2 extension=[symmetry]
def test_go2_symmetry_extension(tmp_path, monkeypatch):
    """``extension=[symmetry]`` with the mirror loss, trained in-process with a spy on the task's go2_mirror: the
    function augments every PPO mini-batch and mirrors both halves of the mirror loss, and the loss is reported."""
    import rlcore_tasks.go2.symmetry as go2_symmetry
    from rlcore.algorithms import PPO
    from rlcore.config.cli import compose
    from rlcore.train import run

    calls, losses = [], []
    mirror = go2_symmetry.go2_mirror

    def spy_mirror(env=None, obs=None, actions=None):
        calls.append((None if obs is None else obs.batch_size[0], None if actions is None else tuple(actions.shape)))
        return mirror(env=env, obs=obs, actions=actions)

    update = PPO.update

    def spy_update(self):
        losses.append(update(self))
        return losses[-1]

    monkeypatch.setattr(go2_symmetry, "go2_mirror", spy_mirror)
    monkeypatch.setattr(PPO, "update", spy_update)
    run(compose(go2_args("go2", 2, "extension=[symmetry]", "extension.symmetry.use_mirror_loss=true",
                         "extension.symmetry.mirror_loss_coeff=0.1")), log_dir=str(tmp_path))
    # per mini-batch of 8 * 8 / 2 = 32 samples: augmentation (obs and actions), then the mirror loss (obs, then
    # the actor's 12-d means); 2 iterations x 2 mini-batches
    assert calls == [(32, (32, 12)), (32, None), (None, (32, 12))] * 4
    assert len(losses) == 2 and all(ls["symmetry"] > 0 for ls in losses)
    paths = sorted(tmp_path.glob("model_*.pt"), key=lambda p: int(p.stem.split("_")[1]))
    sym = torch.load(paths[-1], weights_only=True)["train_cfg"]["algorithm"]["symmetry_cfg"]
    assert sym["data_augmentation_func"] == "rlcore_tasks.go2.symmetry:go2_mirror"
    assert sym["use_data_augmentation"] and sym["use_mirror_loss"]


# ---------------------------------------------------------------------------- bad Go2 settings
@pytest.mark.parametrize(("arg", "fragments"), [
    # not in go2.yaml: Hydra itself refuses it and says how to add a key
    ("task.env.rewards.weights.feet_air_tme=1.0", ["unknown config key 'task.env.rewards.weights.feet_air_tme'",
                                                   "+task.env.rewards.weights.feet_air_tme"]),
    # added with +: the task's own settings check refuses it with its key path and the valid names
    ("+task.env.rewards.weights.feet_air_tme=1.0", ["go2.rewards.weights", "'feet_air_tme'", "'feet_air_time'"]),
    ("+task.env.sim.dtt=1", ["go2.sim.dtt: unknown key", "'dt'"]),
])
def test_bad_go2_setting(arg, fragments, tmp_path):
    proc = run_module("rlcore.train", *go2_args("go2", 1, arg), f"hydra.run.dir={tmp_path / 'run'}")
    assert_user_error(proc, *fragments)
    assert not (tmp_path / "run").exists()  # a failed start leaves no run directory behind


def test_default_go2_distills_into_a_blind_student(go2_run, tmp_path_factory):
    """``task=go2 algorithm=distillation model=rnn teacher=<run>`` with the default config: the student reads only
    ``policy`` and carries the task's base-velocity estimator on its LSTM's output (trained by distillation, its loss
    logged), the teacher reads what it was trained on, and the student's policy.onnx carries the task's integral
    loop after its memory: inputs obs, h_in, c_in, u_in."""
    run_dir, proc = train(tmp_path_factory, "student", "task=go2", "algorithm=distillation", "model=rnn",
                       f"teacher={go2_run['dir']}", "task.num_envs=8", "runner.num_steps_per_env=8",
                       "runner.max_iterations=1", "runner.save_interval=1", "logger=none",
                       "model.actor.rnn_hidden_dim=8", "model.actor.hidden_dims=[16]", "+task.env.sim.threads=1",
                       "seed=3")
    ckpt = torch.load(run_dir / "model_0.pt", weights_only=True)
    cfg = ckpt["train_cfg"]
    assert cfg["obs_groups"]["student"] == ["policy"] and cfg["obs_groups"]["teacher"] == ["policy", "policy_history"]
    assert cfg["student"]["estimator_cfg"]["target_groups"] == ["base_lin_vel"]
    assert ckpt["student_state_dict"]["estimator.0.weight"].shape == (128, 8)  # reads the LSTM's 8 outputs
    assert cfg["teacher"]["estimator_cfg"]["target_groups"] == ["base_lin_vel"]
    assert re.search(r"estimator\s*[:=]?\s*\d", proc.stdout), proc.stdout[-2000:]
    from rlcore.deployment import read_onnx_interface

    meta = read_onnx_interface(run_dir / "policy.onnx")
    assert meta["obs_groups"] == ["policy"] and meta["inputs"][0] == {"name": "obs", "shape": ["batch", 45]}
    assert [i["name"] for i in meta["inputs"]] == ["obs", "h_in", "c_in", "u_in"]
    assert meta["command_integral"]["gain"] == 2.0 and meta["command_integral"]["limit"] == 0.15
