"""Config composition (every model x algorithm x extension combination), the structured-config checks,
and the config tree's location."""

from __future__ import annotations

import inspect
import itertools
from dataclasses import MISSING, fields

import pytest
import torch
from tensordict import TensorDict

from rlcore.config import schema as schema
from rlcore.config.check import ConfigError, validate_config
from rlcore.config.cli import compose, config_dir, group_options
from rlcore.train import build_train_cfg, prepare

MODELS = ["mlp", "cnn", "rnn"]
ALGORITHMS = ["ppo", "distillation"]
EXTENSIONS = [[], ["rnd"], ["symmetry"], ["rnd", "symmetry"]]

#: A PPO checkpoint as build_train_cfg reads it (only its config matters for composition).
FAKE_TEACHER = {"train_cfg": {"actor": {"class_name": "MLPModel", "hidden_dims": [32, 32], "obs_normalization": True,
                                        "distribution_cfg": {"class_name": "GaussianDistribution"}},
                              "obs_groups": {"actor": ["policy"], "critic": ["policy"]}}}


def _overrides(model: str, algorithm: str, extensions: list[str]) -> list[str]:
    out = ["task=cartpole", f"model={model}", f"algorithm={algorithm}", f"extension=[{','.join(extensions)}]"]
    if model == "cnn":  # CNNModel needs an image group: the fake env below provides one
        out.append("task.obs_groups.actor=[policy,height_scan]")
        out.append("task.obs_groups.critic=[critic,height_scan]")
        if "rnd" in extensions:  # RND reads 1D groups only (by default it would take the critic's, image included)
            out.append("+task.obs_groups.rnd_state=[critic]")
    return out


class _ImageEnv:
    """Just enough of a VecEnv for construct_algorithm: cart-pole-sized 1D groups plus a 2D height scan."""

    num_envs, num_actions, max_episode_length, device, cfg, step_dt = 4, 1, 10, torch.device("cpu"), {}, 0.02

    def __init__(self) -> None:
        self.episode_length_buf = torch.zeros(self.num_envs, dtype=torch.long)

    def get_observations(self) -> TensorDict:
        n = self.num_envs
        return TensorDict({"policy": torch.randn(n, 4), "critic": torch.randn(n, 4),
                           "height_scan": torch.randn(n, 1, 6, 6)}, batch_size=[n])


def test_groups_have_the_documented_options():
    assert group_options("model") == ["cnn", "mlp", "rnn"]
    assert group_options("algorithm") == ["distillation", "ppo"]
    assert group_options("extension") == ["rnd", "symmetry"]
    assert {"pendulum", "cartpole"} <= set(group_options("task"))
    assert group_options("logger") == ["none", "tensorboard", "wandb"]
    assert group_options("runner") == ["default"]


def _refusal(model: str, algorithm: str, extensions: list[str]) -> str | None:
    """The message that refuses a combination, or None for a valid one."""
    if algorithm == "distillation" and extensions:
        return r"algorithm=distillation does not support extensions \(" + ", ".join(extensions)
    if model == "rnn" and "symmetry" in extensions:
        return r"extension=symmetry does not support recurrent models \(model\.actor is RNNModel\)"
    return None


COMBINATIONS = list(itertools.product(MODELS, ALGORITHMS, EXTENSIONS))
VALID = [c for c in COMBINATIONS if _refusal(*c) is None]
INVALID = [c for c in COMBINATIONS if _refusal(*c) is not None]


@pytest.mark.parametrize(("model", "algorithm", "extensions"), VALID,
                         ids=[f"{m}-{a}-{'+'.join(e) or 'none'}" for m, a, e in VALID])
