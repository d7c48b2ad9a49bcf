"""Episode bookkeeping of the logger (issue 40): the headline return counts full episodes only, task metrics have
clean names, and the bookkeeping survives a resume (``state_dict`` / ``load_state_dict``)."""

from __future__ import annotations

import io
import math

import pytest
import torch

from rlcore.logging.logger import ConsoleReport, EpisodeStats, Logger
from rlcore.runners.evaluation import find_log_key


def _logger(num_envs: int = 3, steps: int = 3) -> Logger:
    return Logger(None, {"num_steps_per_env": steps}, {}, num_envs, False, 1, 0, "cpu")


def _log(logger: Logger, it: int = 0) -> dict:
    return logger.log(it, 0, 100, 0.1, 0.1, {"value": 1.0}, 1e-3, None, None)


def _step(target, rewards, dones, logs=None):
    step = target.process_env_step if isinstance(target, Logger) else target.step
    step(torch.tensor(rewards, dtype=torch.float32), torch.tensor(dones, dtype=torch.bool),
         {"log": logs} if logs else {})


# ---------------------------------------------------------------------------- 1. the headline return
def test_first_episodes_are_partial_and_left_out_of_the_return(capsys):
    """The runner starts envs at random points of their episodes: the logger's first episode of each env is
    partial. Only episodes that started from a reset it saw make ``Episode/mean_return`` / ``mean_length``."""
    logger = _logger()
    # env 0 ends its (partial) first episode at step 1, env 2 at step 0; env 1 runs on.
    for r, d in [([1.0, 2.0, 3.0], [0, 0, 1]), ([1.0, 1.0, 4.0], [1, 0, 0]), ([2.0, 0.0, 5.0], [0, 0, 0])]:
        _step(logger, r, d)
    ep = _log(logger)
    assert math.isnan(ep["Episode/mean_return"]) and math.isnan(ep["Episode/mean_length"])  # no full one yet
    assert ep["Episode/finished"] == 0 and ep["Episode/finished_partial"] == 2
    assert ep["Episode/mean_reward_per_step"] == pytest.approx(19.0 / 9.0)  # every env and step of the window
    assert list(logger.rewbuffer) == [3.0, 2.0]  # rsl_rl's buffer: every finished episode, as rsl_rl keeps it
    out = capsys.readouterr().out
    assert "return n/a (no full episode yet)" in out and "reward/step 2.111" in out
    assert "ep len" not in out  # no partial episode's length shown either

    # Next window: env 2 ends its first full episode (4 + 5 + 1 + 2 = 12, 4 steps), env 1 its partial first one.
    for r, d in [([1.0, 1.0, 1.0], [0, 0, 0]), ([0.0, 7.0, 2.0], [0, 1, 1]), ([3.0, 1.0, 1.0], [0, 0, 0])]:
        _step(logger, r, d)
    ep = _log(logger, 1)
    assert ep["Episode/mean_return"] == pytest.approx(12.0) and ep["Episode/mean_length"] == 4.0
    assert ep["Episode/finished"] == 1 and ep["Episode/finished_partial"] == 1
    assert ep["Episode/mean_reward_per_step"] == pytest.approx(17.0 / 9.0)
    assert "return 12.000 (1 full episode)  ep len 4.0  reward/step 1.889" in capsys.readouterr().out
    assert list(logger.rewbuffer) == [3.0, 2.0, 11.0, 12.0]

    # env 0's second episode (from its reset at step 1: 2 + 1 + 0 + 3 + 2, 5 steps) ends: a full one.
    _step(logger, [2.0, 0.0, 0.0], [1, 0, 0])
    ep = _log(logger, 2)
    assert ep["Episode/mean_return"] == pytest.approx(8.0) and ep["Episode/mean_length"] == 5.0
    # A window without a full episode repeats the last figures and says so.
    _step(logger, [1.0, 1.0, 1.0], [0, 0, 0])
    ep = _log(logger, 3)
    assert ep["Episode/mean_return"] == pytest.approx(8.0) and ep["Episode/finished"] == 0
    assert "return 8.000 (no new full episode)" in capsys.readouterr().out


def test_episode_stats_alone_counts_from_a_reset_by_default():
    """A standalone EpisodeStats of fresh envs (the default) counts every episode, as before."""
    stats = EpisodeStats(2, "cpu")
    _step(stats, [1.0, 2.0], [1, 0])
    _step(stats, [1.0, 2.0], [0, 1])
    out = stats.collect()
    assert out["Episode/mean_return"] == pytest.approx(2.5) and out["Episode/finished"] == 2
    assert out["Episode/finished_partial"] == 0


def test_episode_text_placeholder_and_labels():
    from rlcore.logging.logger import episode_text

    assert episode_text({"Episode/mean_return": math.nan, "Episode/mean_length": math.nan}) == \
        "return n/a (no full episode yet)"
    text = episode_text({"Episode/mean_return": -121.7, "Episode/mean_length": 200.0, "Episode/finished": 12,
                         "Episode/mean_reward_per_step": -0.6085})
    assert text == "return [cyan]-121.700[/cyan] (12 full episodes)  ep len 200.0  reward/step [cyan]-0.6085[/cyan]"


