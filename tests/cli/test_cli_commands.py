"""The commands of the README as subprocesses on the pendulum with tiny settings:
train -> checkpoint -> resume -> play (with video) -> export (ONNX, TorchScript) -> play the ONNX file,
and the in-process training paths for distillation and extensions."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch
from cli_helpers import REPO_ROOT, TINY, check_ok, episode_returns, run_module

pytestmark = pytest.mark.slow  # most tests use the CLI-trained run or start the CLI in a subprocess


# ---------------------------------------------------------------------------- train -> checkpoint -> resume
def test_train_writes_a_run_directory(trained_run):
    run = trained_run["dir"]
    assert (run / ".hydra" / "config.yaml").is_file()
    from omegaconf import OmegaConf

    resolved = OmegaConf.load(run / "config.yaml")  # resolved and checked: no interpolations, defaults filled
    assert resolved.runner.experiment_name == "pendulum" and resolved.seed == 5
    assert resolved.algorithm.clip_param == 0.2 and resolved.model.actor.hidden_dims == [16, 16]
    assert (run / "model_0.pt").is_file() and (run / "model_1.pt").is_file()  # iterations 0 and 1, as in rsl_rl
    assert (run / "policy.onnx").is_file()
    ckpt = torch.load(run / "model_1.pt", weights_only=True)
    assert ckpt["iter"] == 1
    assert ckpt["train_cfg"]["task"] == {"name": "pendulum", "num_envs": 8,
                                         "env": {"max_episode_length": 200, "hide_velocity": False}}
    assert ckpt["train_cfg"]["seed"] == 5 and ckpt["train_cfg"]["actor"]["hidden_dims"] == [16, 16]
    assert "run directory" in trained_run["proc"].stdout


def test_resume_continues_the_iteration_count(trained_run, tmp_path):
    run2 = tmp_path / "resumed"
    # runner.max_iterations is the run's total: the 2-iteration run trains its third and last
    proc = check_ok(run_module("rlcore.train", "task=pendulum", *TINY, "seed=5", "runner.max_iterations=3",
                               f"resume={trained_run['dir']}", f"hydra.run.dir={run2}"))
    assert (f"resuming {trained_run['dir']} after iteration 2: training iterations 3..3 of runner.max_iterations=3"
            in proc.stdout)
    assert (run2 / "model_2.pt").is_file() and not (run2 / "model_0.pt").exists()
    assert torch.load(run2 / "model_2.pt", weights_only=True)["iter"] == 2


# ---------------------------------------------------------------------------- play, export, ONNX parity
@pytest.fixture(scope="module")
def played(trained_run):
    """``rlcore.play`` with the torch policy and a small video."""
    proc = check_ok(run_module("rlcore.play", f"checkpoint={trained_run['dir']}", "episodes=2", "video=true",
                               "video_width=64", "video_height=48"))
    return proc


def test_play_prints_returns_and_metrics(played):
    returns = episode_returns(played.stdout)
    assert len(returns) == 2 and all(np.isfinite(returns))
    assert "mean return" in played.stdout
    # The task's extras["log"] metrics, named as the training logs name them (no leading '/').
    assert re.search(r"^\s+episode_return_mean\s+-?\d", played.stdout, re.M)
    assert not re.search(r"^\s+/", played.stdout, re.M)
    assert "policy=torch MLPModel" in played.stdout


def test_play_writes_an_mp4(played, trained_run):
    from rlcore.logging.video import read_mp4

    path = trained_run["dir"] / "videos" / "model_1.mp4"
    assert path.is_file(), played.stdout
    frames = read_mp4(path)
    assert frames.shape == (201, 48, 64, 3)  # the first frame + one per step of two 200-step episodes run in parallel
    assert frames.std() > 1.0  # a drawing, not a blank image


@pytest.fixture(scope="module")
def exported(trained_run, tmp_path_factory):
    out = tmp_path_factory.mktemp("export") / "policy.onnx"
    proc = check_ok(run_module("rlcore.export", f"checkpoint={trained_run['dir'] / 'model_1.pt'}", "format=onnx",
                               f"output={out}", "num_envs=4", "verify_steps=16"))
    return {"path": out, "proc": proc}


def test_export_onnx_writes_the_policy_and_its_description(exported, trained_run):
    meta = json.loads(exported["path"].with_suffix(".json").read_text())
    assert meta["format"] == "onnx" and meta["task"] == "pendulum" and meta["iteration"] == 1
    assert meta["inputs"] == [{"name": "obs", "dtype": "float32", "shape": ["batch", 3],
                               "groups": [{"name": "policy", "size": 3}]}]
    assert meta["outputs"] == [{"name": "actions", "dtype": "float32", "shape": ["batch", 1]}]
    assert meta["obs_groups"]["actor"] == ["policy"] and meta["obs_set"] == "actor"
    ckpt = torch.load(trained_run["dir"] / "model_1.pt", weights_only=True)
    mean = ckpt["actor_state_dict"]["obs_normalizer._mean"].flatten().tolist()
    assert meta["normalizer"]["mean"] == pytest.approx(mean) and len(meta["normalizer"]["std"]) == 3
    assert meta["verification"]["passed"] and meta["verification"]["max_abs_diff"] <= 1e-5
    assert "verified on 16 recorded steps" in exported["proc"].stdout


def test_exported_onnx_matches_the_eager_policy(exported, trained_run):
    """onnxruntime on the written file vs the checkpoint's torch actor, on fresh random observations."""
    import onnxruntime as ort
    from tensordict import TensorDict

    from rlcore.checkpoint.run_files import load_run, make_run_env, make_run_policy

    info = load_run(str(trained_run["dir"]))
    env = make_run_env(info, 4, "cpu", 0)
    policy = make_run_policy(info, env, "cpu")
    obs = TensorDict({"policy": 3.0 * torch.randn(64, 3), "critic": torch.randn(64, 3)}, batch_size=[64])
    with torch.inference_mode():
        eager = policy(obs).numpy()
    session = ort.InferenceSession(str(exported["path"]), providers=["CPUExecutionProvider"])
    (onnx_actions,) = session.run(None, {"obs": obs["policy"].numpy()})
    np.testing.assert_allclose(onnx_actions, eager, rtol=0, atol=1e-5)


