"""Bad input to the commands: one ``error:`` line naming the problem, exit status 2, no stack trace, and
(for train) nothing written — the checks run before the run directory exists."""

from __future__ import annotations

import pytest
import torch
from cli_helpers import TINY, assert_user_error, check_ok, run_module

from rlcore import export as export_cli
from rlcore import play as play_cli
from rlcore import train as train_cli

pytestmark = pytest.mark.slow  # most tests start the CLI in a subprocess or use the trained run


def _user_error(main, argv: list[str], capsys) -> str:
    """Run an entry point in-process; it must exit 2 with exactly one ``error:`` line on stderr."""
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


# ---------------------------------------------------------------------------- as the user sees it (subprocesses)
def test_unknown_option_lists_the_valid_choices(tmp_path):
    proc = run_module("rlcore.train", "model=transformer", f"hydra.run.dir={tmp_path / 'run'}")
    assert_user_error(proc, "unknown option model=transformer", "valid choices for model: cnn, mlp, rnn")
    assert not (tmp_path / "run").exists()


def test_type_error_names_the_key_path(tmp_path):
    proc = run_module("rlcore.train", "runner.max_iterations=abc", f"hydra.run.dir={tmp_path / 'run'}")
    assert_user_error(proc, "runner.max_iterations:", "'abc'", "Integer")
    assert not (tmp_path / "run").exists()


# ---------------------------------------------------------------------------- train (in-process: fails before Hydra)
@pytest.mark.parametrize(("argv", "fragments"), [
    (["extension=[curiosity]"], ["unknown option extension=curiosity", "rnd, symmetry"]),
    (["task=go3"], ["unknown option task=go3", "valid choices for task:", "pendulum"]),
    (["runner.bogus=1"], ["unknown config key 'runner.bogus'"]),
    (["model.actor.hidden_dims=[64,x]"], ["model.actor.hidden_dims[1]:"]),
    (["algorithm.learning_rate=fast"], ["algorithm.learning_rate:", "Float"]),
    (["model=rnn", "model.actor.rnn_type=gruu"], ["model.actor.rnn_type:", "expected one of [gru, lstm]"]),
    (["task.num_envs=0"], ["task.num_envs: must be >= 1"]),
    (["algorithm=distillation"], ["algorithm=distillation needs a trained teacher", "teacher=<path"]),
    (["algorithm=distillation", "extension=[rnd]", "teacher=whatever"],
     ["algorithm=distillation does not support extensions (rnd)"]),
    (["teacher=some/run"], ["only used by algorithm=distillation"]),
    (["extension=[symmetry]"], ["extension=symmetry needs a mirror function", "task=pendulum"]),
    (["resume=/no/such/run"], ["resume=/no/such/run", "does not exist"]),
    (["algorithm=distillation", "teacher=/no/such/ckpt.pt"], ["teacher=/no/such/ckpt.pt", "does not exist"]),
    (["device=tpu7"], ["device=tpu7"]),
    (["seed=[1"], ["cannot parse the argument 'seed=[1'"]),
    (["threads=0"], ["threads: must be >= 1, got 0"]),
    (["algorithm.learning_rate=-1"], ["algorithm.learning_rate: must be > 0, got -1.0"]),
    (["algorithm.gamma=1.5"], ["algorithm.gamma: must be in [0, 1], got 1.5"]),
    (["algorithm.lam=-0.1"], ["algorithm.lam: must be in [0, 1]"]),
    (["algorithm.clip_param=0"], ["algorithm.clip_param: must be > 0"]),
    (["algorithm.desired_kl=0"], ["algorithm.desired_kl: must be > 0"]),
    (["algorithm.max_grad_norm=-1"], ["algorithm.max_grad_norm: must be > 0"]),
    (["task=gym", "task.env.env_kwargs={g:5.0}"],
     ["unknown config key 'task.env.env_kwargs.g' in task.env.env_kwargs=", "write +task.env.env_kwargs="]),
])
def test_train_refuses(argv, fragments, capsys, tmp_path):
    line = _user_error(train_cli.main, [*argv, f"hydra.run.dir={tmp_path / 'run'}"], capsys)
    for fragment in fragments:
        assert fragment in line, line
    assert not (tmp_path / "run").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_cuda(capsys, tmp_path):
    line = _user_error(train_cli.main, ["device=cuda", f"hydra.run.dir={tmp_path}/run"], capsys)
    assert "device=cuda but CUDA is not available on this machine" in line
    line = _user_error(play_cli.main, ["checkpoint=x", "device=cuda:1"], capsys)
    assert "device=cuda:1 but CUDA is not available" in line


