"""The OnPolicyRunner's loop (and the DistillationRunner's): NaN checks, logging, episode statistics,
normaliser warm-up, random initial episode lengths, export and distillation from a PPO checkpoint.

Everything runs on CPU on the classic tasks with 64 envs, 16-unit MLPs and 8-step rollouts.
"""

from __future__ import annotations

import glob
import math
import os
import time

import pytest
import torch
from runner_helpers import GAUSSIAN, NUM_ENVS, base_cfg, make_env

from rlcore.logging.logger import EpisodeStats
from rlcore.runners import DistillationRunner, OnPolicyRunner

T = 8  # num_steps_per_env of base_cfg


class StepWrapper:
    """Delegates everything to ``env``; ``hook(call_index, obs, rewards)`` may modify what ``step`` returns."""

    def __init__(self, env, hook):
        self.__dict__["env"] = env
        self.__dict__["hook"] = hook
        self.__dict__["calls"] = 0

    def __getattr__(self, name):
        return getattr(self.env, name)

    def __setattr__(self, name, value):  # e.g. the runner's episode_length_buf randomisation
        setattr(self.env, name, value)

    def step(self, actions):
        obs, rewards, dones, extras = self.env.step(actions)
        self.__dict__["calls"] += 1
        obs, rewards = self.hook(self.calls, obs.clone(), rewards.clone())
        return obs, rewards, dones, extras


def record_losses(runner) -> list[dict]:
    """Wrap ``runner.alg.update`` so that every iteration's loss dict is kept."""
    out = []
    update = runner.alg.update

    def wrapped():
        losses = update()
        out.append(losses)
        return losses

    runner.alg.update = wrapped
    return out


# ---------------------------------------------------------------------------- NaN check
@pytest.mark.parametrize(
    "where, at_call",
    [("critic", T + 5), ("critic", 3), ("rewards", T + 2)],
    ids=["critic_in_rollout", "critic_in_warmup", "rewards_in_rollout"],
)
def test_nan_from_the_env_is_reported_by_group(where, at_call):
    def hook(call, obs, rewards):
        if call == at_call:
            if where == "rewards":
                rewards[7] = float("nan")
            else:
                obs[where][5, 1] = float("nan")
        return obs, rewards

    env = StepWrapper(make_env(), hook)
    runner = OnPolicyRunner(env, base_cfg(), None)  # warm-up: T steps, then the first rollout
    weights_before = {k: v.clone() for k, v in runner.alg.actor.mlp.state_dict().items()}
    with pytest.raises(FloatingPointError) as info:
        runner.learn(3)
    msg = str(info.value)
    assert where in msg
    assert all(other not in msg for other in {"policy", "critic", "rewards"} - {where})
    assert env.calls == (T if at_call <= T else 2 * T)  # checked once at the end of the warm-up / rollout
    assert runner.current_learning_iteration == 0  # raised within the first rollout, before any update
    for k, v in runner.alg.actor.mlp.state_dict().items():
        assert torch.equal(v, weights_before[k]), k
    for model in (runner.alg.actor, runner.alg.critic):  # the NaN never reached the normaliser statistics
        norm = model.obs_normalizer
        assert torch.isfinite(norm.mean).all() and torch.isfinite(norm.var).all()
        assert int(norm.count) == (0 if at_call <= T else (T + 1) * NUM_ENVS)  # warm-up NaN: nothing merged


# ---------------------------------------------------------------------------- logging
def test_tensorboard_logs_episode_and_loss_scalars(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    env = make_env(max_episode_length=T)  # warm-up and every rollout end with all envs timing out
    runner = OnPolicyRunner(env, base_cfg(logger="tensorboard"), str(tmp_path))
    losses = record_losses(runner)
    runner.learn(2)
    runner.close()
    events = glob.glob(str(tmp_path / "events.out.tfevents*"))
    assert len(events) == 1
    acc = EventAccumulator(str(tmp_path))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"Episode/mean_return", "Episode/mean_length", "Loss/value", "Loss/surrogate", "Loss/learning_rate",
            "Perf/steps_per_s"} <= tags
    value = acc.Scalars("Loss/value")
    assert [e.step for e in value] == [0, 1]
    assert [e.value for e in value] == pytest.approx([ls["value"] for ls in losses], rel=1e-6)
    # Every env finished exactly one T-step episode in the 2nd rollout: the logged mean return is the
    # mean of the env's own record of those episodes, and the mean length is T.
    ret = acc.Scalars("Episode/mean_return")[-1]
    assert ret.step == 1 and ret.value == pytest.approx(env._last_return.mean().item(), rel=1e-5)
    assert acc.Scalars("Episode/mean_length")[-1].value == T
    assert "Env/episode_return_mean" in tags  # the env's extras["log"] is forwarded