def test_valid_combination_composes_and_builds(model, algorithm, extensions):
    from rlcore.algorithms.factory import construct_algorithm
    from rlcore.env.task import make_task

    cfg = compose(_overrides(model, algorithm, extensions))
    teacher = FAKE_TEACHER if algorithm == "distillation" else None
    train = build_train_cfg(cfg, teacher)
    policy_part = "student" if algorithm == "distillation" else "actor"
    assert train[policy_part]["class_name"] == {"mlp": "MLPModel", "cnn": "CNNModel", "rnn": "RNNModel"}[model]
    assert train["algorithm"]["class_name"] == {"ppo": "PPO", "distillation": "Distillation"}[algorithm]
    assert ("rnd_cfg" in train["algorithm"]) == ("rnd" in extensions)
    assert ("symmetry_cfg" in train["algorithm"]) == ("symmetry" in extensions)
    if algorithm == "distillation":
        assert train["teacher"]["class_name"] == "MLPModel" and "gamma" not in train["algorithm"]
    # the factory builds it (small networks, a 4-env task)
    for part in ("actor", "critic", "student"):
        if part in train:
            train[part]["hidden_dims"] = [8]
            if model == "rnn":
                train[part]["rnn_hidden_dim"] = 8
    env = _ImageEnv() if model == "cnn" else make_task("cartpole", num_envs=4, seed=0)
    alg = construct_algorithm(env.get_observations(), env, train, "cpu")
    assert type(alg).__name__ == train["algorithm"]["class_name"]
    # conf/algorithm/distillation.yaml: the student collects with action noise 0.1, PPO's actor explores with 1.0
    policy = alg.student if algorithm == "distillation" else alg.actor
    expected_std = 0.1 if algorithm == "distillation" else 1.0
    assert torch.allclose(policy.distribution.current_std(), torch.full((env.num_actions,), expected_std))


@pytest.mark.parametrize(("model", "algorithm", "extensions"), INVALID,
                         ids=[f"{m}-{a}-{'+'.join(e)}" for m, a, e in INVALID])
def test_invalid_combination_is_refused(model, algorithm, extensions):
    cfg = compose(_overrides(model, algorithm, extensions))
    message = _refusal(model, algorithm, extensions)
    with pytest.raises(ConfigError, match=message):
        build_train_cfg(cfg, FAKE_TEACHER)
    with pytest.raises(ConfigError, match=message):
        prepare(cfg)  # refused before any checkpoint is even read


def test_task_settings_are_overridable_and_typed():
    cfg = compose(["task=cartpole", "task.num_envs=16", "runner.max_iterations=3", "algorithm.gamma=0.9", "seed=4"])
    train = build_train_cfg(cfg)
    assert train["task"]["num_envs"] == 16 and train["max_iterations"] == 3 and train["seed"] == 4
    assert train["algorithm"]["gamma"] == 0.9 and isinstance(train["algorithm"]["gamma"], float)
    assert train["obs_groups"] == {"actor": ["policy"], "critic": ["policy"]}
    assert train["experiment_name"] == "cartpole"  # ${task.name} resolved


def _plain(overrides: list[str]) -> dict:
    from omegaconf import OmegaConf

    return OmegaConf.to_container(compose(overrides), resolve=True)


@pytest.mark.parametrize(("key", "value", "path"), [
    ("runner", {"max_iterations": "abc"}, "runner.max_iterations"),
    ("runner", {"save_interval": 2.5}, "runner.save_interval"),
    ("algorithm", {"clip_param": "wide"}, "algorithm.clip_param"),
    ("algorithm", {"schedule": "cosine"}, "algorithm.schedule"),
    ("logger", {"type": "mlflow"}, "logger.type"),
    ("task", {"num_envs": "many"}, "task.num_envs"),
])
def test_a_wrong_type_names_the_key_path(key, value, path):
    cfg = _plain(["task=pendulum"])
    cfg[key].update(value)
    with pytest.raises(ConfigError, match=rf"^{path}: "):
        validate_config(cfg)


@pytest.mark.slow
def test_nested_type_errors_name_the_full_path():
    cfg = _plain(["model=rnn"])
    cfg["model"]["actor"]["hidden_dims"] = [64, "x"]
    with pytest.raises(ConfigError, match=r"^model\.actor\.hidden_dims\[1\]: "):
        validate_config(cfg)
    cfg = _plain(["model=rnn"])
    cfg["model"]["critic"]["rnn_type"] = "transformer"
    with pytest.raises(ConfigError, match=r"^model\.critic\.rnn_type: Invalid value 'transformer', expected one of "
                                          r"\[gru, lstm\]"):
        validate_config(cfg)
    cfg = _plain(["extension=[rnd]"])
    cfg["extension"]["rnd"]["num_outputs"] = "big"
    with pytest.raises(ConfigError, match=r"^extension\.rnd\.num_outputs: "):
        validate_config(cfg)
    cfg = _plain([])
    cfg["model"]["actor"]["distribution_cfg"]["init_std"] = "wide"
    with pytest.raises(ConfigError, match=r"^model\.actor\.distribution_cfg\.init_std: "):
        validate_config(cfg)


