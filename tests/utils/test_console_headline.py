"""The console's first line leads with the task's headline metric (``runner.headline_metric``, issue 52 item 15):
Go2's tracking error, the classic tasks' return, and one return only, not the env's own disagreeing episode mean."""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runners"))
from runner_helpers import base_cfg, make_env

from rlcore.errors import ConfigError
from rlcore.logging.logger import Logger
from rlcore.runners import OnPolicyRunner


def _logger(**cfg) -> Logger:
    return Logger(None, {"num_steps_per_env": 2, **cfg}, {}, 2, False, 1, 0, "cpu")


def _iteration(logger: Logger, it: int, logs: dict) -> None:
    for _ in range(2):
        logger.process_env_step(torch.zeros(2), torch.zeros(2, dtype=torch.bool), {"log": logs})
    logger.log(it, 0, 10, 0.1, 0.1, {"value": 1.0}, 1e-3, None, None)


GO2_LOGS = {"/metrics/lin_vel_error": torch.tensor(math.nan), "/metrics/lin_vel_error_now": torch.tensor(0.4213),
            "/physics_failures": torch.tensor(0.0), "/reward/tracking_lin_vel": torch.tensor(0.01)}


def test_each_task_has_its_headline():
    """go2 (and the rough tasks, which extend it) name the tracking error; the classic tasks keep the default."""
    from rlcore.config.cli import compose

    heads = {t: compose([f"task={t}"]).runner.headline_metric for t in ("pendulum", "cartpole", "go2", "go2_rough")}
    assert heads == {"pendulum": "return", "cartpole": "return", "go2": "lin_vel_error", "go2_rough": "lin_vel_error"}


def test_go2_first_line_leads_with_the_tracking_error(capsys):
    """The per-step tracking error (meaningful from the first iteration) opens the first line, before the return;
    it is not repeated on the task-metric line; print_minimal keeps it."""
    _iteration(_logger(headline_metric="lin_vel_error"), 0, GO2_LOGS)
    first, losses, metrics = capsys.readouterr().out.splitlines()
    assert first.startswith("it 1/10  lin_vel_error_now 0.4213  return n/a"), first
    assert "lin_vel_error_now" not in metrics and "physics_failures 0" in metrics and "tracking" not in metrics
    logger = _logger(headline_metric="lin_vel_error")
    for _ in range(2):
        logger.process_env_step(torch.zeros(2), torch.zeros(2, dtype=torch.bool), {"log": GO2_LOGS})
    logger.log(0, 0, 10, 0.1, 0.1, {}, 1e-3, None, None, print_minimal=True)
    assert capsys.readouterr().out.startswith("it 1/10  lin_vel_error_now 0.4213  return n/a")


def test_the_default_headline_is_the_return(capsys):
    _iteration(_logger(), 0, GO2_LOGS)
    assert capsys.readouterr().out.startswith("it 1/10  return n/a (no full episode yet)  reward/step 0")


def test_a_headline_the_task_does_not_report_is_said_once(capsys):
    logger = _logger(headline_metric="no_such_metric")
    _iteration(logger, 0, GO2_LOGS)
    _iteration(logger, 1, GO2_LOGS)
    lines = capsys.readouterr().out.splitlines()
    notices = [ln for ln in lines if "runner.headline_metric" in ln]
    assert len(notices) == 1 and "'no_such_metric'" in notices[0] and "metrics/lin_vel_error_now" in notices[0]
    assert [ln for ln in lines if ln.startswith("it ")][1].startswith("it 2/10  return n/a")


def test_a_headline_that_is_not_a_name_is_one_config_error():
    with pytest.raises(ConfigError, match=r"^runner\.headline_metric=3: must be a metric name"):
        OnPolicyRunner(make_env(num_envs=4), base_cfg(headline_metric=3))


def test_classic_first_line_shows_one_return(capsys):
    """Pendulum through the runner (random-length starts, 16-step episodes): every block names one return, the full
    episodes'; the env's own episode_return_mean (which averages the partial first episodes too, and disagrees)
    is written to the logs but not printed."""
    env = make_env(num_envs=16, max_episode_length=16)
    runner = OnPolicyRunner(env, base_cfg(headline_metric="return"))
    seen: list[dict] = []
    runner.learn(6, init_at_random_ep_len=True, callback=lambda it, stats: seen.append(stats))
    out = capsys.readouterr().out
    blocks = [b for b in re.split(r"^(?=it \d+/)", out, flags=re.M) if b.startswith("it ")]
    assert len(blocks) == 6
    for block in blocks:
        assert len(re.findall(r"\breturn\b", block)) == 1, block
        assert "episode_return_mean" not in block and "episode_length_mean" not in block, block
    assert re.search(r"^it 6/6  return -?\d+\.\d+ \(\d+ full episodes?\)", blocks[-1]), blocks[-1]
    # why it is left out: the env's mean counts cut-short episodes, so the two disagree
    assert any(abs(s["Env/episode_return_mean"] - s["Episode/mean_return"]) > 1e-3 for s in seen
               if math.isfinite(s["Episode/mean_return"]))