def test_play_runs_the_onnx_policy_like_the_torch_policy(exported, played, trained_run):
    proc = check_ok(run_module("rlcore.play", f"checkpoint={trained_run['dir']}", "episodes=2",
                               f"onnx={exported['path']}"))
    assert f"policy=onnx {exported['path']}" in proc.stdout
    np.testing.assert_allclose(episode_returns(proc.stdout), episode_returns(played.stdout), rtol=0, atol=1e-2)


def test_export_jit(trained_run, tmp_path, capsys):
    from rlcore import export as export_cli

    out = tmp_path / "policy.pt"
    export_cli.main([f"checkpoint={trained_run['dir']}", "format=jit", f"output={out}", "num_envs=2",
                     "verify_steps=8"])
    assert "max |jit - eager|" in capsys.readouterr().out
    module = torch.jit.load(str(out))
    assert module(torch.zeros(5, 3)).shape == (5, 1)
    assert json.loads(out.with_suffix(".json").read_text())["format"] == "jit"


def test_export_called_with_the_config_defaults_writes_onnx(trained_run, tmp_path):
    """``export()`` with ``dataclasses.asdict(ExportCfg())`` (format is then an ExportFormat member, not a string)
    writes an ONNX file, not TorchScript under an .onnx name; an unknown format is one clear error."""
    import dataclasses

    import onnx

    from rlcore.config.cli import UserError
    from rlcore.config.schema import ExportCfg
    from rlcore.export import export

    args = {**dataclasses.asdict(ExportCfg()), "checkpoint": str(trained_run["dir"]), "num_envs": 2,
            "verify_steps": 4, "output": str(tmp_path / "p.onnx")}
    meta = export(args)
    assert meta["format"] == "onnx"
    assert onnx.load(str(tmp_path / "p.onnx")).graph.input[0].name == "obs"
    with pytest.raises(UserError, match=r"export: format: Invalid value .tflite., expected one of \[onnx, jit\]"):
        export({**args, "format": "tflite"})
    # from Python the keys left out take their defaults (format onnx, rtol 0, ...); a misspelt one is named
    meta = export({"checkpoint": str(trained_run["dir"]), "num_envs": 2, "verify_steps": 4,
                   "output": str(tmp_path / "q.onnx")})
    assert meta["format"] == "onnx" and meta["verification"]["rtol"] == 0.0
    assert onnx.load(str(tmp_path / "q.onnx")).graph.input[0].name == "obs"
    with pytest.raises(UserError, match="export: unknown key 'verfiy_steps'; valid keys: checkpoint, format"):
        export({"checkpoint": str(trained_run["dir"]), "verfiy_steps": 4})