def test_unknown_keys_are_refused_in_closed_sections():
    cfg = _plain([])
    cfg["algorithm"]["gama"] = 0.9
    with pytest.raises(ConfigError, match=r"^algorithm\.gama: unknown key for PPO; valid keys: .*gamma"):
        validate_config(cfg)
    cfg = _plain([])
    cfg["model"]["actor"]["hiden_dims"] = [3]
    with pytest.raises(ConfigError, match=r"^model\.actor\.hiden_dims: unknown key for MLPModel"):
        validate_config(cfg)
    cfg = _plain([])
    cfg["model"]["actor"]["activation"] = "swoosh"
    with pytest.raises(ConfigError, match=r"^model\.actor\.activation: unknown value 'swoosh'"):
        validate_config(cfg)


def test_task_extras_and_documented_top_level_keys_are_allowed():
    """A task file may add top-level keys (used by interpolation) and keys of its own inside task:."""
    cfg = _plain(["+env_id=Pendulum-v1", "+num_envs=6", "task.num_envs=${num_envs}", "+task.viewer={eye:[1,2,3]}",
                  "task.env.max_episode_length=50"])
    typed, _ = validate_config(cfg)
    assert typed["env_id"] == "Pendulum-v1" and typed["task"]["num_envs"] == 6
    assert typed["task"]["viewer"] == {"eye": [1, 2, 3]}
    assert typed["task"]["env"]["max_episode_length"] == 50


def test_a_user_class_path_is_not_checked():
    cfg = _plain([])
    cfg["model"]["actor"] = {"class_name": "my_pkg.models:MyModel", "anything": 1}
    typed, _ = validate_config(cfg)
    assert typed["model"]["actor"] == {"class_name": "my_pkg.models:MyModel", "anything": 1}


@pytest.mark.parametrize(("dataclass", "target"), [
    (schema.PPOCfg, "rlcore.algorithms:PPO"),
    (schema.DistillationCfg, "rlcore.algorithms:Distillation"),
    (schema.MLPModelCfg, "rlcore.models:MLPModel"),
    (schema.RNNModelCfg, "rlcore.models:RNNModel"),
    (schema.CNNModelCfg, "rlcore.models:CNNModel"),
    (schema.RNDCfg, "rlcore.extensions.rnd:RandomNetworkDistillation"),
    (schema.SymmetryCfg, "rlcore.extensions.symmetry:Symmetry"),
    (schema.ExplorationCfg, "rlcore.extensions.exploration:ExplorationSchedule"),
    (schema.GaussianDistributionCfg, "rlcore.modules.distribution:GaussianDistribution"),
    (schema.HeteroscedasticGaussianDistributionCfg, "rlcore.modules.distribution:HeteroscedasticGaussianDistribution"),
    (schema.BetaDistributionCfg, "rlcore.modules.distribution:BetaDistribution"),
])
def test_schema_matches_the_constructor(dataclass, target):
    """Every schema field is a constructor argument with the same default (so defaults never change behaviour)."""
    import importlib

    module, name = target.split(":")
    params = inspect.signature(getattr(importlib.import_module(module), name).__init__).parameters
    # read by resolve_class / the factory, not the constructor
    factory_only = {"class_name", "share_cnn_encoders", "exploration_cfg"}
    for f in fields(dataclass):
        if f.name in factory_only:
            continue
        assert f.name in params, f"{dataclass.__name__}.{f.name} is not an argument of {name}"
        default = f.default if f.default is not MISSING else f.default_factory()
        default = getattr(default, "value", default)
        expected = params[f.name].default
        expected = list(expected) if isinstance(expected, tuple) else expected
        assert default == expected, f"{dataclass.__name__}.{f.name}: schema default {default!r} vs {name} {expected!r}"


