"""The typed configs: every setting of ``python -m rlcore.train``, its type, its default and what it does.

This file is the one home of the defaults. The runner reads :class:`RunnerCfg` (``RUNNER_DEFAULTS``), the
Hydra tree in ``conf/`` starts from these dataclasses (:func:`store_defaults` registers each as a node that the
``conf/`` files extend, so they hold only presets that differ from the defaults), and
``rlcore.config.check`` checks a composed config against them. The constructors' defaults equal these
(tests/cli/test_cli_config.py checks every field against the signature). ``docs/config.md`` lists every key
and is generated from this file (``python -m rlcore.config.doc > docs/config.md``): a comment on a field
(on its line, or on the lines just above it) is its description there.

What is typed and what is free-form:

- ``runner``, ``logger``, ``algorithm`` (per ``class_name``: PPO or Distillation), ``model.actor`` /
  ``model.critic`` (per ``class_name``: MLPModel, RNNModel, CNNModel, with ``distribution_cfg`` per
  distribution class) and ``extension`` (rnd, symmetry) are closed: unknown keys are errors.
- ``task``: the known keys are typed, ``task.env`` is free-form (the task's own settings, checked by the task)
  and extra keys are allowed.
- top level: :class:`TopLevelCfg`'s keys are typed; a task file may add top-level keys of its own (used
  through interpolation, e.g. ``task.num_envs: ${num_envs}``).
- A ``class_name`` given as a ``package.module:Class`` path (a user's own class) is not checked.

Which ``class_name`` selects which dataclass is the registry's (``rlcore.config.registry``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf

from rlcore.config import registry


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


# ============================================================================ top level and task
@dataclass
class TopLevelCfg:
    """Top-level keys (``seed=3``, ``device=cuda``, ...); a task file may add keys of its own."""

    seed: int = 1  # seeds torch, numpy and python (+ rank under torchrun) and the task
    device: str = "cpu"  # cpu, cuda, cuda:1 (under torchrun each rank takes cuda:<local rank>)
    threads: Optional[int] = None  # torch CPU threads (null: all cores)
    # run directory or model_<it>.pt to continue exactly (same task, model, algorithm), in its run directory, up to
    # runner.max_iterations (the run's total)
    resume: Optional[str] = None
    # model_<it>.pt or run directory whose weights (with their normalisers) start a fresh run: fine-tuning, other
    # num_envs or task settings; optimiser, iteration, env and generators start afresh
    init_from: Optional[str] = None
    teacher: Optional[str] = None  # PPO checkpoint or run directory whose actor is the teacher (algorithm=distillation)


@dataclass
class TaskCfg:
    """The task (``conf/task/<name>.yaml``); ``env`` is free-form and other keys are allowed."""

    name: str = MISSING  # the task's registered name (rlcore.env.task; set by each task file)
    # a module imported before the task is built: its import registers a task that is not installed through the
    # rlcore.tasks entry point (rlcore.env.task.register_task), e.g. my_package.my_task
    module: Optional[str] = None
    num_envs: int = 1  # parallel environments
    env: Optional[Dict[str, Any]] = None  # the task's own settings (e.g. rlcore_tasks/go2/config.py), checked by the task
    # observation sets -> observation groups, e.g. {actor: [policy], critic: [policy, privileged]}
    obs_groups: Dict[str, List[str]] = field(default_factory=dict)
    symmetry_function: Optional[str] = None  # 'package.module:function' mirroring obs/actions (extension=symmetry)


# ============================================================================ runner and logger
@dataclass
class RunnerCfg:
    """The runner (``runner.*``; rsl_rl's runner-level keys of the train config)."""

    num_steps_per_env: int = 24  # env steps per env per iteration (rollout length)
    max_iterations: int = 1500  # learning iterations of a run
    # wall-clock budget of a learn() call [minutes]: training stops after the first iteration that ends past it, saved
    # and exported as at max_iterations (null: off). Compares configurations by time rather than iterations.
    max_minutes: Optional[float] = None
    save_interval: int = 50  # a checkpoint model_<it>.pt every this many iterations (and the last one)
    # the run's name (rsl_rl's); rlcore.train's log directory is logs/<experiment_name>/<date>_<time>
    experiment_name: str = "rlcore"
    run_name: str = ""  # the wandb run name (empty: the run directory's name)
    clip_actions: Optional[float] = None  # clip actions to [-clip_actions, clip_actions] before env.step (null: off)
    check_for_nan: bool = True  # stop with an error at the first non-finite observation, reward or loss
    normalizer_warmup_steps: Optional[int] = None  # steps that fill the normalisers before training (null: one rollout)
    log_interval: int = 1  # console and logger output every this many iterations
    # what the console's first line leads with: return (the full episodes' mean return) or a task metric by name, as
    # runner.keep_best names it; a task file sets it where the return is not the number to watch (task=go2:
    # lin_vel_error); docs/cli.md#the-console
    headline_metric: str = "return"
    init_at_random_ep_len: bool = True  # start the envs at random episode lengths (learn()'s argument)
    video_interval: int = 0  # a clip of env 0 every this many iterations into <run>/videos/ (0: off)
    video_length: int = 150  # frames (control steps) per clip
    video_width: int = 640  # clip width in pixels
    video_height: int = 480  # clip height in pixels
    keep_best: Optional[str] = None  # metric by which <run>/model_best.pt is kept: return, or a task metric (null: off)
    stop_at: Optional[str] = None  # "<metric> <op> <value>", op one of < <= > >=: stop when an evaluation meets it
    eval_interval: int = 25  # iterations between evaluations (with keep_best or stop_at)
    eval_num_envs: int = 64  # envs of the separate evaluation env
    eval_steps: Optional[int] = None  # measured steps per evaluation (null: one episode)
    eval_warmup_steps: int = 0  # steps before the task metrics are measured
    # keep freed CPU memory in the process (glibc mallopt, rlcore.utils.cpu_memory): large tensors reuse mapped pages
    # instead of page-faulting fresh ones (a CPU update at 4096 envs: -19 % MLP, -24 % LSTM); held while learn() runs,
    # restored when it returns (the heap keeps its peak meanwhile)
    keep_cpu_memory: bool = True


@dataclass
class LoggerCfg:
    """Where training statistics go (``logger=tensorboard|wandb|none``)."""

    type: LoggerType = LoggerType.tensorboard  # tensorboard, wandb or none
    wandb_project: str = "rlcore"  # the wandb project (logger=wandb)


# ============================================================================ distributions
@dataclass
class GaussianDistributionCfg:
    """Diagonal Gaussian with a state-independent std parameter."""

    class_name: str = "GaussianDistribution"  # the class this section builds (rlcore.config.registry)
    init_std: float = 1.0  # initial standard deviation
    std_range: List[float] = field(default_factory=lambda: [1e-6, 1e6])  # [min, max] clamp of the std
    std_type: StdType = StdType.scalar  # parameterisation: scalar (std) or log (log std)
    learn_std: bool = True  # train the std (false: it stays at init_std)


@dataclass
class HeteroscedasticGaussianDistributionCfg:
    """Diagonal Gaussian whose std is an output of the model."""

    class_name: str = "HeteroscedasticGaussianDistribution"  # the class this section builds (rlcore.config.registry)
    init_std: float = 1.0  # standard deviation at initialisation
    std_range: List[float] = field(default_factory=lambda: [1e-6, 1e6])  # [min, max] clamp of the std
    std_type: StdType = StdType.scalar  # parameterisation: scalar (std) or log (log std)


@dataclass
class BetaDistributionCfg:
    """Beta distribution scaled to a bounded action range."""

    class_name: str = "BetaDistribution"  # the class this section builds (rlcore.config.registry)
    action_range: List[float] = field(default_factory=lambda: [-1.0, 1.0])  # [low, high] of the actions
    eps: float = 1e-6  # keeps samples off the range's ends


# ============================================================================ models
@dataclass
class MLPModelCfg:
    """Model over 1D observation groups: normalise, concatenate, MLP head, optional distribution."""

    class_name: str = "MLPModel"  # the class this section builds (rlcore.config.registry)
    # hidden layer sizes of the MLP head (-1: the input size); each shipped task sets its own (conf/task/)
    hidden_dims: List[int] = field(default_factory=lambda: [256, 256, 256])
    activation: str = "elu"  # activation name (rlcore.modules.activation)
    obs_normalization: bool = False  # normalise the observations with running statistics (exported with the model)
    # the action distribution, {class_name: GaussianDistribution, ...}; null: a deterministic model (the critic)
    distribution_cfg: Optional[Dict[str, Any]] = None
    init_gains: Optional[List[float]] = None  # orthogonal-init gain per Linear layer of the head (null: defaults)
    # a state estimator regressing privileged groups, its estimate fed to the head, trained by PPO and Distillation,
    # e.g. {target_groups: [base_lin_vel], hidden_dims: [128, 64]}; keys also activation, loss_coef, train_latent;
    # null: none (rlcore.models.StateEstimator)
    estimator_cfg: Optional[Dict[str, Any]] = None


@dataclass
class RNNModelCfg(MLPModelCfg):
    """Recurrent model: GRU/LSTM over the normalised 1D groups, then the MLP head."""

    class_name: str = "RNNModel"  # the class this section builds (rlcore.config.registry)
    rnn_type: RNNType = RNNType.lstm  # gru or lstm
    rnn_hidden_dim: int = 256  # hidden size of the recurrent layers
    rnn_num_layers: int = 1  # stacked recurrent layers


@dataclass
class CNNModelCfg(MLPModelCfg):
    """1D groups normalised, each 2D group (e.g. a height scan [N, 1, H, W]) through a CNN encoder."""

    class_name: str = "CNNModel"  # the class this section builds (rlcore.config.registry)
    cnn_cfg: Optional[Dict[str, Any]] = None  # CNN arguments (rlcore.modules.CNN) for every 2D group, or per group


# ============================================================================ algorithms
@dataclass
class ExplorationCfg:
    """PPO's exploration schedule (rlcore.extensions.exploration): a std ceiling and a per-env std factor."""

    # Ceiling on the actor's std over learning iterations: [[iteration, std_max], ...], piecewise linear, none before
    # the first point (e.g. [[300, 0.15]]: from iteration 300 the exploration noise is capped at 0.15).
    std_max_schedule: Optional[List[List[Any]]] = None
    # Per-env exploration scale: this fraction of the envs acts with the policy's std times low_noise_std_scale,
    # so deployment-like, nearly noise-free behaviour is trained on too.
    low_noise_fraction: float = 0.0
    low_noise_std_scale: float = 0.25  # the factor on the std in those envs, in (0, 1]
    low_noise_start: int = 0  # the first learning iteration at which low_noise_fraction applies


@dataclass
class PPOCfg:
    """PPO with GAE, clipped surrogate, value loss, entropy bonus and an adaptive-KL learning rate."""

    class_name: str = "PPO"  # the class this section builds (rlcore.config.registry)
    num_learning_epochs: int = 5  # passes over the rollout per update
    num_mini_batches: int = 4  # mini-batches per epoch
    clip_param: float = 0.2  # epsilon of the clipped ratio (and of the value clipping)
    gamma: float = 0.99  # discount
    lam: float = 0.95  # GAE lambda
    value_loss_coef: float = 1.0  # weight of the value loss
    entropy_coef: float = 0.01  # weight of the entropy bonus
    learning_rate: float = 1e-3  # initial learning rate
    max_grad_norm: float = 1.0  # bound on the gradient norm, of the actor and of the critic separately (as rsl_rl)
    optimizer: str = "adam"  # adam, adamw, rmsprop or sgd
    use_clipped_value_loss: bool = True  # clip the value around the rollout's value like the policy ratio
    schedule: Schedule = Schedule.adaptive  # adaptive (KL-driven learning rate) or fixed
    desired_kl: float = 0.01  # target KL of the adaptive schedule
    normalize_advantage_per_mini_batch: bool = False  # normalise advantages per mini-batch instead of per rollout
    use_mixed_precision: bool = False  # bf16 autocast for the update's forward passes
    grad_reduce_bucket_mb: float = 25.0  # size of the gradient all-reduce buckets (multi-GPU)
    reshuffle_each_epoch: bool = True  # a new permutation of the transitions every epoch (feed-forward models)
    reward_normalization: bool = False  # divide rewards by the running std of the discounted return
    use_bf16: bool = False  # same as use_mixed_precision (rlcore's older name)
    torch_compile: bool = False  # compile the models' MLP heads with torch.compile
    clip_gradients_jointly: bool = False  # clip the joint actor+critic gradient norm instead of each model's
    # an exploration schedule over learning iterations (std ceiling, per-env std factor; read by the factory, see
    # ExplorationCfg and the section algorithm.exploration_cfg below); null: none, the policy's std everywhere
    exploration_cfg: Optional[ExplorationCfg] = None
    share_cnn_encoders: bool = False  # the CNN critic reuses the actor's encoders (read by the factory)


@dataclass
class DistillationCfg:
    """Teacher-student distillation: behaviour cloning of a frozen PPO actor into the student."""

    class_name: str = "Distillation"  # the class this section builds (rlcore.config.registry)
    num_learning_epochs: int = 1  # replays of the rollout per update
    gradient_length: int = 15  # steps accumulated per optimiser step (truncated back-propagation window)
    learning_rate: float = 1e-3  # learning rate
    # the learning rate over learning iterations, [[iteration, lr], ...], linear between points, learning_rate
    # before the first (null: constant), e.g. [[150, 1e-3], [280, 1e-4]]: a decay over the last iterations
    learning_rate_schedule: Optional[List[List[Any]]] = None
    max_grad_norm: Optional[float] = None  # bound on the gradient norm of a window's summed loss (null: none)
    optimizer: str = "adam"  # adam, adamw, rmsprop or sgd
    loss_type: LossType = LossType.mse  # mse or huber
    use_mixed_precision: bool = False  # bf16 autocast for the student's forward passes
    use_bf16: bool = False  # same as use_mixed_precision (rlcore's older name)
    grad_reduce_bucket_mb: float = 25.0  # size of the gradient all-reduce buckets (multi-GPU)
    # the envs split into this many groups, each replayed through the rollout on its own: more, smaller optimiser
    # steps per update on the same data (1: every step on all envs, as rsl_rl)
    num_env_groups: int = 1
    # the loss of an env in its first start_steps steps after a reset counts start_weight times (1: unweighted, as
    # rsl_rl): trains the start from empty memory that a deployed recurrent student goes through
    start_weight: float = 1.0
    start_steps: int = 50  # steps after a reset that start_weight covers (50 = 1 s on Go2)
    # per env and step, the probability that the student's memory is cleared without an env reset (0: never, as
    # rsl_rl): trains acting from empty memory in every state, not only at episode starts
    forget_prob: float = 0.0


# ============================================================================ extensions
@dataclass
class RNDCfg:
    """Random Network Distillation: an intrinsic reward for novel states (reads the rnd_state observation set)."""

    weight: float = 0.5  # weight of the intrinsic reward (per second of env time)
    num_outputs: int = 64  # size of the embedding that the predictor learns to match
    predictor_hidden_dims: List[int] = field(default_factory=lambda: [256, 256])  # predictor MLP
    target_hidden_dims: List[int] = field(default_factory=lambda: [256, 256])  # random, frozen target MLP
    activation: str = "elu"  # activation of both networks
    learning_rate: float = 1e-3  # the predictor's learning rate
    state_normalization: bool = False  # normalise the states with running statistics
    reward_normalization: bool = False  # normalise the intrinsic reward with running statistics
    weight_schedule: Optional[Dict[str, Any]] = None  # {mode: constant|linear|step, ...} (null: constant weight)
    step_dt: Optional[float] = None  # seconds per env step (null: the env's step_dt)


@dataclass
class SymmetryCfg:
    """Left-right symmetry (feed-forward models): mirrored samples and/or a mirror loss; the task's mirror function."""

    use_data_augmentation: bool = False  # train PPO on each mini-batch plus its mirrored copies
    use_mirror_loss: bool = False  # add mirror_loss_coeff * mirror loss to PPO's loss
    mirror_loss_coeff: float = 0.0  # weight of the mirror loss


# ============================================================================ play and export
class ExportFormat(Enum):
    onnx = "onnx"
    jit = "jit"


@dataclass
class PlayCfg:
    """``python -m rlcore.play checkpoint=<path> | onnx=<file> | pretrained=<name> [key=value ...]``."""

    checkpoint: Optional[str] = None  # model_<it>.pt or a run directory (its newest checkpoint)
    pretrained: Optional[str] = None  # a policy shipped with a task (its TaskSpec.pretrained, e.g. go2_flat of task go2)
    task: Optional[str] = None  # checked against the policy's task (the checkpoint's or ONNX file's); null: unchecked
    episodes: int = 10  # episodes to run and report
    num_envs: Optional[int] = None  # parallel envs (default: min(episodes, the task's num_envs))
    device: str = "cpu"  # where the policy and the env run
    seed: int = 0  # seeds the env and the generators
    max_steps: Optional[int] = None  # hard cap on env steps (default: enough for the episodes)
    onnx: Optional[str] = None  # an exported ONNX policy through onnxruntime (alone: Go2 task rebuilt from its metadata)
    video: bool = False  # write an MP4 of env 0 (needs env.render)
    viewer: bool = False  # MuJoCo's interactive viewer, keyboard velocity commands (go2 tasks; rlcore/viewer.py)
    video_file: Optional[str] = None  # default: <checkpoint dir>/videos/<checkpoint name>.mp4 (./videos/ for a file alone)
    video_fps: Optional[float] = None  # default: 1 / the task's control period
    video_width: int = 640  # video width in pixels
    video_height: int = 480  # video height in pixels
    threads: Optional[int] = None  # torch CPU threads (null: all cores)


@dataclass
class ExportCfg:
    """``python -m rlcore.export checkpoint=<path> format=onnx|jit [key=value ...]``."""

    checkpoint: Optional[str] = None  # model_<it>.pt or a run directory (its newest checkpoint)
    format: ExportFormat = ExportFormat.onnx  # onnx or jit (TorchScript)
    output: Optional[str] = None  # default: <checkpoint dir>/exported/policy.onnx (or policy.pt)
    num_envs: int = 8  # envs stepped to record the verification observations
    verify_steps: int = 32  # recorded steps the exported file is checked on
    atol: float = 1e-5  # largest allowed |exported - eager| on any output ...
    rtol: float = 0.0  # ... plus rtol * |eager| (0: the plain absolute bound)
    device: str = "cpu"  # where the env runs while recording
    seed: int = 0  # seeds the env that records the verification observations
    threads: Optional[int] = None  # torch CPU threads (null: all cores)
    # Integral action in the ONNX graph (rlcore_tasks.go2.command_integral): the policy is shown cmd + u, with
    # u += gain * dt * (cmd - its own velocity estimate), |u| <= limit; u is a state input/output (u_in/u_out).
    # null: the task's default (task=go2: commands.integral_gain, 2.0) where the policy can carry it (an actor with
    # a base_lin_vel estimator: MLP or RNN, PPO actor or distilled student); 0: the policy alone; > 0: required.
    command_integral_gain: Optional[float] = None  # [1/s]
    command_integral_limit: Optional[float] = None  # [m/s] per axis (null: the task's, else 0.3)
    # [m/s] an axis integrates only while |cmd - estimate| < band: anti-windup (null: the task's, else 0 = always)
    command_integral_band: Optional[float] = None
    # The loop's yaw axis, closed on the gyro (u_yaw += gain * dt * (cmd_yaw - gyro_z)); null: the task's (task=go2:
    # commands.integral_yaw_gain / _limit / _band)
    command_integral_yaw_gain: Optional[float] = None  # [1/s] (0: no yaw axis)
    command_integral_yaw_limit: Optional[float] = None  # [rad/s] bound on u_yaw
    command_integral_yaw_band: Optional[float] = None  # [rad/s] integrates only while |cmd_yaw - gyro_z| < band


# ============================================================================ the defaults, as others read them
def defaults_of(schema: type) -> dict:
    """The defaults of a typed config as a plain dict (enums as strings; a required field as ``"???"``)."""
    return OmegaConf.to_container(OmegaConf.structured(schema), enum_to_str=True)


RUNNER_LOGGER_KEYS = {"logger": "type", "wandb_project": "wandb_project"}
"""The runner-level keys of the rsl_rl train config that come from the ``logger`` section: key -> LoggerCfg field."""

LEARN_ARGUMENTS = ("init_at_random_ep_len",)
"""RunnerCfg fields that are arguments of ``runner.learn()``, not runner-level keys of the train config."""


def runner_defaults() -> dict:
    """The runner-level keys of the rsl_rl train config and their defaults (``OnPolicyRunner``'s).

    RunnerCfg's fields (less :data:`LEARN_ARGUMENTS`), the logger keys (:data:`RUNNER_LOGGER_KEYS`), and ``seed``:
    None, so that a runner built from Python does not seed unless asked (``rlcore.train`` passes ``seed``).
    """
    runner = {k: v for k, v in defaults_of(RunnerCfg).items() if k not in LEARN_ARGUMENTS}
    logger = defaults_of(LoggerCfg)
    return {"seed": None, **runner, **{key: logger[name] for key, name in RUNNER_LOGGER_KEYS.items()}}


SCHEMA_GROUP = "schema"
"""Hydra config group of the defaults nodes (``/schema/algorithm/PPO`` ...) that the ``conf/`` files extend."""

SECTION_SCHEMAS: dict[str, type] = {"top": TopLevelCfg, "task": TaskCfg, "runner": RunnerCfg, "logger": LoggerCfg}
"""The sections that have one typed config (the others are chosen by ``class_name`` through the registry)."""


def store_defaults() -> None:
    """Register every typed config's defaults as a Hydra node (``schema/<section>``, ``schema/<kind>/<name>``).

    A ``conf/`` file starts from one with a defaults-list entry, e.g. ``- /schema/algorithm/PPO@_here_``, and
    sets only what differs. The nodes are plain (untyped): the checks and their messages stay those of
    ``rlcore.config.check``. Called when Hydra imports ``rlcore.config.schema_nodes`` (``conf/config.yaml``'s
    ``hydra.searchpath``); idempotent.
    """
    store = ConfigStore.instance()
    for name, schema in SECTION_SCHEMAS.items():
        store.store(group=SCHEMA_GROUP, name=name, node=defaults_of(schema))
    for kind in ("algorithm", "model", "distribution", "extension"):
        for entry in registry.entries(kind):
            store.store(group=f"{SCHEMA_GROUP}/{kind}", name=entry.name, node=defaults_of(entry.config_class()))

