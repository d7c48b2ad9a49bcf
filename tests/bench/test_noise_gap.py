"""``bench/noise_gap.py`` on a tiny Go2 checkpoint: the sampled run is the mean-action run when the std is scaled to
zero and differs from it with the policy's own std; the estimator column reads the actor's velocity estimator."""

from __future__ import annotations

import math

import noise_gap
import pytest
import torch


def gap(checkpoint: str, *extra: str) -> dict:
    return noise_gap.main([checkpoint, "--commands", "0.5,0,0;0,0.5,0", "--envs", "2", "--settle-steps", "2",
                           "--steps", "6", "--threads", "1", *extra])


@pytest.mark.slow
def test_zero_std_makes_the_sampled_run_the_mean_action_run(checkpoint, capsys):
    still = gap(checkpoint, "--std-scale", "0")
    assert torch.allclose(torch.tensor(still["sampled_vel"]), torch.tensor(still["mean_vel"]), atol=1e-4)
    noisy = gap(checkpoint)  # std 1.0 after one iteration: the sampled gait is another one
    assert noisy["mean_vel"] == still["mean_vel"]  # the mean-action run does not depend on the std
    assert (torch.tensor(noisy["sampled_vel"]) - torch.tensor(noisy["mean_vel"])).abs().max() > 1e-3
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith(f"noise_gap: mean_action_err={noisy['mean_action_err']:.4f} "
                           f"sampled_err={noisy['sampled_err']:.4f} estimate_err=")


@pytest.mark.slow
def test_errors_are_the_bias_of_the_mean_velocity_and_the_estimate_is_read(checkpoint):
    result = gap(checkpoint)
    cmds = torch.tensor([[0.5, 0.0], [0.0, 0.5]])
    vel = torch.tensor(result["mean_vel"])[:, :2]
    assert result["mean_action_err"] == pytest.approx(float(torch.norm(cmds - vel, dim=1).mean()), rel=1e-5)
    assert math.isfinite(result["estimate_err"])  # the default Go2 actor carries a base-velocity estimator


def test_bad_commands_are_refused_in_one_line(capsys):
    with pytest.raises(SystemExit):
        noise_gap.parse_args(["run", "--commands", "0.5,0"])
    assert "each command has three numbers" in capsys.readouterr().err


def test_oscillation_rms_and_jitter_share_of_known_signals():
    """A 10 Hz wobble of amplitude 0.1 on vx (rms 0.1/sqrt(2)) over a constant velocity is all jitter; a 2 Hz sway
    of the same size on vy none; their sum has half its power above 7 Hz; a constant velocity has neither."""
    dt, steps = 0.02, 250  # 5 s: whole periods of both frequencies
    t = torch.arange(steps) * dt
    fast = 0.1 * torch.sin(2 * math.pi * 10 * t)
    slow = 0.1 * torch.sin(2 * math.pi * 2 * t)
    zero = torch.zeros(steps)
    trace = torch.stack([torch.stack([0.5 + fast, zero], -1), torch.stack([zero, 0.3 + slow], -1),
                         torch.stack([0.5 + fast, slow], -1), torch.stack([zero + 0.4, zero], -1)], dim=1)
    rms, jitter = noise_gap.oscillation(trace, dt)
    torch.testing.assert_close(rms, torch.tensor([0.1 / math.sqrt(2), 0.1 / math.sqrt(2), 0.1, 0.0]), atol=1e-5,
                               rtol=1e-4)
    torch.testing.assert_close(jitter, torch.tensor([1.0, 0.0, 0.5, 0.0]), atol=1e-4, rtol=0)


@pytest.mark.slow
def test_training_robots_are_the_checkpoints_randomised_pool_at_full_range(checkpoint):
    """``--robots training``: the run's own robot pool (the variants saved in the checkpoint, graded as in training),
    every env drawn from all of it (not the curriculum's mildest variant), observation noise on, pushes off; ``nominal``: one robot, the
    task's own, no noise. The two probes reach different velocities, and a bad choice is named."""
    from rlcore.checkpoint.run_files import load_run

    info = load_run(checkpoint)
    nominal = noise_gap.probe_env(info, 16, seed=0)
    training = noise_gap.probe_env(info, 16, seed=0, robots="training")
    try:
        robots = lambda env: env.variant_params[env.sim.env_variant]  # noqa: E731  [N, 20] physical parameters
        assert torch.equal(robots(nominal), robots(nominal)[:1].expand(16, -1)) and not nominal.cfg_task.obs.add_noise
        assert len(torch.unique(robots(training), dim=0)) > 4 and training.cfg_task.obs.add_noise
        assert training.randomization_progress() == 1.0 and not training.cfg_task.domain_rand.push_robots
        saved = info.ckpt["env_state"]["physical_variants"]
        assert [v.name for v in training.sim.physical] == [d["name"] for d in saved]
        assert torch.equal(training.variant_params, _pool_params(saved))
    finally:
        nominal.close()
        training.close()
    pool, nominal_gap = gap(checkpoint, "--robots", "training"), gap(checkpoint)
    assert pool["mean_vel"] != nominal_gap["mean_vel"]
    # each env's own error is at least the error of the envs' mean velocity (triangle inequality)
    for result in (pool, nominal_gap):
        assert result["robot_err"] >= result["mean_action_err"] - 1e-6
        assert result["robot_err"] == pytest.approx(sum(result["robot_err_per_command"]) / 2)
    with pytest.raises(ValueError, match="robots='real': valid: nominal, training"):
        noise_gap.probe_env(info, 2, seed=0, robots="real")


def _pool_params(saved: list[dict]) -> torch.Tensor:
    """The ``variant_params`` table of an env that loads the pool ``saved`` through its state dict (the resume path)."""
    from rlcore_tasks.go2.env import Go2Env

    env = Go2Env(num_envs=2, seed=11, sim={"threads": 1})
    try:
        env.use_robot_pool(saved)
        return env.variant_params.clone()
    finally:
        env.close()


def test_feedback_gain_is_the_correction_along_each_command(monkeypatch):
    """gain = (v(-delta) - v(+delta)) . direction / (2 delta): a policy that walks until its shifted estimate reads the
    command gains 1, one that ignores the estimate 0; a turn in place has no direction (nan)."""
    import argparse

    cmds = torch.tensor([[0.5, 0.0, 0.0], [0.0, -0.5, 0.0], [0.0, 0.0, 1.0]])
    reached = {0.1: torch.tensor([[0.40, 0.0, 0.0], [0.0, -0.45, 0.0], [0.02, 0.0, 0.0]]),    # +0.1 on the estimate
               -0.1: torch.tensor([[0.60, 0.0, 0.0], [0.0, -0.55, 0.0], [0.02, 0.0, 0.0]])}   # -0.1
    monkeypatch.setattr(noise_gap, "run_mode", lambda info, args, sampled, offset=0.0: {"vel": reached[offset]})
    gain = noise_gap.feedback_gain(None, argparse.Namespace(feedback=0.1), cmds)
    torch.testing.assert_close(gain[:2], torch.tensor([1.0, 0.5]))
    assert gain[2].isnan()


@pytest.mark.slow
def test_feedback_probe_shifts_the_estimate_the_head_reads(checkpoint):
    result = gap(checkpoint, "--feedback", "0.2")
    assert len(result["feedback_per_command"]) == 2 and math.isfinite(result["feedback_gain"])
    assert result["feedback_per_command"] != [0.0, 0.0]  # the shifted estimate changed what the policy did
    assert result["mean_vel"] == gap(checkpoint)["mean_vel"]  # and the unshifted run is untouched by the probe
