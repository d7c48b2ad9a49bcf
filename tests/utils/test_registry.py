"""The one name -> class table (rlcore.config.registry): what it resolves, what reads it, and that the defaults
that the runner and the Hydra tree use come from the typed configs."""

from __future__ import annotations

import inspect

import pytest

from rlcore.config import registry
from rlcore.config import schema as schemas
from rlcore.config.cli import compose
from rlcore.config.resolve import resolve_callable
from rlcore.errors import ConfigError


@pytest.mark.parametrize("entry", registry.ENTRIES, ids=[f"{e.kind}-{e.name}" for e in registry.ENTRIES])
def test_every_entry_resolves_to_its_class(entry):
    cls = entry.load()
    assert inspect.isclass(cls)
    if entry.kind in registry.CLASS_KINDS:
        assert cls.__name__ == entry.name
        assert resolve_callable(entry.name) is cls
        for alias in entry.aliases:
            assert resolve_callable(alias) is cls
    if entry.schema is not None:
        params = inspect.signature(cls.__init__).parameters
        own = {"class_name", "share_cnn_encoders", "exploration_cfg"}  # read by resolve_class / the factory
        assert set(schemas.defaults_of(entry.config_class())) - own <= set(params)


def test_algorithm_entries_name_their_runner_and_models():
    from rlcore.runners import DistillationRunner, OnPolicyRunner

    ppo, dist = registry.get("algorithm", "PPO"), registry.get("algorithm", "Distillation")
    assert registry.get("runner", ppo.runner).load() is OnPolicyRunner
    assert registry.get("runner", dist.runner).load() is DistillationRunner
    assert ppo.models == ("actor", "critic") and dist.models == ("student",)
    assert registry.algorithm_traits("my_pkg.algos:MyPPO") is ppo  # a user's own algorithm is planned like PPO


def test_the_lower_layers_tables_agree_with_the_registry():
    """rlcore.models.MODELS and rlcore.modules.distribution's names are the registry's (until they read it)."""
    from rlcore.models import MODELS
    from rlcore.modules import distribution

    assert {e.name: e.load() for e in registry.entries("model")} == MODELS
    assert {e.name: e.load() for e in registry.entries("distribution")} == distribution.DISTRIBUTIONS
    assert {a: e.name for e in registry.entries("distribution") for a in e.aliases} == distribution._ALIASES


def test_extension_entries_agree_with_ppos_table():
    from rlcore.extensions import PPO_EXTENSIONS

    assert {e.cfg_key: e.load() for e in registry.entries("extension")} == PPO_EXTENSIONS


def test_lookups():
    assert registry.find("ActorCriticRecurrent").name == "RNNModel"
    assert registry.find("GAUSSIAN", ("distribution",)).name == "GaussianDistribution"  # any case, as distributions
    assert registry.find("ppo") is None and registry.find("rnd", ("model",)) is None  # class names: exact
    with pytest.raises(ConfigError, match=r"unknown extension 'curiosity'; valid: rnd, symmetry"):
        registry.get("extension", "curiosity")
    with pytest.raises(ValueError, match=r"Unknown class_name 'PPG'. Known names: .*ActorCritic.*Distillation.*PPO"):
        resolve_callable("PPG")


def test_runner_defaults_come_from_runner_cfg():
    from rlcore.runners.on_policy_runner import RUNNER_DEFAULTS

    runner = schemas.defaults_of(schemas.RunnerCfg)
    assert RUNNER_DEFAULTS == schemas.runner_defaults()
    assert set(RUNNER_DEFAULTS) == (set(runner) - set(schemas.LEARN_ARGUMENTS)) | {"seed", "logger", "wandb_project"}
    assert all(RUNNER_DEFAULTS[k] == v for k, v in runner.items() if k not in schemas.LEARN_ARGUMENTS)
    assert RUNNER_DEFAULTS["seed"] is None and RUNNER_DEFAULTS["logger"] == "tensorboard"


def test_the_hydra_tree_takes_its_defaults_from_the_typed_configs():
    """conf/algorithm/ppo.yaml and conf/runner/default.yaml hold no defaults of their own: the composed sections
    carry every key of PPOCfg / RunnerCfg with its default unless a task file sets it."""
    cfg = compose(["task=pendulum"])
    algorithm, runner = dict(cfg.algorithm), dict(cfg.runner)
    ppo = schemas.defaults_of(schemas.PPOCfg)
    assert set(algorithm) == set(ppo)
    set_by_task = {"gamma", "entropy_coef", "schedule", "learning_rate", "num_mini_batches", "reward_normalization"}
    assert {k for k in ppo if algorithm[k] != ppo[k]} == set_by_task
    assert {k for k, v in schemas.defaults_of(schemas.RunnerCfg).items() if runner[k] != v} == \
        {"num_steps_per_env", "max_iterations", "experiment_name"}
    # a default that is not in any YAML file is overridable without '+'
    assert compose(["algorithm.desired_kl=0.02", "runner.eval_num_envs=8"]).algorithm.desired_kl == 0.02


@pytest.mark.slow
def test_conf_composes_in_a_plain_hydra_program():
    """conf/ pulls in its defaults nodes itself (hydra.searchpath): a script that only uses Hydra composes it."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    code = ("from hydra import compose, initialize_config_dir\n"
            f"with initialize_config_dir(config_dir={str(root / 'conf')!r}, version_base=None):\n"
            "    cfg = compose('config', overrides=['task=cartpole', 'algorithm.desired_kl=0.02'])\n"
            "print(cfg.algorithm.lam, cfg.algorithm.desired_kl, cfg.runner.eval_num_envs)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=str(root), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    ppo, runner = schemas.defaults_of(schemas.PPOCfg), schemas.defaults_of(schemas.RunnerCfg)
    assert out.stdout.split() == [str(ppo["lam"]), "0.02", str(runner["eval_num_envs"])]
