"""Ctrl-C saves the last completed iteration, exactly as it was (issue 52, defect 1).

A ``KeyboardInterrupt`` can land anywhere in an iteration: in the rollout (the env, its generators and the storage
have moved on), in the update (weights and Adam's moments half-way), or while a checkpoint is written. The runner
goes back to the last iteration boundary and saves that one, so that ``model_<it>.pt`` is the iteration it names, and
a resume from it continues bit for bit as the uninterrupted run does (:mod:`resume_check`'s whole-state walk). An
interrupt before the first iteration of a run completes saves nothing.

On fc0b074 the interrupted checkpoint held the half-done iteration (an actor up to 0.0187 off, Adam's step count 10
where iteration 1 ended at 8, the env past the next rollout), and an interrupt in the first rollout wrote an untrained
``model_0.pt``.
"""

from __future__ import annotations

import os

import pytest
import torch
from resume_check import StepRecorder, differences, go2_plan, make_runner, scramble_generators, step_differences
from resume_check import with_generators as state_of

ITERATIONS = 4


def _plan(log_dir: str, save_interval: int):
    return go2_plan("ppo", log_dir, extra=(f"runner.save_interval={save_interval}",))


def _full_run(tmp_path, save_interval: int):
    full = make_runner(_plan(str(tmp_path / "full"), save_interval), str(tmp_path / "full"))
    record = StepRecorder(full.env)
    full.learn(ITERATIONS, init_at_random_ep_len=True)
    return state_of(full), record.steps


def _interrupt_in_rollout(runner, iteration: int, step: int) -> None:
    """Raise KeyboardInterrupt at env step ``step`` of iteration ``iteration``'s rollout."""
    real_step, calls = runner.env.step, []

    def step_then_interrupt(actions):
        if runner.alg.storage._step == step and _in_iteration(runner, iteration):
            calls.append(1)
            raise KeyboardInterrupt
        return real_step(actions)

    runner.env.step = step_then_interrupt


def _in_iteration(runner, iteration: int) -> bool:
    """Whether the runner is in iteration ``iteration`` (0-based) of a fresh run: ``iteration`` have completed."""
    done = 0 if runner.fresh_start else runner.current_learning_iteration + 1
    return done == iteration


def _interrupt_in_update(runner, iteration: int, optimizer_steps: int) -> None:
    """Raise KeyboardInterrupt after ``optimizer_steps`` Adam steps of iteration ``iteration``'s update."""
    real_step, count = runner.alg.optimizer.step, []

    def step(*args, **kwargs):
        if _in_iteration(runner, iteration):
            if len(count) == optimizer_steps:
                raise KeyboardInterrupt
            count.append(1)
        return real_step(*args, **kwargs)

    runner.alg.optimizer.step = step


def _interrupt_in_save(runner, monkeypatch, name: str) -> None:
    """Raise KeyboardInterrupt while ``name`` is written the first time (torch.save half-way, as a Ctrl-C in a slow
    disk write would)."""
    import rlcore.checkpoint.io as io

    real_save, hit = torch.save, []

    def torn_save(obj, f, *args, **kwargs):
        if not hit and obj.get("iter") == int(name.removeprefix("model_").removesuffix(".pt")):
            hit.append(1)
            f.write(b"half a checkpoint")
            raise KeyboardInterrupt
        return real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(io.torch, "save", torn_save)


def _interrupted(tmp_path, setup, save_interval: int):
    log_dir = str(tmp_path / "interrupted")
    runner = make_runner(_plan(log_dir, save_interval), log_dir)
    setup(runner)
    with pytest.raises(KeyboardInterrupt):
        runner.learn(ITERATIONS, init_at_random_ep_len=True)
    return runner, log_dir


def _resume_equals_full(tmp_path, ckpt: str, full_state: dict, full_steps: list, save_interval: int) -> None:
    saved = torch.load(ckpt, weights_only=True)
    scramble_generators(4321)
    resumed = make_runner(_plan(str(tmp_path / "resumed"), save_interval), None)
    resumed.load(ckpt)
    record = StepRecorder(resumed.env)
    resumed.learn(ITERATIONS - 1 - int(saved["iter"]), init_at_random_ep_len=True)
    assert len(record.steps) == 8 * (ITERATIONS - 1 - int(saved["iter"]))
    assert step_differences(full_steps[-len(record.steps):], record.steps) == []
    diffs = differences(full_state, state_of(resumed))
    assert diffs == [], "the resume from the interrupt's checkpoint differs:\n" + "\n".join(diffs[:20])


