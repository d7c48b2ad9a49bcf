"""The diagnosis rules (rlcore.report.diagnosis): each on a synthetic curve that should trigger it and on one that
should not, plus a healthy run on which no rule fires."""

from __future__ import annotations

import math
import random

import pytest

from rlcore.report import diagnosis
from rlcore.report.diagnosis import diagnose, format_findings

N = 200


def curve(fn, n: int = N, noise: float = 0.0, seed: int = 0) -> list[tuple[int, float]]:
    """``[(it, fn(it) + gaussian noise)]`` for it in 0..n-1."""
    rng = random.Random(seed)
    return [(it, fn(it) + (rng.gauss(0.0, noise) if noise else 0.0)) for it in range(n)]


def healthy() -> dict[str, list[tuple[int, float]]]:
    """A run that learns well: returns saturate, the value loss grows with them, the std decays to 0.3, the KL
    stays near 0.01 and the adaptive learning rate moves between its bounds."""
    ret = lambda it: 30.0 * (1 - math.exp(-it / 50))  # noqa: E731
    return {
        "Episode/mean_return": curve(ret, noise=1.0, seed=1),
        "Episode/mean_length": curve(lambda it: 200 + 600 * (1 - math.exp(-it / 40)), noise=20.0, seed=2),
        "Loss/value": curve(lambda it: 0.002 + 0.0004 * ret(it) ** 2, noise=0.001, seed=3),
        "Loss/surrogate": curve(lambda it: -0.01, noise=0.002, seed=4),
        "Loss/entropy": curve(lambda it: 12 * (1.4189 + math.log(1.0 - 0.7 * it / N)), seed=5),
        "Loss/kl": curve(lambda it: 0.01, noise=0.002, seed=6),
        "Loss/learning_rate": curve(lambda it: 1e-3 * (1.5 ** ((it % 7) - 3)), seed=7),
        "Policy/mean_std": curve(lambda it: 1.0 - 0.7 * it / N, seed=8),
        "Perf/collection_time": curve(lambda it: 0.5, seed=9),
    }


def rules_fired(scalars, config=None, expected=None) -> list[str]:
    return [f.rule for f in diagnose(scalars, config, expected_iterations=expected)]


def test_healthy_run_has_no_finding():
    findings = diagnose(healthy(), {"algorithm": {"schedule": "adaptive", "desired_kl": 0.01}}, expected_iterations=N)
    assert findings == []
    assert "no problem found" in format_findings(findings)


def test_lr_bounds_match_ppo():
    from rlcore.algorithms.ppo import LR_MAX, LR_MIN

    assert (diagnosis.LR_MIN, diagnosis.LR_MAX) == (LR_MIN, LR_MAX)


# ---------------------------------------------------------------------------- NaN / Inf
def test_non_finite_value_triggers():
    s = healthy()
    s["Loss/surrogate"] = [(it, math.nan if it >= 120 else v) for it, v in s["Loss/surrogate"]]
    (f,) = [f for f in diagnose(s) if f.rule == "non_finite"]
    assert (f.severity, f.iteration, f.tag) == ("error", 120, "Loss/surrogate")


def test_core_curve_stopping_early_triggers():
    """The logger drops non-finite values: a loss curve that stops while the run goes on became NaN."""
    s = healthy()
    s["Loss/value"] = s["Loss/value"][:90]  # last logged at iteration 89
    (f,) = [f for f in diagnose(s) if f.rule == "non_finite"]
    assert (f.iteration, f.tag) == (90, "Loss/value")


def test_non_finite_not_triggered_by_task_metric_gaps():
    s = healthy()
    s["Env/terrain_level"] = curve(lambda it: 1.0)[:50]  # an env metric that is not reported every iteration
    assert "non_finite" not in rules_fired(s)


# ---------------------------------------------------------------------------- value loss
def test_value_loss_explosion_triggers():
    s = healthy()
    s["Loss/value"] = curve(lambda it: 0.4 if it < 120 else 0.4 * 1.3 ** (it - 120), noise=0.02)
    (f,) = [f for f in diagnose(s) if f.rule == "value_loss_explosion"]
    assert 120 < f.iteration < 145 and f.tag == "Loss/value"
    assert "learning_rate" in f.suggestion


def test_value_loss_decreasing_or_growing_with_returns_does_not_trigger():
    s = healthy()
    s["Loss/value"] = curve(lambda it: 0.1 + 5.0 * math.exp(-it / 5), noise=0.01)  # the usual early drop
    assert "value_loss_explosion" not in rules_fired(s)
    # Returns 0.3 -> 30 (100x): a value loss growing 2000x is the squared-error scale following them.
    s["Episode/mean_return"] = curve(lambda it: 0.3 + 29.7 * it / N)
    s["Loss/value"] = curve(lambda it: 1e-4 * (0.3 + 29.7 * it / N) ** 2)
    assert "value_loss_explosion" not in rules_fired(s)
    # The same growth with flat returns is an explosion.
    s["Episode/mean_return"] = curve(lambda it: 10.0)
    assert "value_loss_explosion" in rules_fired(s)


