"""Build an algorithm, its models, storage and extensions from the rsl_rl 5.x-style nested train config.

The config (a plain dict; Hydra configs resolve to the same dict) looks like::

    {"num_steps_per_env": 24, "obs_groups": {"actor": ["policy"], "critic": ["policy", "privileged"]},
     "actor": {"class_name": "MLPModel", "hidden_dims": [512, 256, 128], "obs_normalization": True,
               "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0}},
     "critic": {"class_name": "MLPModel", "hidden_dims": [512, 256, 128]},
     "algorithm": {"class_name": "PPO", "learning_rate": 1e-3, "rnd_cfg": None, "symmetry_cfg": None,
                   "exploration_cfg": {"std_max_schedule": [[300, 0.15]], "low_noise_fraction": 0.25}}}

``exploration_cfg`` (rlcore's, not a PPO argument) becomes an
:class:`~rlcore.extensions.exploration.ExplorationSchedule` handed to PPO in ``extensions``; the older flat keys
(``low_noise_fraction``, ``std_max_schedule``, ... directly in ``algorithm``, as older checkpoints hold them) are
read as its settings.
"""

from __future__ import annotations

from tensordict import TensorDict

from rlcore.config.resolve import resolve_class, resolve_obs_groups
from rlcore.env import VecEnv
from rlcore.errors import ConfigError
from rlcore.extensions.exploration import build_exploration_schedule, pop_exploration_cfg
from rlcore.extensions.rnd import env_step_dt, resolve_rnd_config
from rlcore.extensions.symmetry import resolve_symmetry_config
from rlcore.storage import RolloutStorage


def _extension_cfgs(alg_cfg: dict, obs: TensorDict, obs_groups: dict, env: VecEnv) -> dict:
    """Fill the RND and symmetry configs with what they need from the env and observations (their resolvers in
    rlcore.extensions, rsl_rl's names)."""
    return resolve_symmetry_config(resolve_rnd_config(alg_cfg, obs, obs_groups, env), env)


def construct_ppo(obs: TensorDict, env: VecEnv, cfg: dict, device: str):
    """PPO from ``cfg``; ``cfg["obs_groups"]`` is replaced by its resolved form."""
    alg_class, alg_cfg = resolve_class(cfg["algorithm"])
    actor_class, actor_cfg = resolve_class(cfg["actor"])
    critic_class, critic_cfg = resolve_class(cfg["critic"])
    required = ["actor", "critic"] + (["rnd_state"] if alg_cfg.get("rnd_cfg") is not None else [])
    cfg["obs_groups"] = resolve_obs_groups(obs, cfg.get("obs_groups"), required)
    alg_cfg = _extension_cfgs(alg_cfg, obs, cfg["obs_groups"], env)
    exploration = build_exploration_schedule(pop_exploration_cfg(alg_cfg))

    actor = actor_class(obs, cfg["obs_groups"], "actor", env.num_actions, **actor_cfg).to(device)
    if alg_cfg.pop("share_cnn_encoders", False):
        if not hasattr(actor, "cnns"):
            raise ConfigError(f"share_cnn_encoders needs a CNNModel actor, but the actor is {type(actor).__name__}; "
                             "use model=cnn or drop share_cnn_encoders.")
        critic_cfg["cnns"] = actor.cnns
    critic = critic_class(obs, cfg["obs_groups"], "critic", 1, **critic_cfg).to(device)
    storage = RolloutStorage("rl", env.num_envs, int(cfg["num_steps_per_env"]), obs, [env.num_actions], device)
    if exploration:
        alg_cfg["extensions"] = [*exploration, *alg_cfg.get("extensions", ())]
    return alg_class(actor, critic, storage, device=device, multi_gpu_cfg=cfg.get("multi_gpu"), **alg_cfg)


def construct_distillation(obs: TensorDict, env: VecEnv, cfg: dict, device: str):
    """Distillation (student + frozen teacher) from ``cfg``."""
    alg_class, alg_cfg = resolve_class(cfg["algorithm"])  # Distillation itself refuses rnd_cfg / symmetry_cfg
    student_class, student_cfg = resolve_class(cfg["student"])
    teacher_class, teacher_cfg = resolve_class(cfg["teacher"])
    cfg["obs_groups"] = resolve_obs_groups(obs, cfg.get("obs_groups"), ["student", "teacher"])
    student = student_class(obs, cfg["obs_groups"], "student", env.num_actions, **student_cfg).to(device)
    teacher = teacher_class(obs, cfg["obs_groups"], "teacher", env.num_actions, **teacher_cfg).to(device)
    storage = RolloutStorage("distillation", env.num_envs, int(cfg["num_steps_per_env"]), obs, [env.num_actions],
                             device)
    return alg_class(student, teacher, storage, device=device, multi_gpu_cfg=cfg.get("multi_gpu"), **alg_cfg)


def construct_algorithm(obs: TensorDict, env: VecEnv, cfg: dict, device: str):
    """Build the algorithm named by ``cfg["algorithm"]["class_name"]`` (PPO or Distillation)."""
    cfg = cfg if isinstance(cfg, dict) else dict(cfg)
    alg_class, _ = resolve_class(cfg["algorithm"])
    builder = getattr(alg_class, "construct_algorithm", None)
    if builder is None:
        raise ConfigError(f"{alg_class.__name__} has no construct_algorithm(obs, env, cfg, device).")
    return builder(obs, env, cfg, device)


__all__ = ["construct_algorithm", "construct_distillation", "construct_ppo", "env_step_dt"]