def test_resume_from_another_task(trained_run, capsys, tmp_path):
    line = _user_error(train_cli.main, ["task=cartpole", *TINY, f"resume={trained_run['dir']}",
                                        f"hydra.run.dir={tmp_path / 'run'}"], capsys)
    assert "was written for a different run" in line and "task: checkpoint 'pendulum' vs config 'cartpole'" in line
    assert not (tmp_path / "run").exists()


def test_resume_with_another_model(trained_run, capsys, tmp_path):
    line = _user_error(train_cli.main, ["task=pendulum", *TINY, "model=rnn", f"resume={trained_run['dir']}",
                                        f"hydra.run.dir={tmp_path / 'run'}"], capsys)
    assert "actor.class_name: checkpoint 'MLPModel' vs config 'RNNModel'" in line
    line = _user_error(train_cli.main, ["task=pendulum", *TINY, "model.actor.hidden_dims=[32,32]",
                                        f"resume={trained_run['dir']}", f"hydra.run.dir={tmp_path / 'run'}"], capsys)
    assert "actor.hidden_dims: checkpoint [16, 16] vs config [32, 32]" in line
    assert "critic" not in line


def test_teacher_from_another_task(trained_run, capsys, tmp_path):
    line = _user_error(train_cli.main, ["task=cartpole", "algorithm=distillation", f"teacher={trained_run['dir']}",
                                        f"hydra.run.dir={tmp_path / 'run'}"], capsys)
    assert "was trained on task=pendulum, this run is task=cartpole" in line


def test_a_file_that_is_not_a_checkpoint(tmp_path, capsys):
    bogus = tmp_path / "model_1.pt"
    bogus.write_text("not a checkpoint")
    line = _user_error(train_cli.main, [f"resume={bogus}", f"hydra.run.dir={tmp_path / 'run'}"], capsys)
    assert "is not a readable rlcore checkpoint" in line


# ---------------------------------------------------------------------------- play and export
def test_play_refuses(trained_run, capsys, tmp_path):
    assert "play needs checkpoint=" in _user_error(play_cli.main, [], capsys)
    assert "does not exist" in _user_error(play_cli.main, [f"checkpoint={tmp_path / 'nothing'}"], capsys)
    assert "unknown key 'epsiodes'" in _user_error(play_cli.main, ["checkpoint=x", "epsiodes=3"], capsys)
    assert "episodes: Value 'many'" in _user_error(play_cli.main, ["checkpoint=x", "episodes=many"], capsys)
    assert "expected key=value" in _user_error(play_cli.main, ["video"], capsys)
    for bad in ("threads=-1", "video_width=0", "video_height=0", "num_envs=0"):
        assert f"{bad}: must be >= 1" in _user_error(play_cli.main, ["checkpoint=x", bad], capsys)
    assert "video_fps=0.0: must be > 0" in _user_error(play_cli.main, ["checkpoint=x", "video_fps=0"], capsys)
    line = _user_error(play_cli.main, [f"checkpoint={trained_run['dir']}", f"onnx={tmp_path / 'none.onnx'}"], capsys)
    assert "no such file" in line


def test_play_video_needs_a_task_that_renders(trained_run, capsys, monkeypatch):
    from rlcore_tasks.classic.base import ClassicTask

    monkeypatch.delattr(ClassicTask, "render")
    line = _user_error(play_cli.main, [f"checkpoint={trained_run['dir']}", "video=true", "episodes=1"], capsys)
    assert line == "error: video=true: task pendulum cannot render (its env has no render() method)."


