"""The first hour of a new user (issue 40): Ctrl-C at start-up, a run directory that cannot be made, a mistyped
key, ``play`` with another task's checkpoint, third-party log noise, what ``train.log`` holds, and the README's
"Training from Python" snippet."""

from __future__ import annotations

import math
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
from cli_helpers import REPO_ROOT, TINY, assert_user_error, check_ok, cli_env, run_module

#: A pendulum run whose normaliser warm-up (before the first iteration, so before any checkpoint) lasts seconds.
_SLOW_START = ["task=pendulum", "task.num_envs=8", "runner.num_steps_per_env=8", "logger=none",
               "runner.normalizer_warmup_steps=100000", "runner.max_iterations=2"]


def _no_crash(output: str) -> None:
    assert "unexpected" not in output and "Traceback" not in output, output[-3000:]


# ---------------------------------------------------------------------------- Ctrl-C
@pytest.mark.slow
def test_ctrl_c_after_the_run_directory_is_written_exits_130_and_removes_it(tmp_path):
    """SIGINT once the run has written its config (``config.yaml``: the job has started), before any checkpoint:
    status 130, one short line, and no run directory left (it holds nothing to resume from)."""
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "rlcore.train", *_SLOW_START, f"hydra.run.dir={run_dir}"],
                            cwd=str(REPO_ROOT), env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 120
    while not (run_dir / "config.yaml").exists():
        assert proc.poll() is None, f"exited {proc.returncode} before writing its config: {proc.communicate()}"
        assert time.monotonic() < deadline, "no config.yaml within 120 s"
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, f"exit {proc.returncode}\n{out[-2000:]}\n{err[-3000:]}"
    _no_crash(out + err)
    assert [ln for ln in err.splitlines() if ln.strip()] == ["interrupted"], err
    assert not run_dir.exists(), f"left behind: {sorted(p.name for p in run_dir.iterdir())}"


@pytest.mark.slow
def test_ctrl_c_during_the_imports_exits_130(tmp_path):
    """SIGINT while ``rlcore.train`` still imports (``-X importtime`` reports each import as it ends; omegaconf ends
    while Hydra, which the module imports next, still loads): status 130, one short line, nothing written."""
    proc = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "rlcore.train", *_SLOW_START],
                            cwd=str(tmp_path), env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    lines: list[str] = []
    seen = threading.Event()

    def read() -> None:
        for line in proc.stderr:
            lines.append(line)
            if re.search(r"\|\s*omegaconf$", line.rstrip()):
                seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert seen.wait(60), "".join(lines)[-3000:]
    proc.send_signal(signal.SIGINT)
    out = proc.stdout.read()
    proc.wait(timeout=60)
    reader.join(timeout=10)
    err = [ln.rstrip() for ln in lines if ln.strip() and not ln.startswith("import time:")]
    assert proc.returncode == 130, f"exit {proc.returncode}\n{out}\n" + "\n".join(err)
    _no_crash(out + "\n".join(err))
    assert err == ["interrupted"], err
    assert not (tmp_path / "logs").exists()


def test_an_interrupt_that_surfaces_as_another_error_is_not_a_bug(capsys):
    """A Ctrl-C inside a C extension's start-up reaches Python as another exception (pybind11: ``ImportError:
    initialization failed`` caused by the KeyboardInterrupt); it is still an interrupt."""
    from rlcore.config.cli import INTERRUPT_EXIT, user_errors

    with pytest.raises(SystemExit) as stop, user_errors():
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as ki:
            raise ImportError("initialization failed") from ki
    assert stop.value.code == INTERRUPT_EXIT == 130
    err = capsys.readouterr().err
    assert err.strip() == "interrupted (then ImportError: initialization failed)", err


# ---------------------------------------------------------------------------- a run directory that cannot be made
@pytest.mark.slow
def test_a_file_named_logs_is_one_line(tmp_path):
    (tmp_path / "logs").write_text("not a directory\n")
    proc = run_module("rlcore.train", "task=pendulum", *TINY, cwd=tmp_path)
    assert_user_error(proc, "cannot create the run directory logs/pendulum/", "'logs' is a file, not a directory")
    assert (tmp_path / "logs").read_text() == "not a directory\n"


@pytest.mark.slow
def test_an_impossible_run_directory_is_one_line(tmp_path):
    proc = run_module("rlcore.train", "task=pendulum", *TINY, "hydra.run.dir=/proc/x", cwd=tmp_path)
    assert_user_error(proc, "cannot create the run directory /proc/x: No such file or directory")


# ---------------------------------------------------------------------------- a mistyped key
@pytest.mark.parametrize(("arg", "guess", "listing"), [
    ("runner.max_iteration=5", "did you mean runner.max_iterations?", "valid keys of runner: num_steps_per_env, "),
    ("sed=3", "did you mean seed?", "valid top-level keys: seed, device, "),
])
@pytest.mark.slow
def test_a_mistyped_key_names_the_key_meant_and_the_valid_ones(arg, guess, listing, tmp_path):
    proc = run_module("rlcore.train", arg, cwd=tmp_path)
    line = assert_user_error(proc, f"unknown config key '{arg.split('=')[0]}'", guess, listing)
    assert "+" not in line  # adding the key is not the fix
    assert not (tmp_path / "logs").exists()