# ---------------------------------------------------------------------------- action std / entropy
def test_action_std_collapse_triggers():
    s = healthy()
    s["Policy/mean_std"] = curve(lambda it: math.exp(-it / 30))  # < 0.1 from iteration ~69
    (f,) = [f for f in diagnose(s) if f.rule == "action_std_collapse"]
    assert 69 <= f.iteration <= 75
    assert "entropy_coef" in f.suggestion


def test_action_std_growth_triggers():
    s = healthy()
    s["Policy/mean_std"] = curve(lambda it: 1.0 + 0.05 * it)  # > 5 from iteration 81
    (f,) = [f for f in diagnose(s) if f.rule == "action_std_growth"]
    assert 81 <= f.iteration <= 85


def test_action_std_moderate_decay_does_not_trigger():
    s = healthy()
    s["Policy/mean_std"] = curve(lambda it: 1.0 - 0.85 * it / N, noise=0.01)  # down to 0.15
    assert not {"action_std_collapse", "action_std_growth"} & set(rules_fired(s))


def entropy_of(std_fn, dims: int = 12):
    return curve(lambda it: dims * (diagnosis.GAUSSIAN_ENTROPY_UNIT_STD + math.log(std_fn(it))))


def test_entropy_collapse_triggers_without_std_curve():
    s = healthy()
    del s["Policy/mean_std"]
    s["Loss/entropy"] = entropy_of(lambda it: math.exp(-it / 30))  # the std shrinks 10x by iteration ~69
    (f,) = [f for f in diagnose(s) if f.rule == "entropy_collapse"]
    assert 69 <= f.iteration <= 75


def test_entropy_moderate_decay_does_not_trigger():
    s = healthy()
    del s["Policy/mean_std"]
    s["Loss/entropy"] = entropy_of(lambda it: 1.0 - 0.6 * it / N)  # std 1 -> 0.4
    assert "entropy_collapse" not in rules_fired(s)
    # init_std from the config changes the estimate: starting from 0.2, this entropy is a collapse.
    s["Loss/entropy"] = entropy_of(lambda it: 0.2 * math.exp(-it / 30))
    assert "entropy_collapse" not in rules_fired(s)  # assumed init_std 1: the first entropy gives too few dims
    assert "entropy_collapse" in rules_fired(s, {"model": {"actor": {"distribution_cfg": {"init_std": 0.2}}}})


# ---------------------------------------------------------------------------- KL and learning rate
def test_kl_spikes_with_fixed_learning_rate_trigger():
    s = healthy()
    s["Loss/learning_rate"] = curve(lambda it: 3e-3)
    s["Loss/kl"] = curve(lambda it: 0.2 if it in (60, 61, 130) else 0.01)
    (f,) = [f for f in diagnose(s) if f.rule == "kl_spikes"]
    assert (f.iteration, f.severity) == (60, "warning")
    assert "schedule=adaptive" in f.suggestion


def test_kl_spikes_with_learning_rate_at_floor_trigger():
    s = healthy()
    s["Loss/learning_rate"] = curve(lambda it: 1e-5 if it >= 100 else 1e-3)
    s["Loss/kl"] = curve(lambda it: 0.3 if it in (50, 150, 151) else 0.01)
    found = {f.rule: f for f in diagnose(s, {"algorithm": {"schedule": "adaptive", "desired_kl": 0.01}})}
    assert found["kl_spikes"].iteration == 150  # the spike at 50 had room to shrink the step
    assert "floor" in found["kl_spikes"].message
    assert found["learning_rate_floor"].iteration == 100


def test_isolated_kl_spike_with_adaptive_schedule_does_not_trigger():
    s = healthy()
    s["Loss/kl"] = curve(lambda it: 0.3 if it == 77 else 0.01)
    assert "kl_spikes" not in rules_fired(s, {"algorithm": {"schedule": "adaptive", "desired_kl": 0.01}})
    s["Loss/kl"] = curve(lambda it: 0.04)  # 4x desired_kl: below the spike threshold
    s["Loss/learning_rate"] = curve(lambda it: 3e-3)
    assert "kl_spikes" not in rules_fired(s)


