"""Checkpoints of the OnPolicyRunner: exact resume, file contents, atomic writes, compatibility, Ctrl-C.

Everything runs on CPU on the pendulum with 64 envs, 16-unit MLPs and 8-step rollouts.
"""

from __future__ import annotations

import os

import pytest
import torch
from runner_helpers import NUM_ENVS, base_cfg, make_env

from rlcore.checkpoint.io import find_checkpoint, save_atomic
from rlcore.runners import OnPolicyRunner

CKPT_KEYS = {"actor_state_dict", "critic_state_dict", "optimizer_state_dict", "iter", "infos", "rng_states",
             "learning_rate", "train_cfg", "env_state"}


def snapshot(runner: OnPolicyRunner) -> dict:
    """Deep copy of everything training changes: weights, normalisers, optimiser state, learning rate."""
    alg = runner.alg
    opt = alg.optimizer.state_dict()
    return {
        "actor": {k: v.clone() for k, v in alg.actor.state_dict().items()},
        "critic": {k: v.clone() for k, v in alg.critic.state_dict().items()},
        "opt_state": {i: {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in s.items()}
                      for i, s in opt["state"].items()},
        "opt_groups": [{k: v for k, v in g.items() if k != "params"} for g in opt["param_groups"]],
        "lr": alg.learning_rate,
    }


def assert_bit_identical(a: dict, b: dict) -> None:
    for part in ("actor", "critic"):
        assert a[part].keys() == b[part].keys()
        for k in a[part]:
            assert torch.equal(a[part][k], b[part][k]), f"{part}.{k} differs"
    assert a["opt_state"].keys() == b["opt_state"].keys() and len(a["opt_state"]) > 0
    for i in a["opt_state"]:
        assert a["opt_state"][i].keys() == b["opt_state"][i].keys()
        for k, v in a["opt_state"][i].items():
            assert torch.equal(v, b["opt_state"][i][k]), f"optimizer state {i}.{k} differs"
    assert a["opt_groups"] == b["opt_groups"]
    assert a["lr"] == b["lr"]


def files(path) -> list[str]:
    """The checkpoint files in ``path`` (the run directory also holds git/, the code state)."""
    return sorted(name for name in os.listdir(path) if name.endswith(".pt") or name.startswith(".tmp"))