# ---------------------------------------------------------------------------- play with another task's checkpoint
@pytest.mark.slow
def test_play_refuses_a_checkpoint_of_another_task(trained_run):
    proc = run_module("rlcore.play", "task=go2", f"checkpoint={trained_run['dir']}", "episodes=1")
    assert_user_error(proc, "task=go2", "was trained on task=pendulum")
    proc = check_ok(run_module("rlcore.play", "task=pendulum", f"checkpoint={trained_run['dir']}", "episodes=1",
                               "num_envs=1"))
    assert "task=pendulum" in proc.stdout and "mean return" in proc.stdout


# ---------------------------------------------------------------------------- log noise and train.log
@pytest.fixture(scope="module")
def pendulum_run(tmp_path_factory):
    """A 3-iteration pendulum run with the default (TensorBoard) logger, colours forced on the console."""
    run_dir = tmp_path_factory.mktemp("first_hour") / "run"
    proc = check_ok(run_module("rlcore.train", "task=pendulum", "task.num_envs=8", "runner.num_steps_per_env=8",
                               "runner.max_iterations=3", f"hydra.run.dir={run_dir}", env={"FORCE_COLOR": "1"}))
    return run_dir, proc


@pytest.mark.slow
def test_a_run_prints_no_third_party_info_records(pendulum_run):
    _, proc = pendulum_run
    output = proc.stdout + proc.stderr
    assert "it 3/3" in output  # the run did print its progress
    assert "[INFO]" not in output and "No path found after" not in output, output[-3000:]


@pytest.mark.slow
def test_a_go2_run_prints_no_opengl_info_record(tmp_path):
    proc = check_ok(run_module("rlcore.train", "task=go2", "task.num_envs=8", "runner.num_steps_per_env=8",
                               "runner.max_iterations=1", "logger=none", f"hydra.run.dir={tmp_path / 'run'}"))
    output = proc.stdout + proc.stderr
    assert "it 1/1" in output
    assert "OpenGL_accelerate" not in output and "[INFO]" not in output, output[-3000:]


def test_warnings_of_the_quietened_loggers_still_show():
    import logging

    from rlcore.train import QUIET_LOGGERS, _quiet_third_party_logs

    levels = {name: logging.getLogger(name).level for name in QUIET_LOGGERS}
    try:
        for name in QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.NOTSET)
        _quiet_third_party_logs()
        for name in QUIET_LOGGERS:
            assert not logging.getLogger(name).isEnabledFor(logging.INFO)
            assert logging.getLogger(name).isEnabledFor(logging.WARNING)
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


@pytest.mark.slow
def test_train_log_holds_the_console_progress_as_plain_text(pendulum_run):
    run_dir, proc = pendulum_run
    log = (run_dir / "train.log").read_text(encoding="utf-8")
    assert re.search(r"^it 3/3 ", log, re.M), log
    assert "[rlcore] exported " in log and "[rlcore] run directory: " in log
    assert "\x1b[" in proc.stdout and "\x1b" not in log  # the console keeps its colours, the file is plain
    plain = re.sub(r"\x1b\[[0-?]*[ -/]*[@-~]", "", proc.stdout)
    assert plain.strip() in log  # every line the console showed, in order


# ---------------------------------------------------------------------------- the README's Python snippet
def test_the_readme_snippet_trains_with_the_learning_rate_it_sets(tmp_path, capsys):
    """The "Training from Python" snippet, shrunk to 8 envs and 2 iterations: the learning rate it sets is the one
    every iteration logs and the optimiser uses."""
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", text.split("## Training from Python", 1)[1], re.S).group(1)
    setup, _, rest = code.partition("\nrunner = ")
    assert "runner.learn(" in rest
    names: dict = {}
    exec(re.sub(r"num_envs=\d+", "num_envs=8", setup), names)
    cfg = names["cfg"]
    cfg.update(num_steps_per_env=8, max_iterations=2)
    runner = names["OnPolicyRunner"](names["env"], cfg, log_dir=str(tmp_path), device="cpu")
    capsys.readouterr()
    runner.learn(init_at_random_ep_len=True)
    logged = [float(x) for x in re.findall(r"learning_rate (\S+)", capsys.readouterr().out)]
    lr = cfg["algorithm"]["learning_rate"]
    assert len(logged) == 2 and all(math.isclose(x, lr, rel_tol=1e-3) for x in logged), (lr, logged)
    assert [g["lr"] for g in runner.alg.optimizer.param_groups] == [lr] * len(runner.alg.optimizer.param_groups)
    runner.close()


def test_readme_snippet_says_why_the_rate_holds():
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", text.split("## Training from Python", 1)[1], re.S).group(1)
    assert '"schedule": "fixed"' in code and "adaptive" in code