def test_play_from_python_fills_the_keys_left_out(trained_run):
    from rlcore.config.cli import UserError
    from rlcore.play import play

    result = play({"checkpoint": str(trained_run["dir"]), "episodes": 2, "num_envs": 2})
    assert len(result["returns"]) == 2 and len(result["lengths"]) == 2
    with pytest.raises(UserError, match="play: unknown key 'epsiodes'"):
        play({"checkpoint": str(trained_run["dir"]), "epsiodes": 2})


def test_export_verification_fails_loudly(trained_run, tmp_path, monkeypatch, capsys):
    """A written file that does not reproduce the eager policy: exit 1, the file renamed .unverified, no JSON."""
    import rlcore.deployment as export_utils
    from rlcore import export as export_cli

    original = export_utils.export_onnx

    def corrupt(module, path, *args, **kwargs):
        with torch.no_grad():
            next(module.parameters()).add_(1e-2)
        return original(module, path, *args, **kwargs)

    monkeypatch.setattr(export_utils, "export_onnx", corrupt)
    out = tmp_path / "bad.onnx"
    with pytest.raises(SystemExit) as stop:
        export_cli.main([f"checkpoint={trained_run['dir']}", f"output={out}", "num_envs=2", "verify_steps=4"])
    assert stop.value.code == 1
    err = capsys.readouterr().err
    assert "does not reproduce the eager policy" in err and "> atol 1e-05" in err
    assert not out.exists() and (tmp_path / "bad.onnx.unverified").exists()
    assert not (tmp_path / "bad.json").exists()


# ---------------------------------------------------------------------------- distillation and extensions
def _train_in_process(overrides: list[str], log_dir) -> None:
    from rlcore.config.cli import compose
    from rlcore.train import run

    run(compose(overrides), log_dir=str(log_dir))


def test_distillation_from_the_teacher_checkpoint(trained_run, tmp_path, capsys):
    _train_in_process(["task=pendulum", "algorithm=distillation", "model=rnn", f"teacher={trained_run['dir']}",
                       *TINY[:6], "model.actor.rnn_hidden_dim=8", "model.critic.rnn_hidden_dim=8"], tmp_path)
    out = capsys.readouterr().out
    assert "teacher loaded from" in out and "ignoring PPO-only settings" in out
    ckpt = torch.load(tmp_path / "model_1.pt", weights_only=True)
    assert ckpt["train_cfg"]["student"]["class_name"] == "RNNModel"
    assert ckpt["train_cfg"]["teacher"]["class_name"] == "MLPModel"
    teacher = torch.load(trained_run["dir"] / "model_1.pt", weights_only=True)["actor_state_dict"]
    torch.testing.assert_close(ckpt["teacher_state_dict"]["mlp.0.weight"], teacher["mlp.0.weight"])
    # the student is the deployed policy
    from rlcore.config.cli import parse_key_values
    from rlcore.config.schema import PlayCfg
    from rlcore.play import play

    result = play(parse_key_values([f"checkpoint={tmp_path}", "episodes=1"], PlayCfg, "play"))
    assert "policy=torch RNNModel" in capsys.readouterr().out and len(result["returns"]) == 1


def _last_checkpoint(run_dir) -> dict:
    """The checkpoint with the highest iteration number in ``run_dir``."""
    paths = sorted(run_dir.glob("model_*.pt"), key=lambda p: int(p.stem.split("_")[1]))
    assert paths, f"no checkpoint in {run_dir}"
    return torch.load(paths[-1], weights_only=True)