@pytest.mark.slow
def test_wandb_offline_run_has_the_loss_history(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    for key, sub in [("WANDB_DIR", "wandb_dir"), ("WANDB_CONFIG_DIR", "wandb_config"),
                     ("WANDB_CACHE_DIR", "wandb_cache"), ("WANDB_DATA_DIR", "wandb_data")]:
        (tmp_path / sub).mkdir()
        monkeypatch.setenv(key, str(tmp_path / sub))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    log_dir = tmp_path / "run"
    runner = OnPolicyRunner(make_env(max_episode_length=T), base_cfg(logger="wandb"), str(log_dir))
    runner.learn(1)  # wandb's offline init takes a few seconds; one iteration is enough
    runner.close()
    runs = glob.glob(str(log_dir / "wandb" / "offline-run-*"))
    assert len(runs) == 1 and os.path.isdir(runs[0])
    records = glob.glob(os.path.join(runs[0], "*.wandb"))
    assert len(records) == 1
    # wandb 0.31's background writer may append the records ~0.1 s after finish() returned: poll briefly.
    deadline = time.monotonic() + 15.0
    while b"Loss/value" not in (data := open(records[0], "rb").read()) and time.monotonic() < deadline:
        time.sleep(0.05)
    # Episode/mean_return needs a full episode (none ends in the first iteration); the per-step reward is always there.
    assert b"Loss/value" in data and b"Episode/mean_reward_per_step" in data


def test_unknown_logger_is_refused(tmp_path):
    runner = OnPolicyRunner(make_env(num_envs=4), base_cfg(logger="tensorbored"), str(tmp_path))
    with pytest.raises(ValueError, match="tensorbored"):
        runner.learn(1)


# ---------------------------------------------------------------------------- episode statistics
def test_episode_stats_exact_means_of_finished_episodes():
    stats = EpisodeStats(3, "cpu")
    seq = [  # rewards, dones
        ([1.0, 2.0, 3.0], [0, 0, 1]),  # env 2 finishes: return 3, length 1
        ([1.0, 1.0, 1.0], [1, 0, 0]),  # env 0 finishes: return 2, length 2
        ([2.0, 0.0, 5.0], [0, 0, 1]),  # env 2 finishes: return 1 + 5, length 2
    ]
    for i, (r, d) in enumerate(seq):
        logs = {"/a": torch.tensor([2.0 * i, 2.0 * i]), "b": 3.0, "/maybe": float("nan") if i < 2 else 4.0}
        stats.step(torch.tensor(r), torch.tensor(d, dtype=torch.bool), {"log": logs})
    out = stats.collect()
    assert out["Episode/mean_return"] == pytest.approx((3.0 + 2.0 + 6.0) / 3.0)
    assert out["Episode/mean_length"] == pytest.approx(5.0 / 3.0)
    assert out["Episode/finished"] == 3
    assert out["Env/a"] == pytest.approx(2.0) and out["Env/b"] == pytest.approx(3.0)
    assert out["Env/maybe"] == pytest.approx(4.0)  # NaN steps (nothing to report yet) are not averaged in as 0

    # New window: episodes carry over the window boundary (env 1 has run 4 steps).
    stats.step(torch.tensor([1.0, 1.0, 1.0]), torch.tensor([True, True, False]), {})
    out = stats.collect()
    assert out["Episode/mean_return"] == pytest.approx((3.0 + 4.0) / 2.0)  # env 0: 2 + 1, env 1: 2 + 1 + 0 + 1
    assert out["Episode/mean_length"] == pytest.approx((2.0 + 4.0) / 2.0)
    assert out["Episode/finished"] == 2 and not any(k.startswith("Env/") for k in out)

    # A window without finished episodes repeats the last means and reports 0 finished.
    stats.step(torch.tensor([1.0, 1.0, 1.0]), torch.tensor([False, False, False]), {"log": {"/x": float("nan")}})
    out = stats.collect()
    assert out["Episode/finished"] == 0 and out["Episode/mean_return"] == pytest.approx(3.5)
    assert math.isnan(out["Env/x"])  # only NaN seen: NaN, which the writers drop


def test_logger_keeps_rsl_rls_episode_buffers():
    """runner.logger.rewbuffer / lenbuffer: returns and lengths of the finished episodes in order (last 100)."""
    from rlcore.logging.logger import Logger

    logger = Logger(None, {"num_steps_per_env": 3}, {}, 3, False, 1, 0, "cpu")
    for r, d in [([1.0, 2.0, 3.0], [0, 0, 1]), ([1.0, 1.0, 1.0], [1, 0, 0]), ([2.0, 0.0, 5.0], [0, 0, 1])]:
        logger.process_env_step(torch.tensor(r), torch.tensor(d, dtype=torch.bool), {"log": {"/a": 1.0}})
    assert logger.cur_reward_sum.tolist() == [2.0, 3.0, 0.0] and logger.cur_episode_length.tolist() == [1, 3, 0]
    assert len(logger.ep_extras) == 3
    ep = logger.log(0, 0, 1, 0.1, 0.1, {"value": 1.0}, 1e-3, None, None)
    assert list(logger.rewbuffer) == [3.0, 2.0, 6.0] and list(logger.lenbuffer) == [1.0, 2.0, 2.0]
    # rsl_rl's buffers hold every finished episode; the logged mean only the full ones (env 2's second: 1 + 5).
    assert ep["Episode/mean_return"] == pytest.approx(6.0) and ep["Episode/finished_partial"] == 2
    assert logger.ep_extras == []
    assert logger.tot_timesteps == 9 and logger.writer is None


def _actor_weights(caller_seed: int, **cfg_keys) -> torch.Tensor:
    torch.manual_seed(caller_seed)
    cfg = base_cfg(**cfg_keys)
    if "seed" not in cfg_keys:
        del cfg["seed"]
    runner = OnPolicyRunner(make_env(), cfg, None)
    return torch.cat([p.detach().flatten() for p in runner.alg.actor.parameters()])


def test_runner_seeds_only_when_the_config_gives_a_seed():
    """Like rsl_rl's runner, a config without a seed leaves the caller's seeding alone; a seed makes it win."""
    assert torch.equal(_actor_weights(1), _actor_weights(1))
    assert not torch.equal(_actor_weights(1), _actor_weights(2))  # the caller's seed decides
    assert not torch.equal(_actor_weights(1, seed=None), _actor_weights(2, seed=None))
    assert torch.equal(_actor_weights(1, seed=3), _actor_weights(2, seed=3))  # the config's seed decides


# ---------------------------------------------------------------------------- normaliser warm-up
@pytest.mark.parametrize("warmup", [None, 0, 3])
def test_normalizer_warm_up_seeds_the_statistics_before_the_first_rollout(warmup):
    env = StepWrapper(make_env(), lambda call, obs, rewards: (obs, rewards))
    runner = OnPolicyRunner(env, base_cfg(normalizer_warmup_steps=warmup), None)
    w = T if warmup is None else warmup  # None: one rollout length
    seeded = (w + 1) * NUM_ENVS if w > 0 else 0  # the initial observation plus one per warm-up step
    at_first_act = []
    act = runner.alg.act

    def recording_act(obs):
        if not at_first_act:
            counts = (runner.alg.actor.obs_normalizer.count, runner.alg.critic.obs_normalizer.count)
            at_first_act.append(tuple(int(c) for c in counts))
        return act(obs)

    runner.alg.act = recording_act
    runner.learn(1)
    assert at_first_act == [(seeded, seeded)]
    assert int(runner.alg.actor.obs_normalizer.count) == seeded + T * NUM_ENVS
    assert int(runner.alg.critic.obs_normalizer.count) == seeded + T * NUM_ENVS
    assert env.calls == w + T
    runner.learn(1)  # no second warm-up
    assert int(runner.alg.actor.obs_normalizer.count) == seeded + 2 * T * NUM_ENVS and env.calls == w + 2 * T


def test_warm_up_statistics_match_the_observations_seen():
    seen = []

    def hook(call, obs, rewards):
        seen.append(obs["policy"].clone())
        return obs, rewards

    env = StepWrapper(make_env(), hook)
    runner = OnPolicyRunner(env, base_cfg(normalizer_warmup_steps=4), None)
    first = env.get_observations()["policy"].clone()
    runner.alg.update = dict  # stop after the first rollout: only the warm-up has been merged
    runner.alg.compute_returns = lambda obs: None
    runner.learn(1)
    warm = torch.cat([first] + seen[:4]).double()
    norm = runner.alg.actor.obs_normalizer
    assert torch.allclose(norm.mean.double().squeeze(0), warm.mean(0), atol=1e-5)
    assert torch.allclose(norm.var.double().squeeze(0), warm.var(0, unbiased=False), atol=1e-5)


# ---------------------------------------------------------------------------- random initial episode lengths
@pytest.mark.parametrize("randomise", [True, False])
def test_init_at_random_ep_len(randomise):
    first_step_lengths = []
    env = make_env(max_episode_length=200)
    real_step = env.step

    def step(actions):
        if not first_step_lengths:
            first_step_lengths.append(env.episode_length_buf.clone())
        return real_step(actions)

    env.step = step
    runner = OnPolicyRunner(env, base_cfg(), None)
    runner.learn(1, init_at_random_ep_len=randomise)
    lengths = first_step_lengths[0]
    if randomise:
        assert lengths.dtype == torch.long and lengths.shape == (NUM_ENVS,)
        assert int(lengths.min()) >= 0 and int(lengths.max()) < 200
        assert len(set(lengths.tolist())) > NUM_ENVS // 4  # spread out, not one shared value
    else:
        assert int(lengths.abs().max()) == 0
    # A second learn() continues the episodes instead of re-randomising them.
    before = env.episode_length_buf.clone()
    first_step_lengths.clear()
    runner.learn(1, init_at_random_ep_len=True)
    assert torch.equal(first_step_lengths[0], before)


# ---------------------------------------------------------------------------- export
def test_exported_policies_match_the_inference_policy(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    env = make_env()
    runner = OnPolicyRunner(env, base_cfg(), None)
    runner.learn(1)  # trained weights and non-trivial normaliser statistics
    obs = env.get_observations()
    expected = runner.get_inference_policy()(obs)
    assert expected.shape == (NUM_ENVS, 1)
    assert torch.equal(expected, runner.get_inference_policy()(obs))  # deterministic

    onnx_path = runner.export_policy_to_onnx(str(tmp_path / "exported"))
    assert onnx_path == str(tmp_path / "exported" / "policy.onnx") and os.path.isfile(onnx_path)
    session = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    (got,) = session.run(["actions"], {"obs": obs["policy"].numpy()})
    assert torch.allclose(torch.from_numpy(got), expected, atol=1e-5)

    jit_path = runner.export_policy_to_jit(str(tmp_path / "exported"), "actor.pt")
    assert jit_path == str(tmp_path / "exported" / "actor.pt")
    jit_policy = torch.jit.load(jit_path)
    assert torch.allclose(jit_policy(obs["policy"]), expected, atol=1e-5)
    # The comparison can fail: an untrained policy acts differently on the same observations.
    fresh = OnPolicyRunner(make_env(), base_cfg(seed=99), None)
    assert not torch.allclose(fresh.get_inference_policy()(obs), expected, atol=1e-3)


# ---------------------------------------------------------------------------- distillation
def distill_cfg(**teacher_keys) -> dict:
    teacher = {"class_name": "MLPModel", "hidden_dims": [16, 16], "obs_normalization": True}
    teacher.update(teacher_keys)
    return {
        "seed": 5,
        "num_steps_per_env": T,
        "logger": "none",
        "save_interval": 1000,
        "obs_groups": {"student": ["policy"], "teacher": ["policy"]},
        "student": {"class_name": "MLPModel", "hidden_dims": [32, 32], "obs_normalization": True,
                    "distribution_cfg": dict(GAUSSIAN)},
        "teacher": teacher,
        "algorithm": {"class_name": "Distillation", "num_learning_epochs": 2, "gradient_length": 4,
                      "learning_rate": 3e-3},
    }


@pytest.fixture(scope="module")
def ppo_run(tmp_path_factory):
    """An OnPolicyRunner's PPO checkpoint on the pendulum (2 iterations), and that runner's actor state."""
    d = tmp_path_factory.mktemp("ppo_teacher")
    runner = OnPolicyRunner(make_env(), base_cfg(), str(d))
    runner.learn(2)
    return str(d / "model_1.pt"), {k: v.clone() for k, v in runner.alg.actor.state_dict().items()}


def test_distillation_needs_a_teacher():
    runner = DistillationRunner(make_env(), distill_cfg(), None)
    with pytest.raises(ValueError, match="teacher"):
        runner.learn(1)
    assert runner.current_learning_iteration == 0


def test_distillation_from_a_ppo_checkpoint_learns(ppo_run, tmp_path):
    ckpt, actor_state = ppo_run
    env = make_env(seed=4)
    runner = DistillationRunner(env, distill_cfg(), str(tmp_path))
    runner.load(ckpt)
    assert runner.current_learning_iteration == 0  # a teacher load is not a resume
    teacher = runner.alg.teacher.state_dict()
    for k, v in teacher.items():  # the PPO actor's weights and normaliser, without its distribution
        assert torch.equal(v, actor_state[k]), k
    assert not any(k.startswith("distribution.") for k in teacher)

    losses = record_losses(runner)
    runner.learn(2)
    assert runner.current_learning_iteration == 1 and os.path.isfile(tmp_path / "model_1.pt")
    runner.learn(4)
    behavior = [ls["behavior"] for ls in losses]
    assert len(behavior) == 6 and all(math.isfinite(b) for b in behavior)
    assert behavior[-1] < 0.5 * behavior[0], behavior
    for k, v in runner.alg.teacher.state_dict().items():  # the teacher stays frozen, statistics included
        assert torch.equal(v, actor_state[k]), k

    # The student imitates the teacher: closer to it than a fresh student.
    obs = env.get_observations()
    with torch.no_grad():
        target = runner.alg.teacher(obs)
        trained = (runner.get_inference_policy()(obs) - target).square().mean()
        fresh = DistillationRunner(make_env(), distill_cfg(), None)
        untrained = (fresh.get_inference_policy()(obs) - target).square().mean()
    assert trained < 0.5 * untrained


def test_distillation_checkpoint_resumes_student_and_teacher(ppo_run, tmp_path):
    ckpt, actor_state = ppo_run
    runner = DistillationRunner(make_env(), distill_cfg(), str(tmp_path))
    runner.load(ckpt)
    runner.learn(1)
    resumed = DistillationRunner(make_env(seed=8), distill_cfg(), None)
    resumed.load(str(tmp_path / "model_0.pt"))
    assert resumed.current_learning_iteration == 0
    for name in ("student", "teacher"):
        for k, v in getattr(runner.alg, name).state_dict().items():
            assert torch.equal(getattr(resumed.alg, name).state_dict()[k], v), f"{name}.{k}"
    resumed.learn(1)  # the teacher came with the checkpoint; the numbering continues after iteration 0
    assert resumed.current_learning_iteration == 1


def test_teacher_config_must_match_the_ppo_actor(ppo_run):
    ckpt, _ = ppo_run
    runner = DistillationRunner(make_env(), distill_cfg(hidden_dims=[32, 32]), None)
    with pytest.raises(ValueError, match="teacher") as info:
        runner.load(ckpt)
    assert "\n" not in str(info.value)
    assert not runner.alg.teacher_loaded


@pytest.mark.parametrize(("change", "named"), [
    ({"hidden_dims": [32, 16]}, "actor.hidden_dims: checkpoint [16, 16] vs config [32, 16]"),
    ({"activation": "tanh"}, "actor.activation: checkpoint 'elu' vs config 'tanh'"),
    ({"class_name": "RNNModel"}, "actor.class_name: checkpoint 'MLPModel' vs config 'RNNModel'"),
    ({"distribution_cfg": {"class_name": "BetaDistribution"}},
     "actor.distribution_cfg.class_name: checkpoint 'GaussianDistribution' vs config 'BetaDistribution'"),
])
def test_load_refuses_a_checkpoint_of_another_actor_naming_the_setting(ppo_run, change, named):
    """The runner's own check (the same comparison as ``rlcore.train resume=``'s): one line naming what differs."""
    ckpt, _ = ppo_run
    cfg = base_cfg()
    cfg["actor"].update(change)
    runner = OnPolicyRunner(make_env(), cfg, None)
    before = {k: v.clone() for k, v in runner.alg.actor.state_dict().items()}
    with pytest.raises(ValueError, match="different model") as info:
        runner.load(ckpt)
    assert named in str(info.value) and "\n" not in str(info.value)
    assert all(torch.equal(v, runner.alg.actor.state_dict()[k]) for k, v in before.items())  # nothing loaded