@pytest.mark.slow
def test_a_task_algorithm_preset_applies_to_that_pair_only():
    """conf/task_algorithm/go2_distillation.yaml sets the distillation run's length of task=go2; PPO keeps the task's
    own, other tasks have no preset, and the command line still wins."""
    assert group_options("task_algorithm") == ["go2_distillation", "go2_rough_distillation"]
    go2 = ["task=go2", "model=rnn"]
    assert _plain([*go2, "algorithm=distillation"])["runner"]["max_iterations"] == 280
    assert _plain([*go2, "algorithm=ppo"])["runner"]["max_iterations"] == 370
    assert _plain([*go2, "algorithm=distillation", "runner.max_iterations=7"])["runner"]["max_iterations"] == 7
    assert _plain(["task=pendulum", "algorithm=distillation"])["runner"]["max_iterations"] == _plain(
        ["task=pendulum", "algorithm=ppo"])["runner"]["max_iterations"]


@pytest.mark.slow
def test_every_yaml_option_validates():
    for model in MODELS:
        for task in ("pendulum", "cartpole"):
            for logger in ("tensorboard", "wandb", "none"):
                validate_config(_plain([f"task={task}", f"model={model}", f"logger={logger}"]))


def test_config_dir_is_found_from_a_checkout_and_from_an_install(tmp_path, monkeypatch):
    import shutil
    import sys

    repo_conf = config_dir()
    assert repo_conf.endswith("conf")
    # an installed layout: rlcore has no conf/ beside it, the wheel put it under <prefix>/share/rlcore/conf
    monkeypatch.setattr("rlcore.config.cli.__file__", str(tmp_path / "site" / "rlcore" / "utils" / "cli.py"))
    prefix = tmp_path / "prefix"
    shutil.copytree(repo_conf, prefix / "share" / "rlcore" / "conf")
    monkeypatch.setattr(sys, "prefix", str(prefix))
    monkeypatch.setattr("sysconfig.get_paths", lambda *a, **k: {"data": str(prefix)})
    assert config_dir() == str(prefix / "share" / "rlcore" / "conf")
    monkeypatch.setenv("RLCORE_CONF_DIR", repo_conf)
    assert config_dir() == repo_conf


def test_the_combination_matrix_covers_every_config_option():
    """The matrix above spans every option of the config tree: a model, algorithm or extension file added to
    conf/ without a row here fails (every combination, each extension subset included, is built or refused)."""
    assert sorted(MODELS) == group_options("model")
    assert sorted(ALGORITHMS) == group_options("algorithm")
    options = group_options("extension")
    subsets = {frozenset(c) for r in range(len(options) + 1) for c in itertools.combinations(options, r)}
    assert {frozenset(e) for e in EXTENSIONS} == subsets and len(EXTENSIONS) == len(subsets)


@pytest.mark.slow
def test_go2_configures_its_exploration_schedule_in_algorithm_exploration_cfg():
    """task=go2's late, quieter phase is the algorithm's exploration_cfg (the factory builds the schedule from it); a
    config that still sets those keys directly in ``algorithm`` is read the same, with a notice; distillation drops
    it as a PPO-only setting."""
    go2 = ["task=go2", "logger=none"]
    expected = {"std_max_schedule": [[300, 0.15]], "low_noise_fraction": 0.25, "low_noise_std_scale": 0.25,
                "low_noise_start": 300}
    plan = prepare(compose(go2))
    assert plan.train_cfg["algorithm"]["exploration_cfg"] == expected
    assert not {"low_noise_fraction", "std_max_schedule"} & set(plan.train_cfg["algorithm"])
    tuned = prepare(compose([*go2, "algorithm.exploration_cfg.low_noise_fraction=0.5"]))
    assert tuned.train_cfg["algorithm"]["exploration_cfg"]["low_noise_fraction"] == 0.5
    older = prepare(compose(["task=cartpole", "logger=none", "+algorithm.low_noise_fraction=0.5"]))
    assert older.train_cfg["algorithm"]["exploration_cfg"] == {**expected, "std_max_schedule": None,
                                                              "low_noise_fraction": 0.5, "low_noise_start": 0}
    assert any("low_noise_fraction are keys of algorithm.exploration_cfg" in n for n in older.notices)
    assert prepare(compose(["task=cartpole", "logger=none"])).train_cfg["algorithm"]["exploration_cfg"] is None
    _, notices = validate_config(_plain([*go2, "algorithm=distillation", "model=rnn"]))
    assert any("exploration_cfg" in n and "ignoring PPO-only settings" in n for n in notices)
