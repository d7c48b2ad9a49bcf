"""``runner.keep_best`` / ``runner.stop_at``: the periodic deterministic evaluation, model_best.pt, stopping, resume.

Pendulum, 16 training envs and 8 evaluation envs of 40-step episodes, 8-step rollouts, 16-unit MLPs.
"""

from __future__ import annotations

import math
import os

import pytest
import torch
from runner_helpers import base_cfg, make_env

from rlcore.checkpoint.io import load_checkpoint
from rlcore.errors import ConfigError
from rlcore.runners import OnPolicyRunner
from rlcore.runners.evaluation import Evaluation, find_log_key, is_better, metric_direction, parse_stop_at

N, E, T = 16, 8, 40


def env(n: int = N, seed: int = 0):
    return make_env(num_envs=n, seed=seed, max_episode_length=T)


def cfg(**keys) -> dict:
    return base_cfg(**{"eval_interval": 1, **keys})


def weights(runner: OnPolicyRunner) -> dict[str, torch.Tensor]:
    return {f"{name}.{k}": v.clone() for name, m in runner.models.items() for k, v in m.state_dict().items()}


def train(log_dir, iterations: int, **keys) -> tuple[OnPolicyRunner, list[dict]]:
    """A run with an evaluation env; returns the runner and each iteration's callback stats (weights added)."""
    runner = OnPolicyRunner(env(), cfg(**keys), None if log_dir is None else str(log_dir), eval_env=env(E, seed=7))
    seen = []
    runner.learn(iterations, callback=lambda it, stats: seen.append({**stats, "it": it, "weights": weights(runner)}))
    return runner, seen


# ---------------------------------------------------------------------------- the evaluation
class GlobalNoiseEnv(type(make_env(num_envs=1))):
    """A pendulum that also draws from the global generator at every step (as some simulators do)."""

    def step(self, actions):
        torch.rand(3)
        return super().step(actions)


RNN_ACTOR = {"class_name": "RNNModel", "rnn_type": "gru", "rnn_hidden_dim": 8, "hidden_dims": [16],
             "obs_normalization": True, "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0}}


@pytest.mark.parametrize("recurrent", [False, True])
@pytest.mark.slow
def test_evaluation_leaves_training_unchanged(tmp_path, recurrent):
    """Same seed with and without evaluations: bit-identical weights (global generators and recurrent state kept)."""
    keys = {"actor": RNN_ACTOR} if recurrent else {}
    plain = OnPolicyRunner(env(), cfg(**keys), None)
    plain.learn(4)
    eval_env = GlobalNoiseEnv(num_envs=E, seed=7, max_episode_length=T)
    evaluated = OnPolicyRunner(env(), cfg(keep_best="return", stop_at="return > 1e9", **keys), str(tmp_path),
                               eval_env=eval_env)
    seen = []
    evaluated.learn(4, callback=lambda it, stats: seen.append("Eval/return" in stats))
    assert seen == [True] * 4  # it evaluated after every iteration
    a, b = weights(plain), weights(evaluated)
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), f"{k} differs with evaluations on"


def test_evaluation_is_a_deterministic_function_of_the_policy():
    """Each evaluation replays the same scenario; returns are the episodes' own (the env's record agrees)."""
    runner = OnPolicyRunner(env(), cfg(), None)
    eval_env = env(E, seed=7)
    evaluation = Evaluation(eval_env, ["return", "episode_return_mean"], num_steps=T)
    policy = runner.alg.get_policy()
    first = evaluation(policy)
    eval_env.step(torch.ones(E, 1))  # whatever happens to the env in between
    assert evaluation(policy) == first
    # T steps from a reset: every env ends exactly one T-step episode; the env's last-episode record agrees.
    assert first["return"] == pytest.approx(float(eval_env._last_return.mean()), rel=1e-5)
    runner.learn(2)
    assert evaluation(policy)["return"] != first["return"]  # it does measure the policy


