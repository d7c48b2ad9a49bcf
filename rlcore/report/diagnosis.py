"""Automatic diagnosis of training curves: which part of PPO a bad curve points at, and what to change
(reading training symptoms back to the stage that went wrong: critic, entropy, adaptive KL, rewards, terminations).

:func:`diagnose` reads the logged scalars of one run (``{tag: [(iteration, value), ...]}``, as
:func:`load_scalars` returns them from the run's TensorBoard event files) and applies one rule per known
failure pattern (``RULES``): NaN/Inf, value loss exploding, action std or entropy collapsing (or the std
growing), KL spikes, the adaptive learning rate pinned at its floor or cap, returns collapsing after a peak
(read on rlcore's full-episode return curve; on an older curve that averaged partial episodes too, only where the
return per step of episode fell as well), episode length collapsing, and a run that ended before its planned
iterations (the NaN guard raises). Each :class:`Finding` names the iteration where the pattern starts and a
suggested change. :func:`format_findings` turns them into console text (the runner's end-of-training summary);
``python -m rlcore.report`` puts them in its HTML page.

Pure Python (no torch); tensorboard is imported only by :func:`load_scalars`. Thresholds are module constants.
"""

from __future__ import annotations

import bisect
import glob
import math
import os
import statistics
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TextIO

from rlcore.errors import ConfigError, MissingPathError

Scalars = Mapping[str, Sequence[tuple[int, float]]]
"""``{tag: [(iteration, value), ...]}``: the logged scalars of one run."""

# Tags rlcore's logger writes (rlcore.logging.logger), then rsl_rl's names for the same curves.
RETURN_TAGS = ("Episode/mean_return", "Train/mean_reward")
#: Written by rlcore's logger since its ``Episode/mean_return`` counts full episodes only (those that started from a
#: reset). Without it (older rlcore runs, rsl_rl's ``Train/mean_reward``) the return curve also averages the partial
#: first episodes of envs started at random points of their episodes, and of every resume: short episodes, whose
#: returns grow (or, with negative rewards, fall) as the episodes reach their real length.
PER_STEP_TAGS = ("Episode/mean_reward_per_step",)
LENGTH_TAGS = ("Episode/mean_length", "Train/mean_episode_length")
VALUE_TAGS = ("Loss/value", "Loss/value_function")
ENTROPY_TAGS = ("Loss/entropy",)
KL_TAGS = ("Loss/kl",)
LR_TAGS = ("Loss/learning_rate",)
STD_TAGS = ("Policy/mean_std", "Policy/mean_noise_std")
#: Written every iteration while the policy is finite: one stopping before the run does became NaN/Inf
#: (the logger skips non-finite values).
CORE_TAGS = ("Loss/value", "Loss/surrogate", "Loss/entropy", "Loss/kl", "Loss/behavior", "Policy/mean_std")

LR_MIN, LR_MAX = 1e-5, 1e-2
"""The adaptive schedule's learning-rate bounds (the same as rlcore.algorithms.ppo's; a test checks it)."""
DEFAULT_DESIRED_KL = 0.01
GAUSSIAN_ENTROPY_UNIT_STD = 0.5 * math.log(2.0 * math.pi * math.e)  # entropy of N(mu, 1) per action dimension

MIN_POINTS = 10  # curves with fewer points are only checked for NaN/Inf and the learning-rate bounds
VALUE_JUMP = 10.0  # value loss: median of a window over the median of the window before
VALUE_GROWTH = 100.0  # value loss: smoothed value over its lowest smoothed value so far ...
VALUE_OVER_START = 10.0  # ... and over its level in the first window
STD_COLLAPSE = 0.1  # action std below this fraction of its first value
STD_FLOOR = 1e-3  # or below this absolute value
STD_GROWTH = 5.0  # action std above this multiple of its first value
KL_SPIKE = 5.0  # KL above this multiple of desired_kl
KL_SPIKE_SHARE = 0.05  # with the adaptive schedule away from its bounds, spikes in more than this share of iterations
LR_PIN_SHARE = 0.05  # learning rate at a bound for at least this share of the iterations (and >= 3 in a row)
COLLAPSE_KEEP = 0.5  # returns: less than this share of the gain up to the peak is left at the end
LENGTH_KEEP = 0.5  # episode length: less than this share of its peak is left at the end
NOISE_SIGMAS = 3.0  # a collapse must exceed this many times the curve's iteration-to-iteration noise