def test_rnd_and_symmetry_extensions(tmp_path, monkeypatch):
    """The config reaches the algorithm: each stored reward is the env's plus RND's bonus, and the task's mirror
    function augments every PPO mini-batch (spies on PPO.process_env_step and on cartpole_mirror)."""
    import rlcore_tasks.classic.symmetry as classic_symmetry
    from rlcore.algorithms import PPO

    steps, mirror_calls = [], []
    process_env_step = PPO.process_env_step

    def spy_step(self, obs, rewards, dones, extras):
        row = self.storage.step
        process_env_step(self, obs, rewards, dones, extras)
        with torch.no_grad():
            bonus = self.rnd.weight * self.rnd.step_dt * self.rnd.prediction_error(obs)
        steps.append((rewards.clone(), bonus, extras["time_outs"].clone(), self.storage.rewards[row, :, 0].clone()))

    mirror = classic_symmetry.cartpole_mirror

    def spy_mirror(env=None, obs=None, actions=None):
        mirror_calls.append((None if obs is None else obs.batch_size[0], None if actions is None else len(actions)))
        return mirror(env=env, obs=obs, actions=actions)

    monkeypatch.setattr(PPO, "process_env_step", spy_step)
    monkeypatch.setattr(classic_symmetry, "cartpole_mirror", spy_mirror)
    _train_in_process(["task=cartpole", "extension=[rnd,symmetry]", *TINY, "extension.rnd.num_outputs=8",
                       "extension.rnd.predictor_hidden_dims=[8]", "extension.rnd.target_hidden_dims=[8]",
                       "algorithm.reward_normalization=false"], tmp_path)  # the env's rewards stored as they are

    assert len(steps) == 2 * 8  # 2 iterations of 8 steps
    for rewards, bonus, time_outs, stored in steps:
        assert bonus.min() > 0
        keep = ~time_outs  # time-outs also add the bootstrap
        torch.testing.assert_close(stored[keep], (rewards + bonus)[keep], rtol=1e-5, atol=1e-6)
    # data augmentation: one call per mini-batch (2 iterations x 2 mini-batches) with 8 * 8 / 2 samples
    assert mirror_calls == [(32, 32)] * 4
    ckpt = _last_checkpoint(tmp_path)
    alg = ckpt["train_cfg"]["algorithm"]
    assert alg["rnd_cfg"]["num_outputs"] == 8
    assert alg["symmetry_cfg"]["data_augmentation_func"] == "rlcore_tasks.classic.symmetry:cartpole_mirror"
    assert int(ckpt["rnd_state_dict"]["step_count"]) == 2 * 8  # the saved RND saw every env step


# ---------------------------------------------------------------------------- console scripts
def test_console_scripts_point_at_the_entry_points():
    import importlib

    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    scripts = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert set(scripts) == {"rlcore-train", "rlcore-play", "rlcore-export", "rlcore-robustness", "rlcore-report"}
    for target in scripts.values():
        module, func = target.split(":")
        assert callable(getattr(importlib.import_module(module), func))


def test_help_lists_the_keys(capsys):
    from rlcore import export as export_cli
    from rlcore import play as play_cli

    play_cli.main(["--help"])
    export_cli.main(["-h"])
    out = capsys.readouterr().out
    assert "checkpoint" in out and "video" in out and "onnx" in out and "format" in out and "atol" in out


def test_python_arguments_are_type_checked_as_the_command_line_is():
    """complete_args (export(...) / play(...) from Python) merges over the typed schema like parse_key_values: the
    same wrong value gets the same one-line error on both paths; numbers given as strings convert as on the CLI."""
    from rlcore.config.cli import UserError, complete_args, parse_key_values
    from rlcore.config.schema import ExportCfg, ExportFormat

    for bad, match in (({"num_envs": "eight"}, "export: num_envs: Value 'eight' of type 'str' could not be converted"),
                       ({"format": "tflite"}, r"export: format: Invalid value 'tflite', expected one of \[onnx, jit\]")):
        (key, value), = bad.items()
        with pytest.raises(UserError, match=match):
            complete_args({"checkpoint": "run", **bad}, ExportCfg, "export")
        with pytest.raises(UserError, match=match):
            parse_key_values(["checkpoint=run", f"{key}={value}"], ExportCfg, "export")
    args = complete_args({"checkpoint": "run", "num_envs": "3", "format": ExportFormat.jit}, ExportCfg, "export")
    assert args["num_envs"] == 3 and args["format"] == "jit" and args["verify_steps"] == 32