@pytest.mark.slow
def test_model_best_is_the_best_evaluation(tmp_path):
    runner, seen = train(tmp_path, 6, keep_best="return")
    values = [s["Eval/return"] for s in seen]
    best = max(range(6), key=lambda i: values[i])
    assert len(set(values)) > 1  # the evaluations differ, so picking the best means something
    ckpt = load_checkpoint(tmp_path / "model_best.pt")
    assert ckpt["best"] == {"metric": "return", "value": pytest.approx(values[best]), "iter": best}
    assert ckpt["iter"] == best  # the format of model_<it>.pt, written at that iteration
    for k, v in seen[best]["weights"].items():
        name, key = k.split(".", 1)
        assert torch.equal(ckpt[f"{name}_state_dict"][key], v), k
    # Re-evaluating the saved policy gives the stored value.
    again = OnPolicyRunner(env(), cfg(), None)
    again.load(str(tmp_path / "model_best.pt"))
    value = Evaluation(env(E, seed=7), ["return"], num_steps=T)(again.alg.get_policy())["return"]
    assert value == pytest.approx(values[best], rel=1e-6)
    assert load_checkpoint(tmp_path / "model_5.pt")["best"] == ckpt["best"]  # every checkpoint holds the best so far


@pytest.mark.slow
def test_a_lower_is_better_task_metric(tmp_path):
    """A task metric by name; with the task declaring 'min', the lowest value is kept."""
    eval_env = env(E, seed=7)
    eval_env.metric_directions = {"episode_return_mean": "min"}
    runner = OnPolicyRunner(env(), cfg(keep_best="episode_return_mean"), str(tmp_path), eval_env=eval_env)
    seen = []
    runner.learn(5, callback=lambda it, stats: seen.append(stats["Eval/episode_return_mean"]))
    assert all(math.isfinite(v) for v in seen) and len(set(seen)) > 1
    assert load_checkpoint(tmp_path / "model_best.pt")["best"]["value"] == pytest.approx(min(seen))


@pytest.mark.slow
def test_stop_at_ends_training_at_the_first_evaluation_that_meets_it(tmp_path):
    _, seen = train(None, 6, keep_best="return")
    values = [s["Eval/return"] for s in seen]
    text = f"return {'<' if values[2] < values[1] else '>'} {(values[1] + values[2]) / 2!r}"  # met from it 2 on
    target = next(i for i, v in enumerate(values) if parse_stop_at(text).met(v))
    assert target >= 2
    runner, seen = train(tmp_path, 6, stop_at=text)
    assert runner.current_learning_iteration == target and len(seen) == target + 1
    assert not os.path.exists(tmp_path / "model_best.pt")  # keep_best is off
    assert load_checkpoint(tmp_path / f"model_{target}.pt")["iter"] == target  # the last checkpoint is written
    never, seen = train(None, 3, stop_at="return < -1e12", eval_interval=2)
    # every eval_interval-th iteration, and the last one of the learn() call (issue 40: a short run still evaluates)
    assert never.current_learning_iteration == 2 and ["Eval/return" in s for s in seen] == [False, True, True]


