"""Tests for the config layer the algorithm factory relies on: obs-set defaults, class names, construct_algorithm."""

from __future__ import annotations

import copy

import pytest
import torch
from tensordict import TensorDict

from rlcore.algorithms import PPO, Distillation, construct_algorithm
from rlcore.config.resolve import resolve_callable, resolve_class, resolve_obs_groups
from rlcore.models import MLPModel, RNNModel


def _obs(*groups: str, n: int = 2) -> TensorDict:
    return TensorDict({g: torch.zeros(n, 3) for g in groups}, batch_size=[n])


# ============================================================================ resolve_obs_groups
def test_defaults_actor_policy_group_and_critic_actor_set():
    resolved = resolve_obs_groups(_obs("policy", "privileged"), None, ["actor", "critic"])
    assert resolved == {"actor": ["policy"], "critic": ["policy"]}


def test_critic_falls_back_to_the_actor_set_as_a_copy():
    given = {"actor": ["policy", "privileged"]}
    resolved = resolve_obs_groups(_obs("policy", "privileged", "height"), given, ["actor", "critic"])
    assert resolved["critic"] == ["policy", "privileged"]
    assert resolved["critic"] is not resolved["actor"]
    assert given == {"actor": ["policy", "privileged"]}  # the caller's config is not modified


def test_given_sets_are_kept_and_strings_become_lists():
    resolved = resolve_obs_groups(_obs("policy", "privileged"), {"actor": "policy", "critic": ["privileged"]},
                                  ["actor", "critic"])
    assert resolved == {"actor": ["policy"], "critic": ["privileged"]}


def test_distillation_sets_fall_back_to_actor_and_critic():
    resolved = resolve_obs_groups(_obs("policy", "privileged"), {"actor": ["policy"], "critic": ["privileged"]},
                                  ["student", "teacher"])
    assert resolved["student"] == ["policy"] and resolved["teacher"] == ["privileged"]
    resolved = resolve_obs_groups(_obs("policy"), {"actor": ["policy"]}, ["student", "teacher"])
    assert resolved["teacher"] == ["policy"]  # no critic set: the actor's


def test_rnd_state_defaults_to_the_critics_flat_groups_only():
    obs = TensorDict({"policy": torch.zeros(2, 3), "privileged": torch.zeros(2, 4),
                      "height_scan": torch.zeros(2, 1, 5, 5)}, batch_size=[2])
    sets = resolve_obs_groups(obs, {"actor": ["policy", "height_scan"],
                                    "critic": ["policy", "privileged", "height_scan"]}, ["actor", "critic", "rnd_state"])
    assert sets["rnd_state"] == ["policy", "privileged"]
    assert sets["critic"] == ["policy", "privileged", "height_scan"]  # the critic's own list is untouched
    # a critic of images only: rnd_state moves on to the actor's flat groups
    sets = resolve_obs_groups(obs, {"actor": ["policy"], "critic": ["height_scan"]}, ["actor", "critic", "rnd_state"])
    assert sets["rnd_state"] == ["policy"]


def test_legacy_policy_set_is_used_for_the_actor():
    resolved = resolve_obs_groups(_obs("a", "b"), {"policy": ["a"], "critic": ["a", "b"]}, ["actor", "critic"])
    assert resolved["actor"] == ["a"] and resolved["critic"] == ["a", "b"]


def test_missing_group_names_it_and_lists_the_available_ones():
    with pytest.raises(ValueError) as err:
        resolve_obs_groups(_obs("policy", "privileged"), {"actor": ["policy", "height_scan"]}, ["actor", "critic"])
    msg = str(err.value)
    assert "'height_scan'" in msg and "obs_groups['actor']" in msg
    assert "available groups: policy, privileged" in msg


def test_no_default_for_the_actor_without_a_policy_group():
    with pytest.raises(ValueError) as err:
        resolve_obs_groups(_obs("proprio", "camera"), None, ["actor", "critic"])
    msg = str(err.value)
    assert "'actor'" in msg and "proprio, camera" in msg


def test_model_reports_a_missing_group_too():
    with pytest.raises(ValueError, match=r"'privileged'.*available groups: policy"):
        MLPModel(_obs("policy"), {"critic": ["policy", "privileged"]}, "critic", 1)


# ============================================================================ class names
def test_known_short_names_and_paths_resolve():
    assert resolve_callable("PPO") is PPO
    assert resolve_callable("Distillation") is Distillation
    assert resolve_callable("ActorCriticRecurrent") is RNNModel  # rsl_rl 4.x alias
    assert resolve_callable("rlcore.models:MLPModel") is MLPModel
    assert resolve_callable("rlcore.models.MLPModel") is MLPModel
    assert resolve_callable(PPO) is PPO


def test_unknown_class_name_lists_the_known_names():
    with pytest.raises(ValueError) as err:
        resolve_callable("PPOO")
    msg = str(err.value)
    assert "'PPOO'" in msg
    for name in ("PPO", "Distillation", "MLPModel", "RNNModel", "CNNModel"):
        assert name in msg