# ---------------------------------------------------------------------------- 2. clean task metric names
def test_task_metric_names_have_no_stray_slash(capsys):
    stats = EpisodeStats(2, "cpu")
    logs = {"/episode_return_mean": 1.0, "episode_length_mean": 2.0, "//metrics/lin_vel_error": 0.5,
            "metrics/terrain_level": 3.0}
    _step(stats, [0.0, 0.0], [0, 0], logs)
    out = stats.collect()
    env_keys = sorted(k for k in out if k.startswith("Env"))
    assert env_keys == ["Env/episode_length_mean", "Env/episode_return_mean", "Env/metrics/lin_vel_error",
                        "Env/metrics/terrain_level"]
    ConsoleReport(1).print(0, 10, 0.1, 0.1, out, {})
    shown = capsys.readouterr().out
    assert "/lin_vel_error" not in shown
    assert "lin_vel_error 0.5" in shown and "terrain_level 3" in shown
    assert "episode_return_mean" not in shown  # the task's own episode means: written, not printed beside the return
    # The evaluation finds a task metric by name whether the env writes its key with or without "/".
    for key in ("/episode_return_mean", "episode_return_mean"):
        assert find_log_key([key, "/episode_length_mean"], "episode_return_mean") == key
    assert find_log_key(["//metrics/lin_vel_error"], "lin_vel_error") == "//metrics/lin_vel_error"


# ---------------------------------------------------------------------------- 3. resume
def _inputs(seed: int, num_envs: int, steps: int):
    g = torch.Generator().manual_seed(seed)
    for i in range(steps):
        rewards = torch.randn(num_envs, generator=g)
        dones = torch.rand(num_envs, generator=g) < 0.15
        logs = {"/metric": torch.randn(num_envs, generator=g), "sometimes": math.nan if i % 3 else float(i)}
        yield rewards, dones, {"log": logs}


def _roundtrip(state: dict) -> dict:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)  # plain data only: a checkpoint never executes code


@pytest.mark.parametrize("mid_window", [False, True])
def test_episode_stats_resume_continues_identically(mid_window):
    n, steps = 6, 40
    run, inputs = EpisodeStats(n, "cpu", keep_episodes=True, started_from_reset=False), list(_inputs(0, n, steps))
    cut = 17 if mid_window else 16
    for i, (r, d, e) in enumerate(inputs[:cut]):
        run.step(r, d, e)
        if i % 8 == 7:
            run.collect()
    resumed = EpisodeStats(n, "cpu", keep_episodes=True, started_from_reset=False)
    resumed.load_state_dict(_roundtrip(run.state_dict()))
    fresh = EpisodeStats(n, "cpu", keep_episodes=True, started_from_reset=False)  # a resume without the state
    differ = False
    for i, (r, d, e) in enumerate(inputs[cut:], start=cut):
        for stats in (run, resumed, fresh):
            stats.step(r, d, e)
        if i % 8 == 7:
            a, b, c = run.collect(), resumed.collect(), fresh.collect()
            assert a.keys() == b.keys()
            for key in a:
                assert a[key] == pytest.approx(b[key], nan_ok=True), key
            assert run.finished_returns == resumed.finished_returns and run.finished_full == resumed.finished_full
            differ |= any(not (a[k] == pytest.approx(c[k], nan_ok=True)) for k in a)
    assert differ  # without the state the figures differ (so the comparison above means something)


def test_logger_resume_continues_identically():
    n = 5
    inputs = list(_inputs(1, n, 60))
    run = _logger(n, steps=10)
    for it in range(3):
        for r, d, e in inputs[it * 10:(it + 1) * 10]:
            run.process_env_step(r, d, e)
        _log(run, it)
    state = _roundtrip(run.state_dict())
    assert state["tot_timesteps"] == 150 and state["tot_time"] == pytest.approx(0.6)
    resumed, fresh = _logger(n, steps=10), _logger(n, steps=10)
    resumed.load_state_dict(state)
    for logger in (resumed, fresh):
        assert logger.cur_reward_sum.shape == (n,)
    assert torch.equal(resumed.cur_reward_sum, run.cur_reward_sum)
    assert torch.equal(resumed.cur_episode_length, run.cur_episode_length)
    differ = False
    for it in range(3, 6):
        for r, d, e in inputs[it * 10:(it + 1) * 10]:
            for logger in (run, resumed, fresh):
                logger.process_env_step(r, d, e)
        a, b, c = _log(run, it), _log(resumed, it), _log(fresh, it)
        assert a.keys() == b.keys()
        for key in a:
            assert a[key] == pytest.approx(b[key], nan_ok=True), key
        differ |= any(not (a[k] == pytest.approx(c[k], nan_ok=True)) for k in a)
        assert list(run.rewbuffer) == list(resumed.rewbuffer) and list(run.lenbuffer) == list(resumed.lenbuffer)
        assert run.tot_timesteps == resumed.tot_timesteps and run.last_stats == pytest.approx(resumed.last_stats,
                                                                                                nan_ok=True)
    assert differ  # the bookkeeping matters: a logger that starts over logs other figures


def test_logger_state_refuses_another_number_of_envs():
    state = _logger(3).state_dict()
    with pytest.raises(ValueError, match="3 envs cannot continue with 4 envs"):
        _logger(4).load_state_dict(state)