def test_learning_rate_at_cap_triggers():
    s = healthy()
    s["Loss/learning_rate"] = curve(lambda it: min(1e-2, 1e-3 * 1.5 ** (it // 10)))  # cap from iteration 60
    (f,) = [f for f in diagnose(s) if f.rule == "learning_rate_cap"]
    assert f.iteration == 60


def test_learning_rate_bounds_not_triggered_by_a_fixed_rate_or_a_touch():
    s = healthy()
    s["Loss/learning_rate"] = curve(lambda it: 1e-2)  # fixed at 1e-2: never moved, not pinned
    assert not {"learning_rate_cap", "learning_rate_floor"} & set(rules_fired(s))
    s["Loss/learning_rate"] = curve(lambda it: 1e-5 if it in (40, 41) else 1e-4)  # two iterations at the floor
    assert "learning_rate_floor" not in rules_fired(s)


# ---------------------------------------------------------------------------- returns and episode length
def rise_and_fall(it: int) -> float:
    return 20.0 * it / 100 if it < 100 else 20.0 - 0.3 * (it - 100)  # peak 20 at 100, -10 at the end


def test_return_collapse_triggers():
    s = healthy()
    s["Episode/mean_return"] = curve(rise_and_fall, noise=1.0)
    (f,) = [f for f in diagnose(s) if f.rule == "return_collapse"]
    assert 130 <= f.iteration <= 145 and f.severity == "warning"  # below 10 (half the gain) from ~iteration 133
    assert "checkpoint nearest iteration" in f.suggestion


def test_return_collapse_with_rising_terrain_level_is_info():
    s = healthy()
    s["Episode/mean_return"] = curve(rise_and_fall, noise=1.0)
    s["Env/terrain_level"] = curve(lambda it: 0.0 if it < 100 else (it - 100) / 20)
    (f,) = [f for f in diagnose(s) if f.rule == "return_collapse"]
    assert f.severity == "info" and "terrain curriculum" in f.message


def test_noisy_plateau_or_dip_and_recovery_do_not_trigger_return_collapse():
    s = healthy()
    s["Episode/mean_return"] = curve(lambda it: 100.0, noise=10.0)
    assert "return_collapse" not in rules_fired(s)
    s["Episode/mean_return"] = curve(lambda it: rise_and_fall(it) if it < 150 else 5 + 0.4 * (it - 150), noise=1.0)
    assert "return_collapse" not in rules_fired(s)  # it fell, then regained its peak by the end


def test_episode_length_collapse_triggers():
    s = healthy()
    s["Episode/mean_length"] = curve(lambda it: 800.0 if it < 100 else max(100.0, 800 - 10 * (it - 100)), noise=20)
    s["Episode/mean_return"] = curve(lambda it: -50.0, noise=1.0)
    (f,) = [f for f in diagnose(s) if f.rule == "episode_length_collapse"]
    assert 140 <= f.iteration <= 150  # below 400 from iteration 141
    assert "alive" in f.suggestion  # negative returns: ending early pays off


def test_episode_length_rising_or_noisy_does_not_trigger():
    s = healthy()  # lengths rise from 200 (random initial episode lengths) to 800
    assert "episode_length_collapse" not in rules_fired(s)
    s["Episode/mean_length"] = curve(lambda it: 300.0, noise=60.0)
    assert "episode_length_collapse" not in rules_fired(s)


# ---------------------------------------------------------------------------- ended early, formatting
def test_ended_early_needs_the_planned_length():
    s = healthy()
    (f,) = [f for f in diagnose(s, expected_iterations=500) if f.rule == "ended_early"]
    assert f.iteration == N - 1 and "499" in f.message and "check_for_nan" in f.suggestion
    assert "ended_early" not in rules_fired(s, expected=N)
    resumed = {k: [(it + 1000, v) for it, v in pts] for k, pts in s.items()}  # a resumed run: 1000..1199
    assert "ended_early" not in rules_fired(resumed, expected=N)


def test_findings_sorted_and_formatted():
    s = healthy()
    s["Episode/mean_return"] = curve(rise_and_fall, noise=1.0)
    s["Loss/kl"] = [(it, math.inf if it == 170 else v) for it, v in s["Loss/kl"]]
    findings = diagnose(s)
    assert [f.rule for f in findings] == ["non_finite", "return_collapse"]  # errors first
    text = format_findings(findings, run="my_run")
    assert text.splitlines()[0] == "Diagnosis of my_run: 2 finding(s)"
    assert "[error] iteration 170 (Loss/kl)" in text and "try: " in text


def test_print_findings_is_silent_without_event_files(tmp_path, capsys):
    assert diagnosis.print_findings(str(tmp_path)) == []
    assert capsys.readouterr().out == ""
    with pytest.raises(diagnosis.ConfigError, match="no TensorBoard event files"):
        diagnosis.load_scalars(str(tmp_path))