def test_unresolvable_path_says_why():
    with pytest.raises(ValueError, match="rlcore.models:NoSuchModel"):
        resolve_callable("rlcore.models:NoSuchModel")


def test_resolve_class_does_not_modify_the_config():
    cfg = {"class_name": "PPO", "learning_rate": 1e-3, "rnd_cfg": {"weight": 1.0}}
    original = copy.deepcopy(cfg)
    cls, kwargs = resolve_class(cfg)
    assert cls is PPO and kwargs == {"learning_rate": 1e-3, "rnd_cfg": {"weight": 1.0}}
    kwargs["rnd_cfg"]["weight"] = 2.0
    assert cfg == original
    with pytest.raises(ValueError, match="class_name"):
        resolve_class({"learning_rate": 1e-3})


# ============================================================================ construct_algorithm
def _ppo_cfg() -> dict:
    return {
        "num_steps_per_env": 4,
        "obs_groups": None,
        "actor": {"class_name": "MLPModel", "hidden_dims": [8],
                  "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 0.5}},
        "critic": {"class_name": "MLPModel", "hidden_dims": [8]},
        "algorithm": {"class_name": "PPO", "learning_rate": 3e-4, "gamma": 0.97, "num_mini_batches": 2},
    }


def test_construct_ppo_resolves_obs_groups_and_settings(kit):
    env = kit.FakeEnv(num_envs=6, num_actions=3)
    cfg = _ppo_cfg()
    ppo = construct_algorithm(env.get_observations(), env, cfg, "cpu")
    assert isinstance(ppo, PPO)
    assert cfg["obs_groups"] == {"actor": ["policy"], "critic": ["policy"]}
    assert ppo.actor.obs_groups == ["policy"] and ppo.critic.obs_groups == ["policy"]
    assert ppo.actor.output_dim == 3 and ppo.critic.output_dim == 1
    assert ppo.learning_rate == 3e-4 and ppo.gamma == 0.97 and ppo.num_mini_batches == 2
    assert ppo.optimizer.param_groups[0]["lr"] == 3e-4
    assert ppo.storage.actions.shape == (4, 6, 3) and ppo.storage.training_type == "rl"
    assert ppo.actor.distribution.init_std == 0.5
    # the same config builds again (class_name keys were not consumed)
    assert cfg["algorithm"]["class_name"] == "PPO" and cfg["actor"]["class_name"] == "MLPModel"
    assert isinstance(construct_algorithm(env.get_observations(), env, cfg, "cpu"), PPO)


def test_construct_algorithm_unknown_algorithm_lists_names(kit):
    env = kit.FakeEnv(num_envs=2)
    cfg = _ppo_cfg()
    cfg["algorithm"]["class_name"] = "PPG"
    with pytest.raises(ValueError, match=r"Unknown class_name 'PPG'.*Distillation.*PPO"):
        construct_algorithm(env.get_observations(), env, cfg, "cpu")


def test_construct_algorithm_missing_group_is_reported(kit):
    env = kit.FakeEnv(num_envs=2)
    cfg = _ppo_cfg()
    cfg["obs_groups"] = {"actor": ["policy"], "critic": ["policy", "height_scan"]}
    with pytest.raises(ValueError, match=r"'height_scan'.*available groups: policy, privileged"):
        construct_algorithm(env.get_observations(), env, cfg, "cpu")


def test_construct_algorithm_unknown_argument_fails(kit):
    env = kit.FakeEnv(num_envs=2)
    cfg = _ppo_cfg()
    cfg["algorithm"]["learning_rat"] = 1e-3
    with pytest.raises(TypeError, match="learning_rat"):
        construct_algorithm(env.get_observations(), env, cfg, "cpu")


def test_an_env_group_named_like_the_set_is_its_default():
    resolved = resolve_obs_groups(_obs("policy", "critic"), {"actor": ["policy"]}, ["actor", "critic"])
    assert resolved == {"actor": ["policy"], "critic": ["critic"]}
    resolved = resolve_obs_groups(_obs("policy", "teacher"), None, ["student", "teacher"])
    assert resolved == {"student": ["policy"], "teacher": ["teacher"]}


def test_an_empty_set_is_refused_with_the_available_groups():
    with pytest.raises(ValueError, match=r"obs_groups\['critic'\] is an empty list.*policy, privileged"):
        resolve_obs_groups(_obs("policy", "privileged"), {"actor": ["policy"], "critic": []}, ["actor", "critic"])


def test_sharing_cnn_encoders_needs_a_cnn_actor(kit):
    env = kit.FakeEnv(num_envs=2)
    cfg = _ppo_cfg()
    cfg["algorithm"]["share_cnn_encoders"] = True
    with pytest.raises(ValueError, match="share_cnn_encoders needs a CNNModel actor, but the actor is MLPModel"):
        construct_algorithm(env.get_observations(), env, cfg, "cpu")