def test_distillation_keeps_the_best_student(tmp_path):
    from rlcore.runners import DistillationRunner

    teacher_run = OnPolicyRunner(env(), cfg(), str(tmp_path / "ppo"))
    teacher_run.learn(1)
    mlp = {"class_name": "MLPModel", "hidden_dims": [16, 16], "obs_normalization": True}
    distill = {"seed": 5, "num_steps_per_env": 8, "logger": "none", "save_interval": 1000, "eval_interval": 1,
               "keep_best": "return", "obs_groups": {"student": ["policy"], "teacher": ["policy"]},
               "student": {**mlp, "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0}},
               "teacher": mlp, "algorithm": {"class_name": "Distillation", "num_learning_epochs": 1}}
    runner = DistillationRunner(env(), distill, str(tmp_path / "student"), eval_env=env(E, seed=7))
    runner.load(str(tmp_path / "ppo" / "model_0.pt"))
    seen = []
    runner.learn(1, callback=lambda it, stats: seen.append(stats["Eval/return"]))
    student = runner.alg.student
    assert seen[0] == pytest.approx(Evaluation(env(E, seed=7), ["return"], num_steps=T)(student)["return"], rel=1e-6)
    ckpt = load_checkpoint(tmp_path / "student" / "model_best.pt")
    assert ckpt["best"]["value"] == pytest.approx(seen[0]) and "student_state_dict" in ckpt
    for k, v in student.state_dict().items():
        assert torch.equal(ckpt["student_state_dict"][k], v), k


# ---------------------------------------------------------------------------- resume
@pytest.mark.slow
def test_resume_keeps_the_best_so_far(tmp_path):
    whole, seen = train(tmp_path / "a", 6, keep_best="return")
    values = [s["Eval/return"] for s in seen]
    part, _ = train(tmp_path / "b", 3, keep_best="return")
    ckpt = load_checkpoint(tmp_path / "b" / "model_2.pt")
    assert ckpt["best"]["value"] == pytest.approx(max(values[:3]))
    resumed = OnPolicyRunner(env(seed=5), cfg(keep_best="return"), str(tmp_path / "b"), eval_env=env(E, seed=7))
    resumed.load(str(tmp_path / "b" / "model_2.pt"))
    assert resumed.best == ckpt["best"]
    resumed.learn(3)
    a, b = (load_checkpoint(tmp_path / d / "model_best.pt") for d in ("a", "b"))
    assert a["best"] == b["best"] and a["best"]["value"] == pytest.approx(max(values))
    for k, v in a["actor_state_dict"].items():
        assert torch.equal(v, b["actor_state_dict"][k])


@pytest.mark.parametrize("saved_value", [1e9, -1e9])
@pytest.mark.slow
def test_a_resumed_run_does_not_overwrite_a_better_model_best(tmp_path, saved_value):
    """model_best.pt may be newer than the checkpoint resumed from: a better value there is adopted, a worse not."""
    train(tmp_path, 3, keep_best="return")
    best_path = tmp_path / "model_best.pt"
    ckpt = load_checkpoint(best_path)
    ckpt["best"]["value"] = saved_value  # as if a later part of the run (not in model_2.pt) had done so
    torch.save(ckpt, best_path)
    before = best_path.read_bytes()
    in_checkpoint = load_checkpoint(tmp_path / "model_2.pt")["best"]
    resumed = OnPolicyRunner(env(), cfg(keep_best="return"), str(tmp_path), eval_env=env(E, seed=7))
    resumed.load(str(tmp_path / "model_2.pt"))
    resumed.learn(3)
    if saved_value > 0:
        assert resumed.best["value"] == saved_value and best_path.read_bytes() == before
    else:  # the checkpoint's best stands; the file is replaced only by an evaluation that beats it
        assert resumed.best["value"] >= in_checkpoint["value"]
        assert (best_path.read_bytes() == before) == (resumed.best == in_checkpoint)


# ---------------------------------------------------------------------------- settings
@pytest.mark.parametrize("text, rule", [("return > -200", ("return", ">", -200.0)),
                                        ("lin_vel_error<0.25", ("lin_vel_error", "<", 0.25)),
                                        (" metrics/x >= 1e-3 ", ("metrics/x", ">=", 1e-3))])
def test_stop_at_parses(text, rule):
    parsed = parse_stop_at(text)
    assert (parsed.metric, parsed.op, parsed.value) == rule


@pytest.mark.parametrize("text", ["return", "return = 3", "return < abc", "< 3", "return << 3"])
def test_bad_stop_at_is_one_line_with_the_accepted_form(text):
    with pytest.raises(ConfigError, match=r"runner\.stop_at=.*accepted form is '<metric> <op> <value>'"):
        OnPolicyRunner(env(), cfg(stop_at=text), None, eval_env=env(E))


def test_stop_rule_comparisons():
    assert parse_stop_at("x < 1").met(0.5) and not parse_stop_at("x < 1").met(1.0)
    assert parse_stop_at("x <= 1").met(1.0) and parse_stop_at("x >= 1").met(1.0)
    assert not parse_stop_at("x > 1").met(float("nan"))


def test_unknown_metric_is_refused_at_start_with_the_available_ones():
    runner = OnPolicyRunner(env(), cfg(keep_best="lin_vel_error"), None, eval_env=env(E))
    with pytest.raises(ConfigError, match=r"runner\.keep_best: PendulumSwingUp reports no metric 'lin_vel_error'; "
                                          r"available: episode_length_mean, episode_return_mean, return\."):
        runner.learn(1)
    assert runner.current_learning_iteration == 0 and runner.fresh_start  # refused before training


def test_keep_best_needs_an_eval_env():
    with pytest.raises(ConfigError, match=r"runner\.keep_best needs an evaluation env"):
        OnPolicyRunner(env(), cfg(keep_best="return"), None)


def test_metric_names_and_directions():
    keys = ["/metrics/lin_vel_error", "/metrics/lin_vel_error_now", "/reward/tracking", "/terrain_level"]
    assert find_log_key(keys, "lin_vel_error") == "/metrics/lin_vel_error_now"  # the per-step form first
    assert find_log_key(keys, "metrics/lin_vel_error") == "/metrics/lin_vel_error"  # a full key as given
    assert find_log_key(keys, "terrain_level") == "/terrain_level" and find_log_key(keys, "level") is None
    plain = env(1)
    assert [metric_direction(plain, m) for m in ("return", "lin_vel_error", "falls", "terrain_level")] == \
        ["max", "min", "min", "max"]
    plain.metric_directions = {"terrain_level": "min"}
    assert metric_direction(plain, "terrain_level") == "min"
    assert is_better(1.0, None, "min") and is_better(1.0, 2.0, "min") and not is_better(2.0, 2.0, "max")
    assert not is_better(float("nan"), None, "max")


# ---------------------------------------------------------------------------- the train command
TINY = ["task=pendulum", "task.num_envs=8", "runner.num_steps_per_env=8", "runner.max_iterations=4", "logger=none",
        "runner.save_interval=100", "model.actor.hidden_dims=[16,16]", "model.critic.hidden_dims=[16,16]",
        "algorithm.num_mini_batches=2", "algorithm.num_learning_epochs=1"]


@pytest.mark.slow
def test_train_command_evaluates_on_its_own_env_and_records_videos(tmp_path):
    from rlcore.config.cli import compose
    from rlcore.train import run

    seen = []
    extra = ["runner.keep_best=return", "runner.stop_at='return > 1e9'", "runner.eval_interval=2",
             "runner.eval_num_envs=3", "runner.eval_steps=20", "runner.video_interval=2", "runner.video_length=4",
             "runner.video_width=32", "runner.video_height=32"]
    run(compose([*TINY, *extra]), log_dir=str(tmp_path),
        callback=lambda runner, it, stats: seen.append((runner.eval_env.num_envs, stats.get("Eval/return"))))
    assert [n for n, _ in seen] == [3] * 4  # a separate 3-env copy of the task
    assert [v is not None for _, v in seen] == [False, True, False, True]
    best = load_checkpoint(tmp_path / "model_best.pt")["best"]
    assert best["value"] == pytest.approx(max(v for _, v in seen if v is not None))
    assert sorted(os.listdir(tmp_path / "videos")) == ["iter_0.mp4", "iter_2.mp4"]


@pytest.mark.parametrize("override, message", [
    ("runner.stop_at='return ~ 3'", "runner.stop_at='return ~ 3': not understood; the accepted form is"),
    ("runner.eval_interval=0", "runner.eval_interval=0: must be an integer >= 1."),
    ("runner.keep_best='a b'", "runner.keep_best='a b': must be a metric name"),
])
def test_train_command_refuses_bad_settings_before_building_anything(override, message):
    from rlcore.config.cli import compose
    from rlcore.train import prepare

    with pytest.raises(ConfigError) as err:
        prepare(compose([*TINY, override]))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_max_minutes_stops_after_the_iteration_that_ends_past_the_budget(tmp_path, capsys):
    # A budget of 0 minutes is past after the first iteration: one iteration runs, its checkpoint is written.
    runner = OnPolicyRunner(env(), base_cfg(max_minutes=0.0), str(tmp_path))
    runner.learn(5)
    assert runner.current_learning_iteration == 0
    assert load_checkpoint(tmp_path / "model_0.pt")["iter"] == 0
    assert "runner.max_minutes=0 reached after iteration 0" in capsys.readouterr().out
    # A budget no iteration reaches leaves max_iterations in charge.
    long = OnPolicyRunner(env(), base_cfg(max_minutes=60.0), None)
    long.learn(3)
    assert long.current_learning_iteration == 2