# ---------------------------------------------------------------------------- exact resume
@pytest.mark.slow
def test_resume_continues_the_exploration_schedule_exactly(tmp_path):
    """The exploration schedule's std ceiling and per-env exploration scale depend on the iteration alone: a run
    resumed at iteration 2 ends bit-identical to one that ran 4 iterations in one go, with the ceiling (0.2 from
    iteration 3) and the quiet envs (from iteration 2) in force at the end."""
    alg = {"exploration_cfg": {"std_max_schedule": [[1, 0.5], [3, 0.2]], "low_noise_fraction": 0.25,
                               "low_noise_start": 2}}
    cfg = base_cfg()
    cfg["algorithm"].update(alg)
    run_a = OnPolicyRunner(make_env(seed=0), cfg, str(tmp_path / "a"))
    run_a.learn(4)
    dist = run_a.alg.actor.distribution
    assert dist.std_param.min() > 0.2 and torch.allclose(dist.current_std(), torch.full_like(dist.std_param, 0.2))
    scale = run_a.alg.storage.noise_scale[0, :, 0]  # the last rollout's per-env factors
    assert (scale[: NUM_ENVS * 3 // 4] == 1).all() and (scale[NUM_ENVS * 3 // 4:] == 0.25).all()
    run_b = OnPolicyRunner(make_env(seed=0), cfg, str(tmp_path / "b"))
    run_b.learn(2)
    resumed = OnPolicyRunner(make_env(seed=123), cfg, str(tmp_path / "b"))
    resumed.load(str(tmp_path / "b" / "model_1.pt"))
    resumed.learn(2)
    assert_bit_identical(snapshot(run_a), snapshot(resumed))
    plain = OnPolicyRunner(make_env(seed=0), base_cfg(), str(tmp_path / "c"))  # control: the schedule changes the run
    plain.learn(4)
    assert not torch.equal(snapshot(plain)["actor"]["mlp.0.weight"], snapshot(run_a)["actor"]["mlp.0.weight"])


@pytest.mark.slow
def test_resume_is_bit_identical_to_an_uninterrupted_run(tmp_path, monkeypatch):
    # A: 4 iterations (numbered 0..3, as in rsl_rl) in one go; model_0.pt is the save_interval one.
    run_a = OnPolicyRunner(make_env(seed=0), base_cfg(), str(tmp_path / "a"))
    run_a.learn(4, init_at_random_ep_len=True)
    a = snapshot(run_a)
    assert files(tmp_path / "a") == ["model_0.pt", "model_3.pt"]

    # B: 2 iterations, checkpoint, then a new env (other seed) and a new runner resume for 2 more.
    run_b = OnPolicyRunner(make_env(seed=0), base_cfg(), str(tmp_path / "b"))
    run_b.learn(2, init_at_random_ep_len=True)
    assert run_b.current_learning_iteration == 1 and files(tmp_path / "b") == ["model_0.pt", "model_1.pt"]
    ckpt = str(tmp_path / "b" / "model_1.pt")
    resumed = OnPolicyRunner(make_env(seed=123), base_cfg(), str(tmp_path / "b"))
    resumed.load(ckpt)
    assert resumed.current_learning_iteration == 1
    resumed.learn(2, init_at_random_ep_len=True)  # a resumed run must not re-randomise episode lengths
    assert resumed.current_learning_iteration == 3  # iterations 2 and 3: the numbering continues
    assert files(tmp_path / "b") == ["model_0.pt", "model_1.pt", "model_3.pt"]
    b = snapshot(resumed)

    assert_bit_identical(a, b)
    norm = "obs_normalizer.count"
    assert int(a["actor"][norm]) == int(b["actor"][norm]) == (8 + 1) * NUM_ENVS + 4 * 8 * NUM_ENVS
    assert a["lr"] != 1e-3  # the adaptive schedule moved it, so comparing it means something

    # Control: the same resume without the env's state diverges, so the env state is part of what is restored.
    no_env = OnPolicyRunner(make_env(seed=123), base_cfg(), None)
    monkeypatch.setattr(no_env.env, "load_state_dict", lambda state: None)
    no_env.load(ckpt)
    no_env.learn(2)
    c = snapshot(no_env)
    assert not all(torch.equal(a["actor"][k], c["actor"][k]) for k in a["actor"])


def test_checkpoint_contents_load_code_free(tmp_path):
    env = make_env()
    runner = OnPolicyRunner(env, base_cfg(), str(tmp_path))
    runner.learn(1)
    ckpt = torch.load(tmp_path / "model_0.pt", weights_only=True)
    assert CKPT_KEYS <= set(ckpt)
    assert ckpt["iter"] == 0 and ckpt["infos"] is None
    assert ckpt["learning_rate"] == runner.alg.learning_rate
    assert ckpt["train_cfg"]["actor"]["hidden_dims"] == [16, 16]
    assert ckpt["train_cfg"]["obs_groups"] == {"actor": ["policy"], "critic": ["critic"]}
    for k, v in runner.alg.actor.state_dict().items():
        assert torch.equal(ckpt["actor_state_dict"][k], v)
    assert torch.equal(ckpt["env_state"]["state"], env.state)
    assert torch.equal(ckpt["env_state"]["generator_state"], env.generator.get_state())
    assert torch.equal(ckpt["rng_states"]["torch"], torch.get_rng_state())  # nothing drew since the save

    path = runner.save(str(tmp_path / "extra.pt"), infos={"note": "by hand", "best": 1.5})
    assert torch.load(path, weights_only=True)["infos"] == {"note": "by hand", "best": 1.5}
    assert runner.load(path) == {"note": "by hand", "best": 1.5}  # load returns the infos


# ---------------------------------------------------------------------------- atomic writes
def test_save_atomic_leaves_only_the_file(tmp_path):
    path = tmp_path / "ck" / "model_1.pt"  # the directory is created
    assert save_atomic({"x": torch.arange(3)}, path) == str(path)
    assert files(tmp_path / "ck") == ["model_1.pt"]
    assert torch.equal(torch.load(path, weights_only=True)["x"], torch.arange(3))
    save_atomic({"x": torch.arange(5)}, path)  # overwrite in place
    assert files(tmp_path / "ck") == ["model_1.pt"]
    assert torch.equal(torch.load(path, weights_only=True)["x"], torch.arange(5))


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_save_atomic_failure_keeps_the_previous_checkpoint(tmp_path, monkeypatch, error):
    path = tmp_path / "model_1.pt"
    save_atomic({"x": torch.arange(4)}, path)
    real_save = torch.save

    def torn_save(obj, f, *args, **kwargs):
        f.write(b"PK\x03\x04 half a checkpoint")  # some bytes reach the disk, then the write dies
        raise error("disk full")

    monkeypatch.setattr(torch, "save", torn_save)
    with pytest.raises(error):
        save_atomic({"x": torch.zeros(100)}, path)
    monkeypatch.setattr(torch, "save", real_save)
    assert files(tmp_path) == ["model_1.pt"]  # no temporary file left behind
    assert torch.equal(torch.load(path, weights_only=True)["x"], torch.arange(4))


def test_runner_save_failure_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    runner = OnPolicyRunner(make_env(), base_cfg(), str(tmp_path))
    runner.learn(1)
    before = torch.load(tmp_path / "model_0.pt", weights_only=True)["actor_state_dict"]

    def boom(*args, **kwargs):
        raise OSError("no space left on device")

    monkeypatch.setattr(torch, "save", boom)
    with pytest.raises(OSError):
        runner.save(str(tmp_path / "model_0.pt"))
    monkeypatch.undo()
    assert files(tmp_path) == ["model_0.pt"]
    after = torch.load(tmp_path / "model_0.pt", weights_only=True)["actor_state_dict"]
    assert all(torch.equal(before[k], after[k]) for k in before)


# ---------------------------------------------------------------------------- compatibility
@pytest.fixture(scope="module")
def mlp_checkpoint(tmp_path_factory) -> str:
    """A 1-iteration checkpoint of the base config (written once for the compatibility tests)."""
    d = tmp_path_factory.mktemp("mlp_ckpt")
    runner = OnPolicyRunner(make_env(), base_cfg(), str(d))
    runner.learn(1)
    return str(d / "model_0.pt")


def _with_actor(**actor_keys) -> dict:
    cfg = base_cfg()
    cfg["actor"].update(actor_keys)
    return cfg


@pytest.mark.parametrize(
    "cfg, named",
    [
        (_with_actor(hidden_dims=[32, 16]), "actor.hidden_dims"),
        (_with_actor(class_name="RNNModel", rnn_type="gru", rnn_hidden_dim=8), "actor.class_name"),
        (_with_actor(obs_normalization=False), "actor.obs_normalization"),
        ({**base_cfg(), "obs_groups": {"actor": ["critic"], "critic": ["critic"]}}, "obs_groups.actor"),
    ],
    ids=["hidden_dims", "rnn_vs_mlp", "normalization", "obs_groups"],
)
def test_incompatible_checkpoint_is_refused_in_one_line(mlp_checkpoint, cfg, named):
    runner = OnPolicyRunner(make_env(), cfg, None)
    before = {k: v.clone() for k, v in runner.alg.actor.state_dict().items()}
    with pytest.raises(ValueError) as info:
        runner.load(mlp_checkpoint)
    msg = str(info.value)
    assert "\n" not in msg and named in msg and mlp_checkpoint in msg
    assert "critic." not in msg  # only what differs is named
    assert runner.current_learning_iteration == 0
    assert all(torch.equal(before[k], v) for k, v in runner.alg.actor.state_dict().items())  # nothing loaded


def test_critic_size_difference_is_named(mlp_checkpoint):
    cfg = base_cfg()
    cfg["critic"]["hidden_dims"] = [16, 16, 16]
    with pytest.raises(ValueError, match=r"critic\.hidden_dims") as info:
        OnPolicyRunner(make_env(), cfg, None).load(mlp_checkpoint)
    assert "actor." not in str(info.value)


# ---------------------------------------------------------------------------- finding checkpoints
def test_find_checkpoint_picks_the_highest_iteration(tmp_path):
    for name in ["model_2.pt", "model_10.pt", "model_9.pt", "model_latest.pt", "events.out", "model_3.pt.tmp"]:
        (tmp_path / name).write_bytes(b"")
    assert find_checkpoint(tmp_path) == str(tmp_path / "model_10.pt")  # numeric, not lexicographic, order
    assert find_checkpoint(tmp_path / "model_2.pt") == str(tmp_path / "model_2.pt")  # a file is itself


def test_find_checkpoint_missing_path_names_it(tmp_path):
    missing = tmp_path / "no_such_run"
    with pytest.raises(FileNotFoundError, match="no_such_run"):
        find_checkpoint(missing)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="empty"):
        find_checkpoint(tmp_path / "empty")
    runner = OnPolicyRunner(make_env(num_envs=4), base_cfg(), None)
    with pytest.raises(FileNotFoundError, match="nothing_here.pt"):
        runner.load(str(tmp_path / "nothing_here.pt"))


# ---------------------------------------------------------------------------- Ctrl-C
def test_keyboard_interrupt_saves_the_completed_iterations(tmp_path):
    env = make_env()
    runner = OnPolicyRunner(env, base_cfg(), str(tmp_path))
    real_step = env.step
    steps_in_third = []

    def step(actions):
        if runner.current_learning_iteration == 1:  # iterations 0 and 1 completed: we are in the 3rd
            steps_in_third.append(1)
            if len(steps_in_third) == 3:
                raise KeyboardInterrupt
        return real_step(actions)

    env.step = step
    with pytest.raises(KeyboardInterrupt):
        runner.learn(10)
    assert runner.current_learning_iteration == 1
    assert files(tmp_path) == ["model_0.pt", "model_1.pt"]  # model_0.pt: the save_interval checkpoint
    ckpt = torch.load(tmp_path / "model_1.pt", weights_only=True)
    assert ckpt["iter"] == 1

    fresh = OnPolicyRunner(make_env(seed=7), base_cfg(), str(tmp_path))
    fresh.load(str(tmp_path / "model_1.pt"))
    assert fresh.current_learning_iteration == 1
    for k, v in runner.alg.actor.state_dict().items():  # the weights after the 2 completed updates
        assert torch.equal(fresh.alg.actor.state_dict()[k], v)
    fresh.learn(1)
    assert files(tmp_path) == ["model_0.pt", "model_1.pt", "model_2.pt"]


def test_find_checkpoint_refuses_a_parent_of_several_runs(tmp_path):
    for run, its in (("a", (5,)), ("b", (3, 9))):
        (tmp_path / "logs" / run).mkdir(parents=True)
        for it in its:
            (tmp_path / "logs" / run / f"model_{it}.pt").write_bytes(b"")
    with pytest.raises(FileNotFoundError, match="holds the checkpoints of 2 runs"):
        find_checkpoint(tmp_path / "logs")  # not b's model_9.pt: a and b are unrelated runs
    assert find_checkpoint(tmp_path / "logs" / "b") == str(tmp_path / "logs" / "b" / "model_9.pt")
    (tmp_path / "one" / "nested").mkdir(parents=True)
    (tmp_path / "one" / "nested" / "model_2.pt").write_bytes(b"")
    assert find_checkpoint(tmp_path / "one") == str(tmp_path / "one" / "nested" / "model_2.pt")  # one run inside
