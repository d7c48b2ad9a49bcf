"""Structured configs (dataclasses) for the Hydra tree in ``conf/`` and the checks that use them.

Hydra composes plain YAML; :func:`validate_config` then checks the composed, resolved config section by
section against these dataclasses (``OmegaConf.structured`` + merge), so a wrong type or an unknown key
fails at start-up with the offending key path, e.g. ``runner.max_iterations: Value 'abc' of type 'str'
could not be converted to Integer``.

What is typed and what is free-form:

- ``runner``, ``logger``, ``algorithm`` (per ``class_name``: PPO or Distillation), ``model.actor`` /
  ``model.critic`` (per ``class_name``: MLPModel, RNNModel, CNNModel, with ``distribution_cfg`` per
  distribution class) and ``extension`` (rnd, symmetry) are closed: unknown keys are errors.
- ``task``: the known keys (``name``, ``num_envs``, ``obs_groups``, ``symmetry_function``) are typed,
  ``task.env`` is free-form (the task's own settings, checked by the task) and extra keys are allowed.
- top level: ``seed``, ``device``, ``threads``, ``resume``, ``teacher`` are typed; a task file may add
  top-level keys of its own (used through interpolation, e.g. ``task.num_envs: ${num_envs}``).
- A ``class_name`` given as a ``package.module:Class`` path (a user's own class) is not checked.

The dataclass defaults equal the constructor defaults (tests/cli/test_config.py checks both against
the signatures), so filling a default never changes behaviour.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any, Dict, List, Optional

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from rlcore.errors import ConfigError  # a value of the wrong type, out of range, or an unknown key


# ============================================================================ enums (lower-case names = values)
class LoggerType(Enum):
    tensorboard = "tensorboard"
    wandb = "wandb"
    none = "none"


class RNNType(Enum):
    gru = "gru"
    lstm = "lstm"


class StdType(Enum):
    scalar = "scalar"
    log = "log"


class Schedule(Enum):
    adaptive = "adaptive"
    fixed = "fixed"


class LossType(Enum):
    mse = "mse"
    huber = "huber"


# ============================================================================ runner and logger
@dataclass
class RunnerCfg:
    num_steps_per_env: int = 24
    max_iterations: int = 1500
    save_interval: int = 50
    experiment_name: str = "rlcore"
    run_name: str = ""
    clip_actions: Optional[float] = None
    check_for_nan: bool = True
    normalizer_warmup_steps: Optional[int] = None
    log_interval: int = 1
    init_at_random_ep_len: bool = True
    video_interval: int = 0  # a clip of env 0 every this many iterations (0: off)
    video_length: int = 150  # frames (control steps) per clip
    video_width: int = 640
    video_height: int = 480
    keep_best: Optional[str] = None  # metric by which model_best.pt is kept: return, or a task metric
    stop_at: Optional[str] = None  # "<metric> <op> <value>", op one of < <= > >=
    eval_interval: int = 25  # iterations between evaluations (with keep_best or stop_at)
    eval_num_envs: int = 64  # envs of the separate evaluation env
    eval_steps: Optional[int] = None  # measured steps per evaluation (null: one episode)
    eval_warmup_steps: int = 0  # steps before the task metrics are measured


@dataclass
class LoggerCfg:
    type: LoggerType = LoggerType.tensorboard
    wandb_project: str = "rlcore"


# ============================================================================ distributions
@dataclass
class GaussianDistributionCfg:
    class_name: str = "GaussianDistribution"
    init_std: float = 1.0
    std_range: List[float] = field(default_factory=lambda: [1e-6, 1e6])
    std_type: StdType = StdType.scalar
    learn_std: bool = True


@dataclass
class HeteroscedasticGaussianDistributionCfg:
    class_name: str = "HeteroscedasticGaussianDistribution"
    init_std: float = 1.0
    std_range: List[float] = field(default_factory=lambda: [1e-6, 1e6])
    std_type: StdType = StdType.scalar


@dataclass
class BetaDistributionCfg:
    class_name: str = "BetaDistribution"
    action_range: List[float] = field(default_factory=lambda: [-1.0, 1.0])
    eps: float = 1e-6


DISTRIBUTION_SCHEMAS: dict[str, type] = {
    "GaussianDistribution": GaussianDistributionCfg,
    "HeteroscedasticGaussianDistribution": HeteroscedasticGaussianDistributionCfg,
    "BetaDistribution": BetaDistributionCfg,
}


# ============================================================================ models
@dataclass
class MLPModelCfg:
    class_name: str = "MLPModel"
    hidden_dims: List[int] = field(default_factory=lambda: [256, 256, 256])
    activation: str = "elu"
    obs_normalization: bool = False
    distribution_cfg: Optional[Dict[str, Any]] = None
    init_gains: Optional[List[float]] = None


@dataclass
class RNNModelCfg(MLPModelCfg):
    class_name: str = "RNNModel"
    rnn_type: RNNType = RNNType.lstm
    rnn_hidden_dim: int = 256
    rnn_num_layers: int = 1


@dataclass
class CNNModelCfg(MLPModelCfg):
    class_name: str = "CNNModel"
    cnn_cfg: Optional[Dict[str, Any]] = None  # one CNN config, or per-2D-group configs


MODEL_SCHEMAS: dict[str, type] = {
    "MLPModel": MLPModelCfg,
    "RNNModel": RNNModelCfg,
    "CNNModel": CNNModelCfg,
    # rsl_rl 4.x names accepted by rlcore.utils.config
    "ActorCritic": MLPModelCfg,
    "ActorCriticRecurrent": RNNModelCfg,
    "ActorCriticCNN": CNNModelCfg,
}


# ============================================================================ algorithms
@dataclass
class PPOCfg:
    class_name: str = "PPO"
    num_learning_epochs: int = 5
    num_mini_batches: int = 4
    clip_param: float = 0.2
    gamma: float = 0.99
    lam: float = 0.95
    value_loss_coef: float = 1.0
    entropy_coef: float = 0.01
    learning_rate: float = 1e-3
    max_grad_norm: float = 1.0
    optimizer: str = "adam"
    use_clipped_value_loss: bool = True
    schedule: Schedule = Schedule.adaptive
    desired_kl: float = 0.01
    normalize_advantage_per_mini_batch: bool = False
    use_mixed_precision: bool = False
    grad_reduce_bucket_mb: float = 25.0
    # rlcore's own settings (after rsl_rl's in the constructor)
    reshuffle_each_epoch: bool = True
    reward_normalization: bool = False
    use_bf16: bool = False
    torch_compile: bool = False
    clip_gradients_jointly: bool = False  # clip the joint actor+critic gradient norm instead of each model's
    share_cnn_encoders: bool = False  # consumed by the factory (CNN critic reuses the actor's encoders)


@dataclass
class DistillationCfg:
    class_name: str = "Distillation"
    num_learning_epochs: int = 1
    gradient_length: int = 15
    learning_rate: float = 1e-3
    max_grad_norm: Optional[float] = None
    optimizer: str = "adam"
    loss_type: LossType = LossType.mse
    use_mixed_precision: bool = False
    use_bf16: bool = False
    grad_reduce_bucket_mb: float = 25.0


ALGORITHM_SCHEMAS: dict[str, type] = {"PPO": PPOCfg, "Distillation": DistillationCfg}


# ============================================================================ extensions
@dataclass
class RNDCfg:
    weight: float = 0.5
    num_outputs: int = 64
    predictor_hidden_dims: List[int] = field(default_factory=lambda: [256, 256])
    target_hidden_dims: List[int] = field(default_factory=lambda: [256, 256])
    activation: str = "elu"
    learning_rate: float = 1e-3
    state_normalization: bool = False
    reward_normalization: bool = False
    weight_schedule: Optional[Dict[str, Any]] = None
    step_dt: Optional[float] = None  # seconds per env step; None: the env's step_dt


@dataclass
class SymmetryCfg:
    use_data_augmentation: bool = False
    use_mirror_loss: bool = False
    mirror_loss_coeff: float = 0.0


EXTENSION_SCHEMAS: dict[str, type] = {"rnd": RNDCfg, "symmetry": SymmetryCfg}


# ============================================================================ task and top level
@dataclass
class TaskCfg:
    """Known task keys; ``env`` is free-form and other keys are allowed (checked open, not closed)."""

    name: str = "???"
    num_envs: int = 1
    env: Optional[Dict[str, Any]] = None
    obs_groups: Dict[str, List[str]] = field(default_factory=dict)
    symmetry_function: Optional[str] = None


@dataclass
class TopLevelCfg:
    """Known top-level keys; groups are checked by their own schemas, task-file extras are allowed."""

    seed: int = 1
    device: str = "cpu"
    threads: Optional[int] = None
    resume: Optional[str] = None
    teacher: Optional[str] = None


# ============================================================================ play and export
class ExportFormat(Enum):
    onnx = "onnx"
    jit = "jit"


@dataclass
class PlayCfg:
    """``python -m rlcore.play checkpoint=<path> [key=value ...]``."""

    checkpoint: Optional[str] = None  # model_<it>.pt or a run directory (its newest checkpoint)
    episodes: int = 10  # episodes to run and report
    num_envs: Optional[int] = None  # parallel envs (default: min(episodes, the task's num_envs))
    device: str = "cpu"
    seed: int = 0
    max_steps: Optional[int] = None  # hard cap on env steps (default: enough for the episodes)
    onnx: Optional[str] = None  # run this exported ONNX policy through onnxruntime instead of torch
    video: bool = False  # write an MP4 of env 0 (needs env.render)
    video_file: Optional[str] = None  # default: <checkpoint dir>/videos/<checkpoint name>.mp4
    video_fps: Optional[float] = None  # default: 1 / the task's control period
    video_width: int = 640
    video_height: int = 480
    threads: Optional[int] = None


@dataclass
class ExportCfg:
    """``python -m rlcore.export checkpoint=<path> format=onnx|jit [key=value ...]``."""

    checkpoint: Optional[str] = None
    format: ExportFormat = ExportFormat.onnx
    output: Optional[str] = None  # default: <checkpoint dir>/exported/policy.onnx (or policy.pt)
    num_envs: int = 8  # envs stepped to record the verification observations
    verify_steps: int = 32  # recorded steps the exported file is checked on
    atol: float = 1e-5  # largest allowed |exported - eager| on any output ...
    rtol: float = 0.0  # ... plus rtol * |eager| (0: the plain absolute bound)
    device: str = "cpu"  # where the env runs while recording
    seed: int = 0
    threads: Optional[int] = None


# ============================================================================ checking
def check_against(data: Any, schema: type, path: str, closed: bool = True) -> dict:
    """``data`` merged onto ``schema``'s defaults, type-checked; returns a plain dict (enums as strings).

    Args:
        data: the section (a mapping).
        schema: its dataclass.
        path: the section's key path, used in messages (``"runner"``, ``"model.actor"``).
        closed: unknown keys are errors (else they are kept unchecked).

    Raises:
        ConfigError: naming the key path of the first wrong value or unknown key.
    """
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings, got {data!r}.")
    known = {f.name for f in fields(schema)}
    extra = {k: v for k, v in data.items() if k not in known}
    if extra and closed:
        key = sorted(extra)[0]
        owner = data.get("class_name") or schema.__name__.removesuffix("Cfg")
        raise ConfigError(f"{_join(path, key)}: unknown key for {owner}; valid keys: {', '.join(sorted(known))}.")
    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), {k: v for k, v in data.items() if k in known})
        out = OmegaConf.to_container(merged, resolve=True, enum_to_str=True)
    except OmegaConfBaseException as err:
        raise ConfigError(f"{_join(path, str(getattr(err, 'full_key', '') or ''))}: {_first_line(err)}.") from None
    for name, value in out.items():
        if value == "???":
            raise ConfigError(f"{_join(path, name)}: required, but not set.")
    out.update(copy.deepcopy(extra))
    return out


def _join(path: str, key: str) -> str:
    if not key:
        return path
    return f"{path}{key}" if key.startswith("[") else f"{path}.{key}" if path else key


def _first_line(err: Exception) -> str:
    msg = getattr(err, "msg", None) or str(err)
    return str(msg).strip().splitlines()[0].rstrip(".")


def _check_positive(section: dict, path: str, keys: tuple[str, ...], minimum: int = 1) -> None:
    for key in keys:
        value = section.get(key)
        if value is not None and value < minimum:
            raise ConfigError(f"{path}.{key}: must be >= {minimum}, got {value}.")


def _check_choice(section: dict, path: str, key: str, valid: list[str]) -> None:
    value = section.get(key)
    if value is not None and str(value).lower() not in valid:
        raise ConfigError(f"{path}.{key}: unknown value {value!r}; valid: {', '.join(valid)}.")


def _activations() -> list[str]:
    from rlcore.modules.activation import ACTIVATIONS

    return sorted(ACTIVATIONS)


OPTIMIZERS = ["adam", "adamw", "rmsprop", "sgd"]


def _check_model(data: Any, path: str, with_distribution: bool) -> dict:
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of model settings, got {data!r}.")
    name = data.get("class_name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{path}.class_name: required (choose a model group: model=mlp|cnn|rnn, or set it to one of "
                          f"{', '.join(sorted(MODEL_SCHEMAS))} or a 'package.module:Class' path).")
    schema = MODEL_SCHEMAS.get(name)
    if schema is None:
        if ":" in name or "." in name:
            return copy.deepcopy(data)  # a user's own model class: its constructor checks its arguments
        raise ConfigError(f"{path}.class_name: unknown model '{name}'; valid: {', '.join(sorted(MODEL_SCHEMAS))}, "
                          "or a 'package.module:Class' path.")
    out = check_against(data, schema, path)
    if any(int(h) < 1 and int(h) != -1 for h in out["hidden_dims"]):
        raise ConfigError(f"{path}.hidden_dims: sizes must be >= 1 (or -1 for the input size), "
                          f"got {out['hidden_dims']}.")
    _check_positive(out, path, ("rnn_hidden_dim", "rnn_num_layers"))
    _check_choice(out, path, "activation", _activations())
    dist = out.get("distribution_cfg")
    if dist is not None:
        dname = dist.get("class_name")
        if not isinstance(dname, str) or not (":" in dname or "." in dname):  # user classes are not checked
            from rlcore.modules.distribution import _resolve_distribution_class

            try:
                cls = _resolve_distribution_class(dname)
            except (ValueError, TypeError, KeyError):
                raise ConfigError(f"{path}.distribution_cfg.class_name: unknown distribution {dname!r}; valid: "
                                  f"{', '.join(sorted(DISTRIBUTION_SCHEMAS))}.") from None
            dschema = DISTRIBUTION_SCHEMAS.get(cls.__name__)
            if dschema is not None:
                checked = check_against({**dist, "class_name": cls.__name__}, dschema, f"{path}.distribution_cfg")
                checked["class_name"] = dname
                out["distribution_cfg"] = checked
    elif with_distribution:
        raise ConfigError(f"{path}.distribution_cfg: the policy needs an action distribution, e.g. "
                          "{class_name: GaussianDistribution, init_std: 1.0}.")
    return out


def validate_config(cfg: dict) -> tuple[dict, list[str]]:
    """Check a composed, resolved Hydra config (a plain dict) and return ``(typed config, notices)``.

    The returned dict has every typed section filled with its defaults and converted to its declared
    types. With ``algorithm=distillation``, PPO-only algorithm keys that a task file sets (``gamma``,
    ``entropy_coef``, ...) are dropped with a notice instead of being rejected.

    Raises:
        ConfigError: one line naming the key path.
    """
    out = copy.deepcopy(cfg)
    notices: list[str] = []
    top = {f.name for f in fields(TopLevelCfg)}
    out.update(check_against({k: v for k, v in cfg.items() if k in top}, TopLevelCfg, ""))

    for group in ("task", "model", "algorithm", "runner", "logger"):
        if group not in cfg or cfg[group] is None:
            raise ConfigError(f"{group}: missing from the config (choose one with {group}=<option>).")

    out["runner"] = check_against(cfg["runner"], RunnerCfg, "runner")
    _check_positive(out["runner"], "runner", ("num_steps_per_env", "save_interval", "log_interval"))
    _check_positive(out["runner"], "runner", ("max_iterations", "normalizer_warmup_steps"), minimum=0)
    out["logger"] = check_against(cfg["logger"], LoggerCfg, "logger")

    task = check_against(cfg["task"], TaskCfg, "task", closed=False)
    _check_positive(task, "task", ("num_envs",))
    task["env"] = task.get("env") or {}
    out["task"] = task

    alg = cfg["algorithm"]
    if not isinstance(alg, dict) or not isinstance(alg.get("class_name"), str):
        raise ConfigError("algorithm.class_name: required (PPO or Distillation, or a 'package.module:Class' path).")
    name = alg["class_name"]
    schema = ALGORITHM_SCHEMAS.get(name)
    if schema is None and not (":" in name or "." in name):
        raise ConfigError(f"algorithm.class_name: unknown algorithm '{name}'; valid: "
                          f"{', '.join(sorted(ALGORITHM_SCHEMAS))}, or a 'package.module:Class' path.")
    if schema is DistillationCfg:
        alg = dict(alg)
        ppo_only = {f.name for f in fields(PPOCfg)} - {f.name for f in fields(DistillationCfg)}
        dropped = sorted(k for k in alg if k in ppo_only)
        for k in dropped:
            alg.pop(k)
        if dropped:
            notices.append(f"algorithm=distillation: ignoring PPO-only settings {', '.join(dropped)}")
    if schema is not None:
        alg = check_against(alg, schema, "algorithm")
        _check_positive(alg, "algorithm", ("num_learning_epochs", "num_mini_batches", "gradient_length"))
        _check_choice(alg, "algorithm", "optimizer", OPTIMIZERS)
    out["algorithm"] = alg

    model = cfg["model"]
    if not isinstance(model, dict):
        raise ConfigError(f"model: expected actor and critic settings, got {model!r}.")
    unknown = sorted(set(model) - {"actor", "critic"})
    if unknown:
        raise ConfigError(f"model.{unknown[0]}: unknown key; a model group holds 'actor' and 'critic'.")
    if "actor" not in model:
        raise ConfigError("model.actor: missing; a model group must define the actor (the student in distillation).")
    out["model"] = {"actor": _check_model(model["actor"], "model.actor", with_distribution=True)}
    if model.get("critic") is not None:
        out["model"]["critic"] = _check_model(model["critic"], "model.critic", with_distribution=False)

    ext = cfg.get("extension") or {}
    if not isinstance(ext, dict):
        raise ConfigError(f"extension: expected a mapping, got {ext!r}; choose extensions with "
                          "extension=[rnd,symmetry].")
    checked = {}
    for key, value in ext.items():
        if key not in EXTENSION_SCHEMAS:
            raise ConfigError(f"extension.{key}: unknown extension; valid: {', '.join(sorted(EXTENSION_SCHEMAS))}.")
        checked[key] = check_against(value, EXTENSION_SCHEMAS[key], f"extension.{key}")
        _check_choice(checked[key], f"extension.{key}", "activation", _activations())
    out["extension"] = checked
    return out, notices
