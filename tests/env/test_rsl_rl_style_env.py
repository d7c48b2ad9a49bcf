"""Environments written for rsl_rl 5.x (Isaac Lab / mjlab wrapper style) run unchanged under rlcore's runner.

The env (rsl_rl_style_env.py) imports nothing from rlcore, and the train config is the plain nested dict an
rsl_rl 5.x runner takes (as Isaac Lab's ``agent_cfg.to_dict()`` gives it, runner-level keys rlcore does not use
included): switching is the one import line ``from rlcore.runners import OnPolicyRunner``.
"""

from __future__ import annotations

import torch
from rsl_rl_style_env import RslRlStyleEnv

from rlcore.env import VecEnv
from rlcore.runners import OnPolicyRunner

TRAIN_CFG = {
    "class_name": "OnPolicyRunner",
    "seed": 0,
    "device": "cpu",
    "num_steps_per_env": 16,
    "max_iterations": 2,
    "save_interval": 50,
    "experiment_name": "rsl_rl_style",
    "run_name": "",
    "logger": "tensorboard",
    "resume": False,
    "load_run": ".*",
    "load_checkpoint": "model_.*.pt",
    "clip_actions": None,
    "obs_groups": {"actor": ["policy"], "critic": ["policy", "critic"]},
    "actor": {
        "class_name": "MLPModel",
        "hidden_dims": [32, 32],
        "activation": "elu",
        "obs_normalization": True,
        "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0, "std_type": "scalar"},
    },
    "critic": {"class_name": "MLPModel", "hidden_dims": [32, 32], "activation": "elu", "obs_normalization": True},
    "algorithm": {
        "class_name": "PPO",
        "num_learning_epochs": 2,
        "num_mini_batches": 4,
        "learning_rate": 1.0e-3,
        "schedule": "adaptive",
        "gamma": 0.99,
        "lam": 0.95,
        "entropy_coef": 0.01,
        "desired_kl": 0.01,
        "max_grad_norm": 1.0,
        "value_loss_coef": 1.0,
        "use_clipped_value_loss": True,
        "clip_param": 0.2,
        "normalize_advantage_per_mini_batch": False,
        "rnd_cfg": None,
        "symmetry_cfg": None,
    },
}


def test_rsl_rl_style_env_trains_with_the_plain_dict_config(tmp_path):
    env = RslRlStyleEnv(num_envs=32)
    assert not isinstance(env, VecEnv)  # duck-typed, like Isaac Lab's wrapper (a subclass of rsl_rl's VecEnv)
    runner = OnPolicyRunner(env, TRAIN_CFG, log_dir=str(tmp_path), device="cpu")

    # Groups wired as configured: the actor reads policy only, the critic policy + the privileged critic group.
    actor, critic = runner.alg.actor, runner.alg.critic
    assert actor.obs_groups == ["policy"] and actor.obs_dim == RslRlStyleEnv.POLICY_DIM
    assert critic.obs_groups == ["policy", "critic"]
    assert critic.obs_dim == RslRlStyleEnv.POLICY_DIM + RslRlStyleEnv.CRITIC_DIM

    runner.learn(init_at_random_ep_len=True)  # max_iterations from the config
    assert runner.current_learning_iteration == 1  # iterations 0 and 1, numbered as in rsl_rl
    assert len(set(env.unwrapped.episode_length_buf.tolist())) > 1  # the runner reached the env's buffer
    assert (tmp_path / "model_1.pt").exists()
    runner.close()

    # The critic's value depends on the privileged group: changing it changes the value, not the action.
    obs = env.get_observations()
    changed = obs.clone()
    changed["critic"] = changed["critic"] + 1.0
    with torch.no_grad():
        assert not torch.allclose(critic(obs), critic(changed))
        torch.testing.assert_close(actor(obs), actor(changed))