@pytest.mark.slow
@pytest.mark.parametrize("phase", ["later rollout", "update", "save"])
def test_interrupt_saves_the_last_completed_iteration_and_resumes_exactly(tmp_path, monkeypatch, phase):
    save_interval = 2 if phase == "save" else 100  # "save": model_2.pt is being written when Ctrl-C comes
    full_state, full_steps = _full_run(tmp_path, save_interval)
    setup = {"later rollout": lambda r: _interrupt_in_rollout(r, iteration=2, step=5),
             "update": lambda r: _interrupt_in_update(r, iteration=2, optimizer_steps=2),
             "save": lambda r: _interrupt_in_save(r, monkeypatch, "model_2.pt")}[phase]
    runner, log_dir = _interrupted(tmp_path, setup, save_interval)
    monkeypatch.undo()
    expected = "model_2.pt" if phase == "save" else "model_1.pt"
    assert sorted(f for f in os.listdir(log_dir) if f.endswith(".pt")) == sorted({"model_0.pt", expected})
    ckpt = os.path.join(log_dir, expected)
    assert torch.load(ckpt, weights_only=True)["iter"] == int(expected[6])
    # The runner itself is back at that boundary too.
    assert runner.current_learning_iteration == int(expected[6])
    _resume_equals_full(tmp_path, ckpt, full_state, full_steps, save_interval)


@pytest.mark.slow
def test_interrupt_in_the_update_keeps_the_boundary_weights_and_optimizer(tmp_path):
    """The figures of the defect: the saved actor and Adam's step count are those after iteration 2 (model_1.pt),
    not 2 optimiser steps into iteration 3."""
    full = make_runner(_plan(str(tmp_path / "two"), 100), str(tmp_path / "two"))
    full.learn(2, init_at_random_ep_len=True)
    after_two = {k: v.clone() for k, v in full.alg.actor.state_dict().items()}
    adam_steps = {int(s["step"]) for s in full.alg.optimizer.state_dict()["state"].values()}
    runner, log_dir = _interrupted(tmp_path, lambda r: _interrupt_in_update(r, iteration=2, optimizer_steps=2), 100)
    saved = torch.load(os.path.join(log_dir, "model_1.pt"), weights_only=True)
    for key, value in after_two.items():
        assert torch.equal(saved["actor_state_dict"][key], value), key
    assert {int(s["step"]) for s in saved["optimizer_state_dict"]["state"].values()} == adam_steps
    assert torch.equal(saved["env_state"]["episode_length_buf"], full.env.state_dict()["episode_length_buf"])


@pytest.mark.slow
def test_interrupt_in_the_first_rollout_saves_nothing(tmp_path):
    runner, log_dir = _interrupted(tmp_path, lambda r: _interrupt_in_rollout(r, iteration=0, step=3), 1)
    assert [f for f in os.listdir(log_dir) if f.endswith(".pt")] == []  # fc0b074: an untrained model_0.pt
    assert runner.fresh_start and runner.current_learning_iteration == 0
    assert runner.alg.storage._step == 0  # the half-filled rollout is dropped


@pytest.mark.slow
def test_interrupted_runner_continues_like_the_uninterrupted_one(tmp_path):
    """After the interrupt the runner object itself is at the boundary: calling learn() again finishes the run as
    the uninterrupted one does (the interrupt cost a rollout and half an update, nothing else)."""
    full_state, full_steps = _full_run(tmp_path, 100)
    runner, _ = _interrupted(tmp_path, lambda r: _interrupt_in_update(r, iteration=2, optimizer_steps=2), 100)
    del runner.alg.optimizer.step  # the optimiser's own step again
    runner.learn(ITERATIONS - 2, init_at_random_ep_len=True)
    diffs = differences(full_state, state_of(runner))
    assert diffs == [], "\n".join(diffs[:20])
