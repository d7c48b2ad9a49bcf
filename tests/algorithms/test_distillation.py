"""Tests for rlcore.algorithms.Distillation: learning, gradient windows, teacher loading, recurrent replay, errors."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn as nn

from rlcore.algorithms import Distillation, construct_algorithm

GROUPS_SAME = {"student": ["policy"], "teacher": ["policy"]}


def _mse_to_teacher(alg: Distillation, obs) -> float:
    with torch.no_grad():
        return (alg.student(obs) - alg.teacher(obs)).square().mean().item()


def _count_steps(alg: Distillation, monkeypatch) -> list[int]:
    calls: list[int] = []
    original = alg.optimizer.step

    def step(*a, **k):
        calls.append(1)
        return original(*a, **k)

    monkeypatch.setattr(alg.optimizer, "step", step)
    return calls


# ============================================================================ 12: the student learns the teacher
def test_student_learns_teacher(kit):
    env = kit.FakeEnv(num_envs=16)
    obs = env.get_observations()
    alg = kit.make_distillation(obs, 8, groups=GROUPS_SAME, learning_rate=3e-3, num_learning_epochs=2,
                                gradient_length=2, student_kwargs={"hidden_dims": [32]},
                                teacher_kwargs={"hidden_dims": [16], "init_gains": [1.0, 1.0]})
    held_out = kit.make_obs(256)
    initial = _mse_to_teacher(alg, held_out)
    assert initial > 0.1  # the teacher's actions are not near zero
    teacher_state = {k: v.clone() for k, v in alg.teacher.state_dict().items()}
    losses = []
    for _ in range(40):
        kit.collect(alg, env, 8, compute_returns=False)
        losses.append(alg.update()["behavior"])
    final = _mse_to_teacher(alg, held_out)
    assert final < 0.05 * initial, (initial, final)
    assert losses[-1] < 0.05 * losses[0]
    for k, v in alg.teacher.state_dict().items():  # frozen
        assert torch.equal(v, teacher_state[k])


def test_behavior_loss_is_the_mean_mse_to_the_teacher(kit, monkeypatch):
    """With a frozen optimiser the reported loss is the mean over steps of MSE(student mean, teacher action)."""
    env = kit.FakeEnv(num_envs=4)
    alg = kit.make_distillation(env.get_observations(), 5, teacher_kwargs={"init_gains": [1.0, 1.0]})
    kit.collect(alg, env, 5, compute_returns=False)
    monkeypatch.setattr(alg.optimizer, "step", lambda *a, **k: None)
    st = alg.storage
    with torch.no_grad():
        expected = (alg.student(st.observations.reshape(-1)) - st.privileged_actions.reshape(-1, 2)).square().mean()
    assert alg.update()["behavior"] == pytest.approx(expected.item(), rel=1e-5)


@pytest.mark.parametrize("loss_type", ["mse", "huber"])
def test_loss_type_selects_the_loss(kit, monkeypatch, loss_type):
    env = kit.FakeEnv(num_envs=4)
    alg = kit.make_distillation(env.get_observations(), 3, loss_type=loss_type,
                                teacher_kwargs={"init_gains": [3.0, 3.0]})
    kit.collect(alg, env, 3, compute_returns=False)
    monkeypatch.setattr(alg.optimizer, "step", lambda *a, **k: None)
    st = alg.storage
    with torch.no_grad():
        diff = alg.student(st.observations.reshape(-1)) - st.privileged_actions.reshape(-1, 2)
    assert (diff.abs() > 1).any()  # huber differs from mse only beyond delta = 1
    huber = torch.where(diff.abs() < 1, 0.5 * diff.square(), diff.abs() - 0.5)
    per_elem = diff.square() if loss_type == "mse" else huber
    assert alg.update()["behavior"] == pytest.approx(per_elem.mean().item(), rel=1e-5)


# ============================================================================ 13: gradient_length windows
@pytest.mark.parametrize(
    "steps, gradient_length, epochs, expected",
    [(7, 3, 1, 3), (7, 3, 2, 6), (6, 3, 1, 2), (7, 10, 1, 1), (7, 1, 1, 7)],
)
def test_gradient_length_windows(kit, monkeypatch, steps, gradient_length, epochs, expected):
    env = kit.FakeEnv(num_envs=2)
    alg = kit.make_distillation(env.get_observations(), steps, gradient_length=gradient_length,
                                num_learning_epochs=epochs)
    calls = _count_steps(alg, monkeypatch)
    kit.collect(alg, env, steps, compute_returns=False)
    alg.update()
    assert len(calls) == expected


def test_last_partial_window_is_applied(kit, monkeypatch):
    """T=7, gradient_length=3: windows (0,1,2), (3,4,5), (6,) each give one step of their summed loss (rsl_rl's)."""
    env = kit.FakeEnv(num_envs=2)
    alg = kit.make_distillation(env.get_observations(), 7, gradient_length=3, learning_rate=1e-2,
                                teacher_kwargs={"init_gains": [1.0, 1.0]})
    kit.collect(alg, env, 7, compute_returns=False)
    grads = []
    original = alg.optimizer.step

    def step(*a, **k):
        grads.append([p.grad.clone() for p in alg.student.mlp.parameters()])
        return original(*a, **k)

    monkeypatch.setattr(alg.optimizer, "step", step)
    replay = copy.deepcopy(alg.student)
    st = alg.storage
    alg.update()
    assert len(grads) == 3
    opt = torch.optim.Adam(replay.parameters(), lr=1e-2)
    for window, window_grads in zip(((0, 1, 2), (3, 4, 5), (6,)), grads):
        opt.zero_grad()
        loss = sum(nn.functional.mse_loss(replay(st.observations[t]), st.privileged_actions[t]) for t in window)
        loss.backward()
        for g, p in zip(window_grads, replay.mlp.parameters()):
            torch.testing.assert_close(g, p.grad, atol=1e-6, rtol=1e-5)
        opt.step()
    for p, q in zip(replay.parameters(), alg.student.parameters()):
        torch.testing.assert_close(p, q, atol=1e-6, rtol=1e-5)


def test_gradient_length_must_be_positive(kit):
    with pytest.raises(ValueError, match="gradient_length"):
        kit.make_distillation(kit.make_obs(2), 3, gradient_length=0)


def test_learning_rate_schedule_sets_the_optimisers_rate_per_iteration(kit):
    alg = kit.make_distillation(kit.make_obs(2), 3, learning_rate=1e-3,
                                learning_rate_schedule=[[10, 1e-3], [20, 1e-4]])
    for iteration, expected in ((0, 1e-3), (10, 1e-3), (15, 5.5e-4), (20, 1e-4), (99, 1e-4), (5, 1e-3)):
        alg.set_iteration(iteration)
        assert [g["lr"] for g in alg.optimizer.param_groups] == pytest.approx([expected])
        assert alg.learning_rate == pytest.approx(expected)
    with pytest.raises(ValueError, match="learning_rate_schedule: iterations must increase"):
        kit.make_distillation(kit.make_obs(2), 3, learning_rate_schedule=[[20, 1e-3], [10, 1e-4]])


# ============================================================================ 14: loading a PPO checkpoint
def test_ppo_checkpoint_becomes_the_frozen_teacher(kit):
    env = kit.FakeEnv(num_envs=4)
    obs = env.get_observations()
    ppo = kit.make_ppo(obs, 4, actor_kwargs={"obs_normalization": True, "init_gains": [1.0, 1.0]})
    kit.collect(ppo, env, 4)
    ppo.update()  # moves weights and normaliser statistics away from their initial values
    ppo_state = ppo.save()
    checkpoint = {k: ppo_state[k] for k in ("actor_state_dict", "critic_state_dict")}

    groups = {"student": ["policy"], "teacher": ["policy"]}
    alg = kit.make_distillation(obs, 4, groups=groups, teacher_kwargs={"obs_normalization": True})
    assert alg.teacher.distribution is None
    assert not alg.teacher_loaded
    assert alg.load(checkpoint) is False  # the iteration counter is not restored
    assert alg.teacher_loaded
    teacher_state = alg.teacher.state_dict()
    for k, v in ppo.actor.state_dict().items():
        if k.startswith("distribution."):
            assert k not in teacher_state  # the PPO actor's std is dropped
        else:
            assert torch.equal(teacher_state[k], v), k
    assert teacher_state["obs_normalizer.count"].item() == 16
    assert all(not p.requires_grad for p in alg.teacher.parameters())
    with torch.no_grad():  # the teacher acts like the PPO policy's deterministic output
        torch.testing.assert_close(alg.teacher(obs), ppo.actor(obs))

    frozen = {k: v.clone() for k, v in alg.teacher.state_dict().items()}
    student_before = [p.detach().clone() for p in alg.student.parameters()]
    alg.train_mode()
    for _ in range(2):
        kit.collect(alg, env, 4, compute_returns=False)
        alg.update()
    for k, v in alg.teacher.state_dict().items():  # weights and normaliser statistics unchanged
        assert torch.equal(v, frozen[k]), k
    assert any(not torch.equal(b, p) for b, p in zip(student_before, alg.student.parameters()))
    assert {id(p) for g in alg.optimizer.param_groups for p in g["params"]} == {id(p) for p in alg.student.parameters()}


def test_distillation_checkpoint_round_trip(kit):
    env = kit.FakeEnv(num_envs=4)
    alg = kit.make_distillation(env.get_observations(), 4)
    kit.collect(alg, env, 4, compute_returns=False)
    alg.update()
    state = alg.save()
    torch.manual_seed(7)
    other = kit.make_distillation(env.get_observations(), 4)
    assert other.load(state) is True
    for a, b in ((alg.student, other.student), (alg.teacher, other.teacher)):
        for (k, v), (k2, v2) in zip(a.state_dict().items(), b.state_dict().items()):
            assert k == k2 and torch.equal(v, v2)
    assert len(other.optimizer.state_dict()["state"]) == len(alg.optimizer.state_dict()["state"]) > 0


def test_teacher_checkpoint_mismatch_names_the_difference(kit):
    obs = kit.make_obs(4)
    ppo = kit.make_ppo(obs, 2, actor_kwargs={"hidden_dims": [32]})
    alg = kit.make_distillation(obs, 2, groups=GROUPS_SAME)
    with pytest.raises(ValueError, match=r"teacher.*mlp\.0\.weight: checkpoint \(32, 5\) vs model \(16, 5\)"):
        alg.load({"actor_state_dict": ppo.actor.state_dict()})


# ============================================================================ 15: recurrent student
def _zero_state_after_dones(alg: Distillation, step: int, dones: torch.Tensor) -> None:
    for model in (alg.student, alg.teacher):  # finished episodes start from the zero state
        for h in _as_tuple(model.get_hidden_state()):
            assert (h[:, dones].abs().sum() == 0) and (h[:, ~dones].abs().sum(-1) > 0).all()


def _record_means(alg: Distillation, env, steps: int, check=_zero_state_after_dones):
    """Collect a rollout; return the student's mean action at every step [T, N, A] and its final hidden state.
    ``check(alg, step, dones)`` runs after each step."""
    obs = env.get_observations()
    means = []
    with torch.inference_mode():
        for t in range(steps):
            actions = alg.act(obs)
            means.append(alg.student.output_mean.clone())
            obs, rewards, dones, extras = env.step(actions)
            alg.process_env_step(obs, rewards, dones, extras)
            check(alg, t, dones)
    state = alg.student.get_hidden_state()
    state = tuple(s.clone() for s in state) if isinstance(state, tuple) else state.clone()
    return torch.stack(means), state


def _as_tuple(state):
    return state if isinstance(state, tuple) else (state,)


@pytest.mark.parametrize("rnn_type", ["gru", "lstm"])
@pytest.mark.parametrize("gradient_length", [6, 2])
def test_recurrent_student_replay_and_carried_state(kit, monkeypatch, rnn_type, gradient_length):
    steps, envs = 6, 4
    env = kit.FakeEnv(num_envs=envs, done_fn=kit.periodic_dones(envs, [2, 0, 3, 4]))
    alg = kit.make_distillation(env.get_observations(), steps, student_rnn=rnn_type, teacher_rnn="gru",
                                gradient_length=gradient_length, learning_rate=1e-2,
                                student_kwargs={"obs_normalization": True})
    for iteration in range(3):
        start_state = alg.student.get_hidden_state()
        means, end_state = _record_means(alg, env, steps)
        if iteration > 0:  # the rollout started from the state carried over the previous update
            for a, b in zip(_as_tuple(alg.rollout_start_states[0]), _as_tuple(start_state)):
                assert torch.equal(a, b)
            assert _as_tuple(start_state)[0].abs().sum() > 0
        replayed = []

        def hook(module, inputs, output, replayed=replayed):
            replayed.append(output.detach().clone())

        handle = alg.student.register_forward_hook(hook)
        calls = _count_steps(alg, monkeypatch)
        alg.update()
        handle.remove()
        assert len(calls) == math.ceil(steps / gradient_length)
        # before the first optimiser step the replay reproduces the rollout exactly (hidden state, dones, normaliser)
        torch.testing.assert_close(torch.stack(replayed[:gradient_length]), means[:gradient_length],
                                   atol=1e-5, rtol=1e-5)
        if gradient_length < steps:  # and afterwards the student has learnt something
            assert not torch.allclose(replayed[-1], means[-1], atol=1e-5)
        # after the update the student continues from the end-of-collection state
        for a, b in zip(_as_tuple(alg.student.get_hidden_state()), _as_tuple(end_state)):
            assert torch.equal(a, b)
            assert not a.requires_grad


@pytest.mark.parametrize("rnn_type", ["gru", "lstm"])
def test_env_groups_replay_each_group_from_its_own_start_state(kit, monkeypatch, rnn_type):
    """num_env_groups=2: each half of the envs is replayed on its own from its slice of the rollout's start state,
    with its own optimiser steps; with the optimiser frozen every group reproduces its rollout exactly."""
    steps, envs, gradient_length = 6, 4, 4
    env = kit.FakeEnv(num_envs=envs, done_fn=kit.periodic_dones(envs, [2, 0, 3, 4]))
    alg = kit.make_distillation(env.get_observations(), steps, student_rnn=rnn_type, teacher_rnn="gru",
                                gradient_length=gradient_length, num_env_groups=2,
                                student_kwargs={"obs_normalization": True})
    _record_means(alg, env, steps)
    alg.update()  # the second rollout starts from a carried, non-zero state
    means, end_state = _record_means(alg, env, steps)
    assert _as_tuple(alg.rollout_start_states[0])[0].abs().sum() > 0
    replayed = []
    handle = alg.student.register_forward_hook(lambda m, i, o: replayed.append(o.detach().clone()))
    calls = _count_steps(alg, monkeypatch)
    monkeypatch.setattr(alg.optimizer, "step", lambda *a, **k: calls.append(1))
    st = alg.storage
    with torch.no_grad():
        expected = (means - st.privileged_actions).square().mean()
    loss = alg.update()["behavior"]
    handle.remove()
    assert len(calls) == 2 * math.ceil(steps / gradient_length)
    assert [r.shape[0] for r in replayed] == [2] * (2 * steps)  # two envs per step
    torch.testing.assert_close(torch.stack(replayed[:steps]), means[:, :2], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(torch.stack(replayed[steps:]), means[:, 2:], atol=1e-5, rtol=1e-5)
    assert loss == pytest.approx(expected.item(), rel=1e-5)
    for a, b in zip(_as_tuple(alg.student.get_hidden_state()), _as_tuple(end_state)):  # all envs continue
        assert torch.equal(a, b)


def test_env_groups_take_more_steps_and_the_student_learns(kit):
    env = kit.FakeEnv(num_envs=16)
    held_out = kit.make_obs(256)
    finals = {}
    for groups in (1, 4):
        torch.manual_seed(0)
        alg = kit.make_distillation(env.get_observations(), 8, groups=GROUPS_SAME, learning_rate=3e-3,
                                    gradient_length=8, num_env_groups=groups, student_kwargs={"hidden_dims": [32]},
                                    teacher_kwargs={"hidden_dims": [16], "init_gains": [1.0, 1.0]})
        initial = _mse_to_teacher(alg, held_out)
        for _ in range(15):
            kit.collect(alg, env, 8, compute_returns=False)
            alg.update()
        finals[groups] = _mse_to_teacher(alg, held_out) / initial
    assert finals[4] < 0.5 * finals[1], finals
    print(finals)  # four times the optimiser steps on the same data


def test_env_groups_must_divide_the_envs(kit):
    with pytest.raises(ValueError, match=r"num_env_groups \(3\) must be >= 1 and divide the number of environments \(4\)"):
        kit.make_distillation(kit.make_obs(4), 2, num_env_groups=3)


@pytest.mark.parametrize("groups", [1, 2])
def test_start_weight_weights_the_first_steps_after_a_reset(kit, monkeypatch, groups):
    """start_weight=4, start_steps=2: an env's loss counts 4 times in its first 2 steps after a reset. Ages are
    hand-computed from the done pattern (env i done every periods[i] steps: age at global step s is s % period);
    the second rollout starts mid-episode, so the ages carried across the update are checked too."""
    steps, envs, periods = 6, 4, [2, 0, 3, 4]
    env = kit.FakeEnv(num_envs=envs, done_fn=kit.periodic_dones(envs, periods))
    alg = kit.make_distillation(env.get_observations(), steps, student_rnn="gru", teacher_rnn="gru",
                                gradient_length=steps, num_env_groups=groups, start_weight=4.0, start_steps=2)
    _record_means(alg, env, steps)
    alg.update()
    means, _ = _record_means(alg, env, steps)  # global steps 6..11
    monkeypatch.setattr(alg.optimizer, "step", lambda *a, **k: None)  # the replay then equals the rollout
    ages = torch.tensor([[s % p if p else s for p in periods] for s in range(steps, 2 * steps)])  # [T, N]
    assert torch.equal(alg.rollout_start_steps, ages[0])
    weights = torch.where(ages < 2, 4.0, 1.0)
    with torch.no_grad():
        per_env = (means - alg.storage.privileged_actions).square().mean(-1)  # [T, N]
    expected = torch.stack([(weights[:, g] * per_env[:, g]).sum(1) / weights[:, g].sum(1)
                            for g in torch.arange(envs).chunk(groups)]).mean()
    unweighted = per_env.mean()
    loss = alg.update()["behavior"]
    assert loss == pytest.approx(expected.item(), rel=1e-5)
    assert abs(expected.item() - unweighted.item()) > 1e-3 * unweighted.item()  # the weights do change the loss


def test_start_weight_must_be_positive(kit):
    with pytest.raises(ValueError, match=r"start_weight \(0.0\) must be > 0 and start_steps \(50\) >= 1"):
        kit.make_distillation(kit.make_obs(4), 2, start_weight=0.0)


# ============================================================================ 15: configuration errors
def test_extensions_are_refused(kit):
    obs = kit.make_obs(2)
    with pytest.raises(ValueError, match="RND"):
        kit.make_distillation(obs, 2, rnd_cfg={"weight": 1.0})
    with pytest.raises(ValueError, match="symmetry"):
        kit.make_distillation(obs, 2, symmetry_cfg={"use_data_augmentation": True})


@pytest.mark.parametrize("ext, word", [("rnd_cfg", "RND"), ("symmetry_cfg", "symmetry")])
def test_factory_refuses_extensions(kit, ext, word):
    env = kit.FakeEnv(num_envs=2)
    cfg = _distillation_cfg()
    cfg["algorithm"][ext] = {"weight": 1.0}
    with pytest.raises(ValueError, match=rf"Distillation does not support the {word} extension \({ext} is set\)"):
        construct_algorithm(env.get_observations(), env, cfg, "cpu")
    cfg["algorithm"][ext] = None  # explicitly disabled is fine
    assert isinstance(construct_algorithm(env.get_observations(), env, cfg, "cpu"), Distillation)


def test_unknown_loss_type_lists_valid_ones(kit):
    with pytest.raises(ValueError, match=r"loss_type 'l1'.*mse, huber"):
        kit.make_distillation(kit.make_obs(2), 2, loss_type="l1")


def test_deterministic_student_acts_with_its_output_and_learns(kit):
    """A student without distribution_cfg (as rsl_rl allows) acts with its plain output, no noise, and learns."""
    env = kit.FakeEnv(num_envs=8)
    groups = {"student": ["policy"], "teacher": ["policy"]}
    alg = kit.make_distillation(env.get_observations(), 4, groups=groups, learning_rate=3e-3,
                                student_kwargs={"hidden_dims": [32], "distribution_cfg": None},
                                teacher_kwargs={"init_gains": [1.0, 1.0]})
    assert alg.student.distribution is None
    obs = env.get_observations()
    with torch.inference_mode():
        torch.testing.assert_close(alg.act(obs), alg.student(obs), rtol=0, atol=0)  # exactly the output
    alg.storage.clear()
    alg.transition.clear()
    held_out = kit.make_obs(128)
    initial = _mse_to_teacher(alg, held_out)
    for _ in range(20):
        kit.collect(alg, env, 4, compute_returns=False)
        alg.update()
    assert _mse_to_teacher(alg, held_out) < 0.2 * initial


def test_teacher_with_zero_init_std_is_built_and_acts_like_the_ppo_actor(kit):
    """rsl_rl configs give the teacher a distribution with init_std 0 (never sampled): accepted; after loading
    the PPO actor the teacher's output is the actor's deterministic output."""
    env = kit.FakeEnv(num_envs=4)
    obs = env.get_observations()
    ppo = kit.make_ppo(obs, 4, actor_kwargs={"init_gains": [1.0, 1.0]})
    cfg = _distillation_cfg()
    cfg["obs_groups"] = {"student": ["policy"], "teacher": ["policy"]}
    cfg["teacher"] = {"class_name": "MLPModel", "hidden_dims": [16], "init_gains": [1.0, 1.0],
                      "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 0.0}}
    alg = construct_algorithm(obs, env, cfg, "cpu")
    assert cfg["teacher"]["distribution_cfg"]["init_std"] == 0.0  # the caller's config is left as given
    assert cfg["obs_groups"] == {"student": ["policy"], "teacher": ["policy"]}
    assert alg.load({"actor_state_dict": ppo.actor.state_dict()}) is False and alg.teacher_loaded
    torch.testing.assert_close(alg.teacher.distribution.std_param, ppo.actor.distribution.std_param)
    with torch.no_grad():
        torch.testing.assert_close(alg.teacher(obs), ppo.actor(obs))


def _distillation_cfg() -> dict:
    return {
        "num_steps_per_env": 3,
        "obs_groups": {"student": ["policy"], "teacher": ["policy", "privileged"]},
        "student": {"class_name": "RNNModel", "hidden_dims": [8], "rnn_type": "gru", "rnn_hidden_dim": 8,
                    "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0}},
        "teacher": {"class_name": "MLPModel", "hidden_dims": [8]},
        "algorithm": {"class_name": "Distillation", "gradient_length": 2, "num_learning_epochs": 1},
    }


def test_factory_builds_distillation(kit):
    env = kit.FakeEnv(num_envs=2)
    alg = construct_algorithm(env.get_observations(), env, _distillation_cfg(), "cpu")
    assert isinstance(alg, Distillation)
    assert alg.student.obs_groups == ["policy"] and alg.teacher.obs_groups == ["policy", "privileged"]
    assert alg.student.is_recurrent and alg.gradient_length == 2
    assert alg.storage.training_type == "distillation" and alg.storage.num_transitions_per_env == 3
    kit.collect(alg, env, 3, compute_returns=False)
    out = alg.update()
    assert set(out) == {"behavior", "learning_rate"} and math.isfinite(out["behavior"])


# ============================================================================ a student's state estimator
class _EchoEnv:
    """FakeEnv whose ``privileged`` group is the previous step's ``policy`` frame: only a memory can estimate it."""

    @staticmethod
    def make(kit, num_envs: int):
        env = kit.FakeEnv(num_envs=num_envs, shapes={"policy": (3,), "privileged": (3,)})
        step = env.step

        def echo_step(actions):
            previous = env.obs["policy"].clone()
            obs, rewards, dones, extras = step(actions)
            obs["privileged"] = previous
            return obs, rewards, dones, extras

        env.step = echo_step
        return env


@pytest.mark.slow
def test_a_students_estimator_is_trained_by_distillation_and_reported(kit, monkeypatch):
    """A recurrent student with ``estimator_cfg`` regresses its target group through its memory: the reported
    ``estimator`` loss is the mean MSE of its estimates (checked with a frozen optimiser), and it falls from about
    the target's variance (1) to under a tenth of it (about 0.01 after 100 updates)."""
    env = _EchoEnv.make(kit, 16)
    obs = env.get_observations()
    groups = {"student": ["policy"], "teacher": ["policy"]}
    alg = kit.make_distillation(obs, 8, groups=groups, student_rnn="gru", learning_rate=1e-2, gradient_length=4,
                                student_kwargs={"estimator_cfg": {"target_groups": ["privileged"],
                                                                  "hidden_dims": [32]}},
                                teacher_kwargs={"init_gains": [1.0, 1.0]})
    kit.collect(alg, env, 8, compute_returns=False)
    st = alg.storage
    alg.student.reset(hidden_state=alg.rollout_start_states[0])
    with torch.no_grad():  # the replay the update makes: one step at a time through the memory
        estimates = []
        for t in range(8):
            alg.student(st.observations[t])
            estimates.append(alg.student.last_estimate)
            alg.student.reset(st.dones[t].reshape(-1).bool())
    expected = (torch.stack(estimates) - st.observations["privileged"]).square().mean(dim=(1, 2)).mean()
    monkeypatch.setattr(alg.optimizer, "step", lambda *a, **k: None)
    first = alg.update()
    assert first["estimator"] == pytest.approx(expected.item(), rel=1e-5) and "behavior" in first
    monkeypatch.undo()  # the optimiser steps again
    losses = []
    for _ in range(100):
        kit.collect(alg, env, 8, compute_returns=False)
        losses.append(alg.update()["estimator"])
    assert first["estimator"] > 0.5  # the echoed frame is unit-variance noise
    assert sum(losses[-5:]) / 5 < 0.1 * first["estimator"], (first["estimator"], losses[-5:])


@pytest.mark.parametrize("rnn_type", ["gru", "lstm"])
def test_forget_prob_clears_the_student_memory_and_the_update_replays_the_clears(kit, monkeypatch, rnn_type):
    """forget_prob=0.25, no episode ends: after each step the student's memory is zero exactly where a clear was drawn
    (stored as a done), never the teacher's; about a quarter of the steps clear it; with the optimiser frozen the
    replay reproduces the rollout's mean actions, which it would not if it ignored the clears."""
    steps, envs = 12, 16
    env = kit.FakeEnv(num_envs=envs)
    torch.manual_seed(3)
    alg = kit.make_distillation(env.get_observations(), steps, student_rnn=rnn_type, teacher_rnn="gru",
                                gradient_length=steps, forget_prob=0.25)

    def check(alg, t, dones):
        assert not dones.any()
        cleared = alg.storage.dones[t, :, 0].bool()
        for h in _as_tuple(alg.student.get_hidden_state()):
            assert torch.equal(h.abs().sum(dim=(0, 2)) == 0, cleared)
        assert (alg.teacher.get_hidden_state().abs().sum(dim=(0, 2)) > 0).all()
        assert torch.equal(alg.episode_steps == 0, cleared)

    means, _ = _record_means(alg, env, steps, check)
    share = alg.storage.dones.mean().item()
    assert 0.15 < share < 0.35, share  # 192 draws of p = 0.25
    replayed = []
    handle = alg.student.register_forward_hook(lambda m, i, o: replayed.append(o.detach().clone()))
    monkeypatch.setattr(alg.optimizer, "step", lambda *a, **k: None)
    alg.update()
    handle.remove()
    torch.testing.assert_close(torch.stack(replayed), means, atol=1e-5, rtol=1e-5)
    # the same replay without the clears (memory carried through): different actions after the first clear
    alg_free = kit.make_distillation(env.get_observations(), steps, student_rnn=rnn_type, teacher_rnn="gru")
    alg_free.student.load_state_dict(alg.student.state_dict())
    alg_free.student.reset(hidden_state=alg.rollout_start_states[0])
    with torch.no_grad():
        free = torch.stack([alg_free.student(alg.storage.observations[t]) for t in range(steps)])
    assert not torch.allclose(free, means, atol=1e-3)


def test_forget_prob_must_be_a_probability(kit):
    with pytest.raises(ValueError, match=r"forget_prob \(1.0\) must be in \[0, 1\)"):
        kit.make_distillation(kit.make_obs(4), 2, forget_prob=1.0)