@dataclass(frozen=True)
class Finding:
    """One problem seen in the curves.

    Attributes:
        rule: the rule's id (a key of ``RULES``), e.g. ``"value_loss_explosion"``.
        severity: ``"error"`` (the run is broken), ``"warning"`` (likely a problem) or ``"info"`` (worth a look).
        iteration: the iteration where the pattern starts.
        tag: the curve it was seen on (e.g. ``"Loss/value"``).
        message: what happened, with the numbers.
        suggestion: what to change.
    """

    rule: str
    severity: str
    iteration: int
    tag: str
    message: str
    suggestion: str


# ============================================================================ reading a run
def load_scalars(run_dir: str) -> dict[str, list[tuple[int, float]]]:
    """All scalar curves of the TensorBoard event files in ``run_dir`` (not its subfolders), sorted by iteration.

    Several event files (a run continued in the same folder) are read in order; for an iteration logged twice
    the later value wins.

    Raises:
        MissingPathError: ``run_dir`` does not exist (a user error).
        ConfigError: ``run_dir`` holds no event file.
    """
    if not os.path.isdir(run_dir):
        raise MissingPathError(f"run directory not found: {run_dir}")
    if not glob.glob(os.path.join(glob.escape(run_dir), "*tfevents*")):
        raise ConfigError(f"no TensorBoard event files (events.out.tfevents.*) in {run_dir}: give a run directory "
                          "of rlcore.train trained with logger=tensorboard (logger=wandb and logger=none write none).")
    # tensorboard takes seconds to import: only when event files are read
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    acc = EventAccumulator(run_dir, size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    tags = acc.Tags()
    out: dict[str, dict[int, float]] = {}
    for tag in tags.get("scalars", []):
        out[tag] = {int(e.step): float(e.value) for e in acc.Scalars(tag)}
    for tag in tags.get("tensors", []):  # tf.summary v2 writers store scalars as 0-d tensors
        values = {}
        for e in acc.Tensors(tag):
            array = tensor_util.make_ndarray(e.tensor_proto)
            if array.size == 1 and array.dtype.kind in "fiu":
                values[int(e.step)] = float(array.reshape(-1)[0])
        if values:
            out.setdefault(tag, {}).update(values)
    return {tag: sorted(points.items()) for tag, points in out.items()}


# ============================================================================ helpers
def _series(scalars: Scalars, tags: Sequence[str]) -> tuple[str, list[int], list[float]] | None:
    """The first of ``tags`` present: (tag, iterations, values), sorted, one value per iteration."""
    for tag in tags:
        if scalars.get(tag):
            points = dict(scalars[tag])
            steps = sorted(points)
            return tag, steps, [float(points[s]) for s in steps]
    return None


def _finite(steps: list[int], values: list[float]) -> tuple[list[int], list[float]]:
    keep = [i for i, v in enumerate(values) if math.isfinite(v)]
    return [steps[i] for i in keep], [values[i] for i in keep]


def _window(n: int) -> int:
    """Smoothing window for a curve of ``n`` points: about 5% of it, 3 to 25 points."""
    return max(3, min(25, n // 20))


def _smooth(values: list[float], w: int) -> list[float]:
    """Trailing median over ``w`` points (``s[i]`` uses ``values[i-w+1 : i+1]``): robust to single spikes."""
    return [statistics.median(values[max(0, i - w + 1): i + 1]) for i in range(len(values))]


def _noise(values: list[float], smooth: list[float]) -> float:
    """Robust scale of the iteration-to-iteration noise around the smoothed curve (1.4826 x MAD)."""
    return 1.4826 * statistics.median(abs(v - s) for v, s in zip(values, smooth))


def _cfg(config: Mapping | None, *path: str):
    """``config[path[0]][path[1]]...`` or None (the runner's train config and config.yaml both work)."""
    node = config
    for key in path:
        if not hasattr(node, "get"):
            return None
        node = node.get(key)
    return node


def _fmt(x: float) -> str:
    return f"{x:.3g}"


def _last_iteration(scalars: Scalars) -> int | None:
    steps = [s for points in scalars.values() for s, _ in points[-1:]]
    return max(steps) if steps else None


# ============================================================================ rules
def rule_non_finite(scalars: Scalars, config: Mapping | None) -> list[Finding]:
    """NaN/Inf in a curve, or a core loss/std curve that stops while the run goes on (the logger skips NaN/Inf)."""
    first_bad: list[tuple[int, str]] = []
    for tag, points in scalars.items():
        bad = [s for s, v in points if not math.isfinite(float(v))]
        if bad:
            first_bad.append((min(bad), tag))
    last = _last_iteration(scalars)
    for tag in CORE_TAGS:
        points = scalars.get(tag)
        if points and last is not None:
            end = max(s for s, _ in points)
            if end < last:
                first_bad.append((end + 1, tag))
    if not first_bad:
        return []
    first_bad.sort()
    it, tag = first_bad[0]
    names = ", ".join(dict.fromkeys(t for _, t in first_bad))
    return [Finding(
        "non_finite", "error", it, tag,
        f"NaN/Inf from iteration {it} in {names} (a curve that stops early became non-finite: the logger skips "
        "such values).",
        "the update diverged or the simulation became unstable: lower algorithm.learning_rate or use "
        "schedule=adaptive, lower algorithm.max_grad_norm, keep runner.check_for_nan=true (it stops at the first "
        "NaN from the env and names the observation group), and look for a reward term or observation that "
        "blows up (Env/reward/* curves).")]


def _return_scale(scalars: Scalars) -> Callable[[int], float]:
    """``scale(iteration)``: the smoothed |return| there (floored at 5% of its largest), or 1 without returns.

    The value loss is a squared error on returns, so it legitimately grows with ``scale**2`` as the policy
    earns more: the value-loss rule divides that growth out.
    """
    found = _series(scalars, RETURN_TAGS)
    if found is None:
        return lambda it: 1.0
    steps, values = _finite(found[1], found[2])
    if not values:
        return lambda it: 1.0
    s = [abs(v) for v in _smooth(values, _window(len(values)))]
    floor = max(0.05 * max(s), 1e-8)

    def scale(it: int) -> float:
        i = max(0, bisect.bisect_right(steps, it) - 1)
        return max(s[i], floor)

    return scale


def rule_value_loss_explosion(scalars: Scalars, config: Mapping | None) -> list[Finding]:
    """The value loss jumps 10x from one window to the next, or grows 100x above its lowest level (and 10x above
    its first window), beyond what the growth of the returns explains (``(return scale ratio)**2`` when > 1)."""
    found = _series(scalars, VALUE_TAGS)
    if found is None:
        return []
    tag, steps, values = found
    steps, values = _finite(steps, values)
    n = len(values)
    if n < MIN_POINTS:
        return []
    w = _window(n)
    s = _smooth(values, w)
    scale = _return_scale(scalars)
    low, low_at = math.inf, steps[0]
    for i in range(w - 1, n):
        now = statistics.median(values[i - w + 1: i + 1])
        jump = False
        if i >= 2 * w - 1:
            before = statistics.median(values[i - 2 * w + 1: i - w + 1])
            allowed = VALUE_JUMP * max(1.0, scale(steps[i]) / scale(steps[i - w])) ** 2
            jump = before > 0 and now > allowed * before
        grown = max(1.0, scale(steps[i]) / scale(low_at)) ** 2
        growth = low < math.inf and s[i] > VALUE_GROWTH * grown * low and s[i] > VALUE_OVER_START * s[w - 1]
        if jump or growth:
            ref = before if jump else low
            how = "jumped" if jump else "grew"
            return [Finding(
                "value_loss_explosion", "warning", steps[i], tag,
                f"value loss {how} to {_fmt(now)} at iteration {steps[i]} ({now / max(ref, 1e-12):.0f}x its "
                f"earlier {_fmt(ref)}, beyond what the returns explain): the critic no longer fits its return "
                "targets.",
                "lower algorithm.learning_rate (or schedule=adaptive), keep algorithm.use_clipped_value_loss=true, "
                "set algorithm.reward_normalization=true or scale the rewards down, lower "
                "algorithm.max_grad_norm; check Env/reward/* for a term that grows without bound.")]
        if s[i] < low:
            low, low_at = s[i], steps[i]
    return []


def rule_action_std(scalars: Scalars, config: Mapping | None) -> list[Finding]:
    """The action std shrinks below 10% of its start (or 1e-3), or grows above 5x its start."""
    found = _series(scalars, STD_TAGS)
    if found is None:
        return []
    tag, steps, values = found
    steps, values = _finite(steps, values)
    n = len(values)
    if n < MIN_POINTS or values[0] <= 0:
        return []
    s = _smooth(values, _window(n))
    start = values[0]
    for i in range(n):
        share = 100.0 * (steps[i] - steps[0]) / max(steps[-1] - steps[0], 1)
        if s[i] < STD_COLLAPSE * start or s[i] < STD_FLOOR:
            return [Finding(
                "action_std_collapse", "warning", steps[i], tag,
                f"action std fell to {_fmt(s[i])} (from {_fmt(start)}) at iteration {steps[i]}, {share:.0f}% into "
                "the run: the policy has almost stopped exploring.",
                "raise algorithm.entropy_coef (e.g. 0.005 to 0.01), lower algorithm.learning_rate, or bound the std "
                "from below with model.actor.distribution_cfg.std_range=[0.05, 10]; if the return is still far "
                "from good this is a premature convergence.")]
        if s[i] > STD_GROWTH * start:
            return [Finding(
                "action_std_growth", "warning", steps[i], tag,
                f"action std grew to {_fmt(s[i])} (from {_fmt(start)}) at iteration {steps[i]}: the policy gets "
                "noisier instead of more precise.",
                "the returns give too little signal against the entropy bonus: lower algorithm.entropy_coef, "
                "check the reward scale (Env/reward/*), or bound the std with "
                "model.actor.distribution_cfg.std_range.")]
    return []


def rule_entropy_collapse(scalars: Scalars, config: Mapping | None) -> list[Finding]:
    """Without an action-std curve: the entropy falls as far as a 10x smaller Gaussian std.

    The number of action dimensions ``A`` is estimated from the first entropy assuming the std started at
    ``model.actor.distribution_cfg.init_std`` (1.0 when the config does not say): ``H = A (0.5 ln(2 pi e) +
    ln std)``, so the std ratio at a later point is ``exp((H - H0) / A)``.
    """
    if _series(scalars, STD_TAGS) is not None:
        return []  # rule_action_std reads the std itself
    found = _series(scalars, ENTROPY_TAGS)
    if found is None:
        return []
    tag, steps, values = found
    steps, values = _finite(steps, values)
    n = len(values)
    init_std = _cfg(config, "model", "actor", "distribution_cfg", "init_std")  # config.yaml
    if init_std is None:
        init_std = _cfg(config, "actor", "distribution_cfg", "init_std")  # the runner's train config
    init_std = float(init_std) if isinstance(init_std, (int, float)) and init_std > 0 else 1.0
    per_dim = GAUSSIAN_ENTROPY_UNIT_STD + math.log(init_std)
    dims = values[0] / per_dim if abs(per_dim) > 0.05 else 0.0
    if n < MIN_POINTS or dims < 0.5:
        return []  # too short, or the first entropy does not fit a Gaussian that started at init_std
    s = _smooth(values, _window(n))
    for i in range(n):
        ratio = math.exp((s[i] - values[0]) / dims)
        if ratio < STD_COLLAPSE:
            return [Finding(
                "entropy_collapse", "warning", steps[i], tag,
                f"policy entropy fell from {_fmt(values[0])} to {_fmt(s[i])} at iteration {steps[i]} (as if the "
                f"action std shrank {1 / ratio:.0f}x): the policy has almost stopped exploring.",
                "raise algorithm.entropy_coef (e.g. 0.005 to 0.01), lower algorithm.learning_rate, or bound the std "
                "from below with model.actor.distribution_cfg.std_range.")]
    return []


def _lr_state(scalars: Scalars, step: int) -> str:
    found = _series(scalars, LR_TAGS)
    if found is None:
        return ""
    _, steps, values = found
    lr = dict(zip(steps, values)).get(step)
    if lr is None:
        return ""
    if lr <= LR_MIN * 1.01:
        return "floor"
    if lr >= LR_MAX * 0.99:
        return "cap"
    return "between"


def rule_kl_spikes(scalars: Scalars, config: Mapping | None) -> list[Finding]:
    """KL above 5x desired_kl: always reported with a fixed schedule or the learning rate at its floor;
    with the adaptive schedule between its bounds only when frequent (it absorbs isolated spikes)."""
    found = _series(scalars, KL_TAGS)
    if found is None:
        return []
    tag, steps, values = found
    steps, values = _finite(steps, values)
    desired = _cfg(config, "algorithm", "desired_kl")
    desired = float(desired) if isinstance(desired, (int, float)) and desired > 0 else DEFAULT_DESIRED_KL
    schedule = _cfg(config, "algorithm", "schedule")
    spikes = [(s, v) for s, v in zip(steps, values) if v > KL_SPIKE * desired]
    if not spikes:
        return []
    states = [_lr_state(scalars, s) for s, _ in spikes]
    at_floor = [sp for sp, st in zip(spikes, states) if st == "floor"]
    lr = _series(scalars, LR_TAGS)
    fixed = schedule == "fixed" or (schedule is None and lr is not None and min(lr[2]) == max(lr[2]))
    peak = max(v for _, v in spikes)
    where = f"{len(spikes)} iteration(s) from {spikes[0][0]}, up to {_fmt(peak)}"
    if at_floor:
        return [Finding(
            "kl_spikes", "warning", at_floor[0][0], tag,
            f"KL above {KL_SPIKE:g}x desired_kl ({_fmt(desired)}) in {len(at_floor)} iteration(s) with the learning "
            f"rate pinned at its floor {LR_MIN:g} ({where}): even the smallest step moves the policy too far.",
            "the problem is not the step size: lower algorithm.num_learning_epochs or algorithm.clip_param, lower "
            "algorithm.max_grad_norm, check the observation normalisation (model.*.obs_normalization) and for "
            "observations or rewards with huge outliers.")]
    if fixed:
        return [Finding(
            "kl_spikes", "warning", spikes[0][0], tag,
            f"KL above {KL_SPIKE:g}x {_fmt(desired)} with a fixed learning rate ({where}): updates move the "
            "policy further than PPO's clip is meant to allow.",
            "lower algorithm.learning_rate or use algorithm.schedule=adaptive with algorithm.desired_kl=0.01.")]
    if len(spikes) > KL_SPIKE_SHARE * len(values):
        return [Finding(
            "kl_spikes", "info", spikes[0][0], tag,
            f"KL above {KL_SPIKE:g}x desired_kl ({_fmt(desired)}) in {len(spikes) / len(values):.0%} of the "
            f"iterations ({where}): the adaptive schedule keeps correcting overshoots.",
            "fewer algorithm.num_learning_epochs or more algorithm.num_mini_batches per epoch with a lower "
            "learning rate; a lower algorithm.desired_kl makes the schedule more cautious.")]
    return []


def _pinned(steps: list[int], values: list[float], test: Callable[[float], bool]) -> tuple[int, int] | None:
    """(first iteration, length) of the longest run of consecutive points where ``test`` holds."""
    best, start, length = None, None, 0
    for i, v in enumerate(values):
        if test(v):
            start = i if length == 0 else start
            length += 1
            if best is None or length > best[1]:
                best = (steps[start], length)
        else:
            length = 0
    return best


def rule_learning_rate_bounds(scalars: Scalars, config: Mapping | None) -> list[Finding]:
    """The adaptive learning rate sits at its floor (1e-5) or cap (1e-2) for >= 5% of the run (3+ in a row)."""
    found = _series(scalars, LR_TAGS)
    if found is None or _cfg(config, "algorithm", "schedule") == "fixed":
        return []
    tag, steps, values = found
    steps, values = _finite(steps, values)
    if not values or min(values) == max(values):
        return []  # never changed: a fixed schedule
    need = max(3, math.ceil(LR_PIN_SHARE * len(values)))
    out = []
    floor = _pinned(steps, values, lambda v: v <= LR_MIN * 1.01)
    if floor and floor[1] >= need:
        out.append(Finding(
            "learning_rate_floor", "warning", floor[0], tag,
            f"the adaptive learning rate sat at its floor {LR_MIN:g} for {floor[1]} iterations from {floor[0]}: "
            "the KL stayed above 2x desired_kl even at the smallest step.",
            "each update still moves the policy too far: lower algorithm.num_learning_epochs or "
            "algorithm.clip_param, raise algorithm.desired_kl if it is very small, check the observation "
            "normalisation and the reward scale."))
    cap = _pinned(steps, values, lambda v: v >= LR_MAX * 0.99)
    if cap and cap[1] >= need:
        out.append(Finding(
            "learning_rate_cap", "info", cap[0], tag,
            f"the adaptive learning rate sat at its cap {LR_MAX:g} for {cap[1]} iterations from {cap[0]}: the KL "
            "stayed below desired_kl/2 even at the largest step, so the updates barely change the policy.",
            "check that the return still improves; if not, the advantages carry little signal (reward scale, "
            "gamma/lam) or the gradients are clipped hard (algorithm.max_grad_norm); a lower "
            "algorithm.desired_kl keeps the rate off the cap."))
    return out


def _peak(values: list[float]) -> tuple[int, list[float], float] | None:
    """(index of the smoothed curve's peak, smoothed curve, noise level), or None for a short curve."""
    if len(values) < MIN_POINTS:
        return None
    s = _smooth(values, _window(len(values)))
    return max(range(len(s)), key=lambda i: s[i]), s, _noise(values, s)


def _peaked_series(scalars: Scalars, tags) -> tuple | None:
    """(tag, steps, peak index, smoothed curve, noise level) of the first of ``tags`` logged, finite points only;
    None when none is logged or the curve is too short."""
    found = _series(scalars, tags)
    if found is None:
        return None
    tag, steps, values = found
    steps, values = _finite(steps, values)
    shape = _peak(values)
    return None if shape is None else (tag, steps, *shape)


def _collapse(s: list[float], peak: int, noise: float) -> int | None:
    """Index where the smoothed curve ``s`` fell below the line of "half of the gain up to its peak lost" (and stays
    below at the end), or None where it did not collapse beyond its noise."""
    base = min(s[: peak + 1])
    gain = s[peak] - base
    line = s[peak] - (1.0 - COLLAPSE_KEEP) * gain
    if gain <= NOISE_SIGMAS * noise or s[-1] >= line or s[peak] - s[-1] <= NOISE_SIGMAS * noise:
        return None
    return next(i for i in range(peak, len(s)) if s[i] < line)


def _explained_by_shorter_episodes(scalars: Scalars, peak_it: int, peak_return: float, line: float) -> bool:
    """Whether a return curve that also averages partial episodes fell only because its episodes got shorter: the
    return at the peak's (smoothed) episode length with the end's reward per step of episode would stay above
    ``line``. False where the curves to tell are missing."""
    ret, length = _series(scalars, RETURN_TAGS), _series(scalars, LENGTH_TAGS)
    if ret is None or length is None:
        return False
    lengths = dict(zip(length[1], length[2]))
    points = [(it, r / lengths[it], lengths[it]) for it, r in zip(ret[1], ret[2])
              if it in lengths and math.isfinite(r) and math.isfinite(lengths[it]) and lengths[it] > 0]
    if len(points) < MIN_POINTS:
        return False
    steps = [it for it, _, _ in points]
    w = _window(len(points))
    per_step = _smooth([p for _, p, _ in points], w)
    episode = _smooth([n for _, _, n in points], w)
    at_peak = max(0, bisect.bisect_right(steps, peak_it) - 1)
    same_length_return = peak_return + episode[at_peak] * (per_step[-1] - per_step[at_peak])
    return same_length_return >= line


def rule_return_collapse(scalars: Scalars, config: Mapping | None) -> list[Finding]:
    """The smoothed return lost more than half of what it had gained up to its peak, and stays there.

    A return curve that also averages partial episodes (no ``Episode/mean_reward_per_step`` curve: an older rlcore
    run or rsl_rl's ``Train/mean_reward``) falls whenever the episodes shorten for a while, as they do after a
    resume; there the fall counts only if it remains at the peak's episode length, with the end's return per step
    of episode (return / length).
    """
    found = _peaked_series(scalars, RETURN_TAGS)
    if found is None:
        return []
    tag, steps, peak, s, noise = found
    cross = _collapse(s, peak, noise)
    if cross is None:
        return []
    line = s[peak] - (1.0 - COLLAPSE_KEEP) * (s[peak] - min(s[: peak + 1]))
    if _series(scalars, PER_STEP_TAGS) is None and _explained_by_shorter_episodes(scalars, steps[peak], s[peak], line):
        return []  # the episodes got shorter (partial ones after a start or resume), not worse per step
    message = (f"the return peaked at {_fmt(s[peak])} (iteration {steps[peak]}) and fell to {_fmt(s[-1])} by the "
               f"end, below half of its gain, from iteration {steps[cross]}.")
    severity = "warning"
    terrain = next((t for t in scalars if t.endswith("terrain_level")), None)
    if terrain:
        levels = dict(scalars[terrain])
        before = [v for it, v in levels.items() if it <= steps[peak]]
        after = [v for it, v in levels.items() if it >= steps[cross]]
        if before and after and max(after) > before[-1] + 0.25:
            severity = "info"
            message += (f" The terrain curriculum moved up meanwhile ({_fmt(before[-1])} -> {_fmt(max(after))}): "
                        "harder terrain lowers returns by itself; judge by the tracking errors.")
    return [Finding(
        "return_collapse", severity, steps[cross], tag, message,
        f"keep the checkpoint nearest iteration {steps[peak]}; lower algorithm.learning_rate or "
        "algorithm.desired_kl, use more envs or runner.num_steps_per_env for less noisy updates, and look in "
        "Env/reward/* for a term that grew while the return fell (reward hacking).")]


def rule_episode_length_collapse(scalars: Scalars, config: Mapping | None) -> list[Finding]:
    """The smoothed episode length ends below half of its peak: episodes terminate much earlier than before."""
    found = _peaked_series(scalars, LENGTH_TAGS)
    if found is None:
        return []
    tag, steps, peak, s, noise = found
    line = LENGTH_KEEP * s[peak]
    if s[-1] >= line or s[peak] - s[-1] <= NOISE_SIGMAS * noise:
        return []
    cross = next(i for i in range(peak, len(s)) if s[i] < line)
    suggestion = ("check the termination terms (what ends an episode) and Env/physics_failures; a curriculum "
                  "that advanced too fast also shortens episodes.")
    ret = _series(scalars, RETURN_TAGS)
    if ret is not None:
        r = dict(zip(ret[1], ret[2])).get(steps[cross])
        if r is not None and r < 0:
            suggestion = ("the return is negative: with mostly negative rewards, ending an episode early pays off. "
                          "Add a positive per-step (alive) reward or shrink the penalties; also " + suggestion)
    return [Finding(
        "episode_length_collapse", "warning", steps[cross], tag,
        f"the mean episode length fell from {_fmt(s[peak])} (iteration {steps[peak]}) to {_fmt(s[-1])}, below "
        f"half, from iteration {steps[cross]}: episodes terminate much earlier.", suggestion)]


RULES: dict[str, Callable[[Scalars, Mapping | None], list[Finding]]] = {
    "non_finite": rule_non_finite,
    "value_loss_explosion": rule_value_loss_explosion,
    "action_std": rule_action_std,
    "entropy_collapse": rule_entropy_collapse,
    "kl_spikes": rule_kl_spikes,
    "learning_rate_bounds": rule_learning_rate_bounds,
    "return_collapse": rule_return_collapse,
    "episode_length_collapse": rule_episode_length_collapse,
}
"""Every rule: ``rule(scalars, config) -> findings``."""

_SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


def diagnose(scalars: Scalars, config: Mapping | None = None,
             expected_iterations: int | None = None) -> list[Finding]:
    """Apply every rule of ``RULES`` to one run's curves; findings sorted by severity, then iteration.

    Args:
        scalars: ``{tag: [(iteration, value), ...]}`` of one run (:func:`load_scalars`).
        config: the run's config (``config.yaml`` or the runner's train config), for ``algorithm.desired_kl``,
            ``algorithm.schedule`` and ``model.actor.distribution_cfg.init_std``; None uses rlcore's defaults.
        expected_iterations: the iterations the run was started for (``runner.max_iterations``): a run whose
            curves end earlier is reported (the NaN guard, a crash, an interrupt or a stop callback ended it).
    """
    findings = [f for rule in RULES.values() for f in rule(scalars, config)]
    last = _last_iteration(scalars)
    if expected_iterations is not None and last is not None:
        first = min(s for points in scalars.values() for s, _ in points[:1])
        planned = first + int(expected_iterations) - 1
        if last < planned:
            findings.append(Finding(
                "ended_early", "info", last, next((t for t in RETURN_TAGS if t in scalars), RETURN_TAGS[0]),
                f"the curves end at iteration {last} of the {planned} planned (still running, or stopped).",
                "if this was not a deliberate stop (Ctrl-C, a stop callback), look at the end of the console "
                "output: the NaN guard (runner.check_for_nan) stops training at the first NaN/Inf from the env "
                "and names the observation group; resume=<run dir> continues from the last checkpoint."))
    return sorted(findings, key=lambda f: (_SEVERITY_ORDER.get(f.severity, 3), f.iteration))


def format_findings(findings: Sequence[Finding], run: str | None = None) -> str:
    """Console text for ``findings``: one block per finding (severity, iteration, curve, what, what to change)."""
    head = f"Diagnosis of {run}" if run else "Diagnosis"
    if not findings:
        return f"{head}: no problem found in the curves ({len(RULES)} rules checked)."
    lines = [f"{head}: {len(findings)} finding(s)"]
    for f in findings:
        lines.append(f"  [{f.severity}] iteration {f.iteration} ({f.tag}): {f.message}")
        lines.append(f"      try: {f.suggestion}")
    return "\n".join(lines)


def print_findings(run_dir: str, config: Mapping | None = None, file: TextIO | None = None) -> list[Finding]:
    """Diagnose the run in ``run_dir`` from its event files and print the result; nothing when it has none.

    The runner's end-of-training summary (after the TensorBoard writer is closed). Returns the findings.
    """
    try:
        scalars = load_scalars(run_dir)
    except ConfigError:  # MissingPathError is one
        return []  # logger=wandb / none: no curves on disk
    findings = diagnose(scalars, config)
    print(format_findings(findings), file=file or sys.stdout, flush=True)
    return findings


__all__ = ["RULES", "Finding", "diagnose", "format_findings", "load_scalars", "print_findings"]