def test_play_onnx_of_another_policy(trained_run, tmp_path, capsys):
    from tensordict import TensorDict

    from rlcore.deployment import export_onnx
    from rlcore.models import MLPModel

    obs = TensorDict({"policy": torch.zeros(2, 5)}, batch_size=[2])
    other = MLPModel(obs, {"actor": ["policy"]}, "actor", 1, hidden_dims=[4])
    path = export_onnx(other.as_onnx(), tmp_path / "other.onnx")
    line = _user_error(play_cli.main, [f"checkpoint={trained_run['dir']}", f"onnx={path}", "episodes=1"], capsys)
    assert "does not match the checkpoint's policy (MLPModel)" in line and "input 'obs' has shape" in line


def test_play_a_go2_onnx_file_on_a_pendulum_checkpoint(trained_run, capsys):
    """The shipped Go2 file (its command-integral loop included) on a pendulum checkpoint: one line naming the
    file's task and how its inputs differ, not a KeyError traceback from the Go2 observation groups (issue 52,
    item 12)."""
    from rlcore_tasks.go2.pretrained import PRETRAINED

    path = PRETRAINED["go2_flat"].path
    line = _user_error(play_cli.main, [f"checkpoint={trained_run['dir']}", f"onnx={path}", "episodes=1"], capsys)
    assert f"onnx={path} does not match the checkpoint's policy (MLPModel) (it is a policy for task go2)" in line
    assert "input 'obs' has shape ['batch', 270], the policy needs ['batch', 3]" in line
    assert "observation groups [policy, policy_history], the policy [policy]" in line


def test_export_refuses(trained_run, capsys):
    assert "format: Invalid value 'tflite', expected one of [onnx, jit]" in _user_error(
        export_cli.main, [f"checkpoint={trained_run['dir']}", "format=tflite"], capsys)
    assert "export needs checkpoint=" in _user_error(export_cli.main, ["format=onnx"], capsys)
    assert "atol must be > 0" in _user_error(export_cli.main, [f"checkpoint={trained_run['dir']}", "atol=0"], capsys)
    assert "threads=-1: must be >= 1" in _user_error(export_cli.main, [f"checkpoint={trained_run['dir']}",
                                                                        "threads=-1"], capsys)


def test_hydra_flags_still_reach_hydra(capsys):
    """``--cfg job`` prints the composed config (Hydra's own flags are passed through untouched)."""
    proc = check_ok(run_module("rlcore.train", "--cfg", "job", "task=cartpole", "model=rnn"))
    assert "class_name: RNNModel" in proc.stdout and "name: cartpole" in proc.stdout


def test_a_mujoco_gl_backend_that_cannot_load_is_one_line(tmp_path):
    """MUJOCO_GL naming a backend MuJoCo cannot use fails at ``import mujoco``; the command says so in one line."""
    proc = run_module("rlcore.train", "task=go2", "task.num_envs=2", "runner.max_iterations=1",
                      f"hydra.run.dir={tmp_path / 'run'}", env={"MUJOCO_GL": "no-such-backend"})
    assert_user_error(proc, "MUJOCO_GL=no-such-backend: MuJoCo cannot load this OpenGL backend")
    assert not (tmp_path / "run").exists()


def test_a_metric_found_missing_at_the_first_evaluation_leaves_no_run_directory(tmp_path):
    """``runner.keep_best`` names a metric the task reports only once it steps: the error comes after the run
    directory was made, and what this run wrote there goes again; a directory holding anything else is kept."""
    args = ("task=pendulum", *TINY, "runner.keep_best=foo")
    proc = run_module("rlcore.train", *args, f"hydra.run.dir={tmp_path / 'run'}")
    assert_user_error(proc, "runner.keep_best: PendulumSwingUp reports no metric 'foo'", "episode_return_mean")
    assert not (tmp_path / "run").exists()
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "notes.txt").write_text("mine")
    proc = run_module("rlcore.train", *args, f"hydra.run.dir={tmp_path / 'kept'}")
    assert_user_error(proc, "reports no metric 'foo'")
    assert (tmp_path / "kept" / "notes.txt").read_text() == "mine"
