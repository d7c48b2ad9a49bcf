"""One planning pass per command: ``python -m rlcore.train ... resume=<run>`` validates its config once and opens the
checkpoint once to plan (and once more when the runner loads it); the log directory follows runner.experiment_name."""

from __future__ import annotations

import pytest
from cli_helpers import TINY

import rlcore.train as train_module
from rlcore.config.cli import compose


@pytest.mark.slow
def test_a_resumed_run_is_planned_once(trained_run, tmp_path, monkeypatch, capsys):
    import rlcore.checkpoint.run_files as run_files
    import rlcore.runners.on_policy_runner as runner_module

    calls = {"validate": 0, "plan_open": [], "runner_load": []}
    validate, open_checkpoint, load_checkpoint = (train_module.validate_config, run_files.open_checkpoint,
                                                  runner_module.load_checkpoint)

    def counting_validate(cfg):
        calls["validate"] += 1
        return validate(cfg)

    def counting_open(path, what="checkpoint"):
        calls["plan_open"].append(what)
        return open_checkpoint(path, what)

    def counting_load(path, *args, **kwargs):
        calls["runner_load"].append(str(path))
        return load_checkpoint(path, *args, **kwargs)

    monkeypatch.setattr(train_module, "validate_config", counting_validate)
    monkeypatch.setattr(run_files, "open_checkpoint", counting_open)
    monkeypatch.setattr(runner_module, "load_checkpoint", counting_load)
    run_dir = tmp_path / "resumed"
    train_module.main(["task=pendulum", *TINY, "seed=5", "runner.max_iterations=3", f"resume={trained_run['dir']}",
                       f"hydra.run.dir={run_dir}"])
    assert "resumed from" in capsys.readouterr().out
    assert (run_dir / "model_2.pt").is_file()
    assert calls == {"validate": 1, "plan_open": ["resume"],
                     "runner_load": [str(trained_run["dir"] / "model_1.pt")]}
    assert train_module._planned == []  # the plan was taken by the job, none is left for another command


def test_run_makes_its_own_plan_when_given_none_or_another_one(monkeypatch):
    made = []
    prepare = train_module.prepare
    monkeypatch.setattr(train_module, "prepare", lambda cfg: made.append(1) or prepare(cfg))

    class Stop(Exception):
        pass

    def stop(*args, **kwargs):
        raise Stop

    monkeypatch.setattr(train_module, "_init_distributed", stop)  # the first step after planning
    cfg = compose(["task=pendulum", *TINY])
    other = prepare(compose(["task=cartpole", *TINY]))
    for plan in (None, other):
        try:
            train_module.run(cfg, log_dir="unused", plan=plan)
        except Stop:
            pass
    assert len(made) == 2
    same = prepare(cfg)
    try:
        train_module.run(cfg, log_dir="unused", plan=same)
    except Stop:
        pass
    assert len(made) == 2  # the plan of this very config is used as it is


def test_the_log_directory_follows_the_experiment_name():
    def run_dir(*overrides: str) -> str:
        return str(compose(list(overrides), return_hydra_config=True).hydra.run.dir)

    assert run_dir("task=cartpole").startswith("logs/cartpole/")  # experiment_name defaults to the task's name
    assert run_dir("task=cartpole", "runner.experiment_name=flat_v2").startswith("logs/flat_v2/")
    sweep = compose(["runner.experiment_name=abc"], return_hydra_config=True).hydra.sweep.dir
    assert str(sweep).startswith("logs/abc/sweep_")


@pytest.mark.slow
def test_a_learning_rate_given_with_resume_is_named_as_unused(trained_run):
    """The resumed optimiser keeps the checkpoint's (adapted) rate: a new algorithm.learning_rate would be silently
    ignored, so the plan says so, with the rate actually used; an unchanged rate gives no notice."""
    import torch

    from rlcore.train import prepare

    ckpt = torch.load(trained_run["dir"] / "model_1.pt", weights_only=True)
    started = ckpt["train_cfg"]["algorithm"]["learning_rate"]
    base = ["task=pendulum", *TINY, "seed=5", "runner.max_iterations=4", f"resume={trained_run['dir']}"]
    assert not [n for n in prepare(compose(base)).notices if "learning_rate" in n]
    notices = [n for n in prepare(compose([*base, f"algorithm.learning_rate={started / 7:g}"])).notices
               if "learning_rate" in n]
    assert len(notices) == 1
    assert f"algorithm.learning_rate={started / 7:g} is not used on resume" in notices[0]
    assert f"learning rate {ckpt['learning_rate']:.4g}" in notices[0]
    assert f"started at {started:g}" in notices[0]


def test_sweep_jobs_expand_like_hydras_basic_sweeper():
    jobs = train_module.sweep_jobs(["task=pendulum", "model=mlp,rnn", "seed=range(1,3)"])
    assert jobs == [["task=pendulum", "model=mlp", "seed=1"], ["task=pendulum", "model=mlp", "seed=2"],
                    ["task=pendulum", "model=rnn", "seed=1"], ["task=pendulum", "model=rnn", "seed=2"]]
    assert train_module.sweep_jobs(["hydra/sweeper=other", "seed=1,2"]) is None  # another sweeper: Hydra's business


@pytest.mark.slow
def test_a_sweep_with_one_bad_job_fails_in_one_line_before_any_job_runs(tmp_path):
    """``-m``: every job is planned first, so job #2's bad value is refused before job #0 trains; nothing is
    written (no sweep directory). A good sweep runs every job."""
    from cli_helpers import assert_user_error, check_ok, run_module

    sweep_dir = tmp_path / "sweep"
    bad = run_module("rlcore.train", "-m", "task=pendulum", *TINY, "algorithm.learning_rate=0.001,0.002,-1",
                     f"hydra.sweep.dir={sweep_dir}", cwd=tmp_path)
    assert_user_error(bad, "sweep job #2 of 3 (", "algorithm.learning_rate=-1", "algorithm.learning_rate: must be > 0")
    assert not sweep_dir.exists() and "Launching" not in bad.stdout + bad.stderr
    bad = run_module("rlcore.train", "--multirun", "task=pendulum", *TINY, "model=mlp,rnm",
                     f"hydra.sweep.dir={sweep_dir}", cwd=tmp_path)
    assert_user_error(bad, "sweep job #1 of 2", "unknown option model=rnm; valid choices for model: cnn, mlp, rnn")
    check_ok(run_module("rlcore.train", "-m", "task=pendulum", *TINY, "runner.max_iterations=1", "seed=1,2",
                        f"hydra.sweep.dir={sweep_dir}", cwd=tmp_path))
    assert sorted(p.name for p in sweep_dir.iterdir() if p.is_dir()) == ["0", "1"]
    assert all(list((sweep_dir / job).glob("model_*.pt")) for job in ("0", "1"))  # each job trained and saved
