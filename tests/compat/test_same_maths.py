"""Same maths as rsl_rl 5.5.1, checked against the installed package (skipped without ``rsl-rl-lib``).

Both libraries get identical initial weights (rsl_rl's models are built, then copied into rlcore's through the explicit
key map below), identical observations (a TensorDict of groups), rewards, dones and time-outs, and are driven at the
algorithm level the way their runners drive them: ``act`` / ``process_env_step`` under ``torch.inference_mode``, then
``compute_returns`` and ``update``. Torch is re-seeded with the same value right before every sampling call
(``act`` and ``update``), so sampled actions and mini-batch permutations coincide. Runner-level differences (the
normaliser warm-up before the first rollout, seeding) are therefore not in play here.

Where rlcore deviates from rsl_rl by design, the test selects the rlcore option that restores rsl_rl's behaviour, or
pins the deviation exactly (the "by design" tests). Run with ``-s`` to print the maximum absolute differences.

Deviations met here (rlcore option restoring rsl_rl's behaviour in brackets):
- time-outs bootstrap from V(``extras["final_observations"]``) when the env provides them [leave the key out];
- a new mini-batch permutation every epoch [``reshuffle_each_epoch=False``];
- recurrent mini-batches: envs permuted every epoch; rsl_rl takes them in order [none; one mini-batch agrees];
- RND: error divided by ``std + 1e-2`` under reward normalisation (rsl_rl: ``std``) [none]; ``weight`` *and* the
  schedule's ``final_value`` are per second, multiplied by ``step_dt`` (rsl_rl scales ``weight`` only) [give
  ``final_value`` pre-divided by ``step_dt``];
- Distillation applies a last partial gradient window (rsl_rl drops it) [``gradient_length`` dividing
  ``num_steps_per_env``], and resets the window at each epoch (rsl_rl's spans epochs) [same].
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from tensordict import TensorDict

pytest.importorskip("rsl_rl")
from rsl_rl.algorithms import PPO as RslPPO
from rsl_rl.algorithms import Distillation as RslDistillation
from rsl_rl.extensions import RandomNetworkDistillation as RslRND
from rsl_rl.models import MLPModel as RslMLPModel
from rsl_rl.models import RNNModel as RslRNNModel
from rsl_rl.storage import RolloutStorage as RslRolloutStorage

from rlcore.algorithms import PPO, Distillation
from rlcore.extensions.rnd import RandomNetworkDistillation
from rlcore.models import MLPModel, RNNModel
from rlcore.storage import RolloutStorage

T, N, A = 8, 6, 3
"""Rollout length, number of envs, action size."""
GAE_TOL, PARAM_TOL = 1e-6, 1e-5
GAUSSIAN = {"class_name": "GaussianDistribution", "init_std": 0.8}
SHAPES = {"policy": 5, "privileged": 4}
GROUPS = {"actor": ["policy"], "critic": ["policy", "privileged"], "student": ["policy"],
          "teacher": ["policy", "privileged"], "rnd_state": ["policy", "privileged"]}
EPISODE_PERIODS = [3, 0, 4, 5, 0, 2]
"""Env ``i`` ends every ``EPISODE_PERIODS[i]`` steps (0: never) ..."""
TIME_OUT_ENVS = (2, 3)
"""... by a time-out for these envs, by a terminal state for the others."""


def report(case: str, **diffs: float) -> None:
    """Print the maximum absolute differences of a case (visible with ``pytest -s``)."""
    print(f"\n[same-maths] {case}: " + ", ".join(f"{k}={v:.2e}" for k, v in diffs.items()), end="")


# ============================================================================ scripted data
@dataclass
class Rollout:
    """Fixed env data: ``obs`` has T+1 entries (``obs[t+1]`` is returned by step t), the rest are ``[T, N]``."""

    obs: list[TensorDict]
    final_obs: list[TensorDict]
    rewards: torch.Tensor
    dones: torch.Tensor
    time_outs: torch.Tensor


def make_obs(gen: torch.Generator, n: int = N) -> TensorDict:
    """Groups far from zero mean / unit std, so that observation normalisation changes the inputs."""
    return TensorDict(
        {"policy": 1.5 + 2.0 * torch.randn(n, SHAPES["policy"], generator=gen),
         "privileged": -3.0 + 0.5 * torch.randn(n, SHAPES["privileged"], generator=gen)},
        batch_size=[n],
    )


def make_rollout(seed: int = 0) -> Rollout:
    gen = torch.Generator().manual_seed(seed)
    steps = torch.arange(1, T + 1).unsqueeze(1)
    periods = torch.tensor(EPISODE_PERIODS).unsqueeze(0)
    dones = (periods > 0) & (steps % periods.clamp(min=1) == 0)
    time_outs = dones & torch.tensor([i in TIME_OUT_ENVS for i in range(N)])
    return Rollout(
        obs=[make_obs(gen) for _ in range(T + 1)],
        final_obs=[make_obs(gen) for _ in range(T)],
        rewards=torch.randn(T, N, generator=gen),
        dones=dones,
        time_outs=time_outs,
    )


# ============================================================================ explicit weight mapping
MODEL_KEY_MAP = {
    "obs_normalizer.": "obs_normalizer.",  # _mean, _var, _std [1, D], count []
    "distribution.": "distribution.",  # std_param [A] (std_type "scalar") or log_std_param
    "mlp.": "mlp.",  # nn.Sequential: Linear at 0, 2, 4, ... with the activations in between
    "rnn.rnn.": "rnn.rnn.",  # the torch nn.GRU / nn.LSTM inside the RNN wrapper
}
"""rsl_rl 5.5.1 MLPModel/RNNModel state-dict key prefix -> rlcore MLPModel/RNNModel prefix."""

RND_KEY_MAP = {
    "predictor.": "predictor.",
    "target.": "target.",
    "state_normalizer.": "state_normalizer.",
    "reward_normalizer.emp_norm.": "reward_normalizer.emp_norm.",
}
"""rsl_rl RandomNetworkDistillation -> rlcore. rlcore also saves ``step_count`` (the schedule's step) and the
reward normaliser's running discounted return ``reward_normalizer.disc_return``; rsl_rl keeps neither in its state
(its running return starts empty, like rlcore's zero-size buffer)."""
RND_RLCORE_ONLY = {"step_count", "reward_normalizer.disc_return"}


def map_state(state: dict, key_map: dict[str, str]) -> dict:
    out = {}
    for key, value in state.items():
        prefix = next((p for p in key_map if key.startswith(p)), None)
        assert prefix is not None, f"rsl_rl key '{key}' has no rlcore counterpart in the map"
        out[key_map[prefix] + key[len(prefix):]] = value.detach().clone()
    return out


def copy_model(src: torch.nn.Module, dst: torch.nn.Module) -> None:
    """Load rsl_rl model ``src``'s weights and normaliser state into rlcore model ``dst`` (all keys, same shapes)."""
    mapped = map_state(src.state_dict(), MODEL_KEY_MAP)
    own = dst.state_dict()
    assert set(mapped) == set(own), f"key sets differ: {set(mapped) ^ set(own)}"
    assert all(mapped[k].shape == own[k].shape for k in own)
    dst.load_state_dict(mapped, strict=True)


def copy_rnd(src: torch.nn.Module, dst: RandomNetworkDistillation) -> None:
    mapped = map_state(src.state_dict(), RND_KEY_MAP)
    missing, unexpected = dst.load_state_dict(mapped, strict=False)
    assert not unexpected and set(missing) <= RND_RLCORE_ONLY, (missing, unexpected)


def model_diff(ours: torch.nn.Module, theirs: torch.nn.Module) -> dict[str, float]:
    """Max |difference| over weights (``weights``), the action std (``std``) and normaliser buffers (``norm``)."""
    mapped = map_state(theirs.state_dict(), MODEL_KEY_MAP)
    out = {"weights": 0.0}
    for key, value in ours.state_dict().items():
        group = "std" if key.startswith("distribution.") else "norm" if key.startswith("obs_normalizer.") else "weights"
        d = (value.double() - mapped[key].double()).abs().max().item()
        out[group] = max(out.get(group, 0.0), d)
    return out


# ============================================================================ builders and drivers
def model_pair(obs: TensorDict, obs_set: str, output_dim: int, rnn_type: str | None = None,
               obs_norm: bool = False, stochastic: bool = False) -> tuple[torch.nn.Module, torch.nn.Module]:
    """(rlcore model, rsl_rl model) with identical weights; with ``obs_norm`` the normaliser holds non-trivial stats."""
    kwargs = {"hidden_dims": [16, 16], "activation": "elu", "obs_normalization": obs_norm,
              "distribution_cfg": dict(GAUSSIAN) if stochastic else None}
    if rnn_type is None:
        ours, theirs = MLPModel(obs, GROUPS, obs_set, output_dim, **kwargs), RslMLPModel(obs, GROUPS, obs_set,
                                                                                          output_dim, **kwargs)
    else:
        kwargs.update(rnn_type=rnn_type, rnn_hidden_dim=8)
        ours, theirs = RNNModel(obs, GROUPS, obs_set, output_dim, **kwargs), RslRNNModel(obs, GROUPS, obs_set,
                                                                                          output_dim, **kwargs)
    if obs_norm:  # statistics of an earlier rollout, so normalisation is not the identity
        gen = torch.Generator().manual_seed(99)
        theirs.update_normalization(make_obs(gen, 64))
    copy_model(theirs, ours)
    return ours, theirs


RLCORE_ONLY_PPO_OPTIONS = ("clip_gradients_jointly", "reshuffle_each_epoch")
"""Options rsl_rl's PPO does not take (given to rlcore's only)."""


def ppo_pair(rollout: Rollout, rnn_type: str | None = None, obs_norm: bool = False, rnd_cfg: dict | None = None,
             step_dt: float = 0.02, **cfg) -> tuple[PPO, RslPPO]:
    """rlcore PPO and rsl_rl PPO on identical models; rlcore gets ``reshuffle_each_epoch=False`` (rsl_rl's one
    permutation per update). ``rnd_cfg`` is given in rlcore's form (weight per second, ``step_dt`` separate)."""
    obs = rollout.obs[0]
    actor, rsl_actor = model_pair(obs, "actor", A, rnn_type, obs_norm, stochastic=True)
    critic, rsl_critic = model_pair(obs, "critic", 1, rnn_type, obs_norm)
    cfg = {"num_learning_epochs": 1, "num_mini_batches": 1, "schedule": "fixed", "gamma": 0.9, "lam": 0.8,
           "learning_rate": 1e-3, "max_grad_norm": 1e3, **cfg}
    rsl_rnd_cfg = None
    if rnd_cfg is not None:
        rnd_cfg = {"num_states": sum(SHAPES.values()), "obs_groups": GROUPS, **rnd_cfg}
        rsl_rnd_cfg = {**rnd_cfg, "weight": rnd_cfg["weight"] * step_dt}  # rsl_rl's factory pre-scales the weight
        rnd_cfg = {**rnd_cfg, "step_dt": step_dt}
    rlcore_only = {"reshuffle_each_epoch": False, **{k: cfg.pop(k) for k in RLCORE_ONLY_PPO_OPTIONS if k in cfg}}
    ours = PPO(actor, critic, RolloutStorage("rl", N, T, obs, [A]), rnd_cfg=rnd_cfg, **cfg, **rlcore_only)
    theirs = RslPPO(rsl_actor, rsl_critic, RslRolloutStorage("rl", N, T, obs, [A]), rnd_cfg=rsl_rnd_cfg, **cfg)
    if rnd_cfg is not None:
        copy_rnd(theirs.rnd, ours.rnd)
    return ours, theirs


def drive(alg, rollout: Rollout, final_obs: bool = False, returns: bool = True) -> None:
    """One rollout as the runners drive it; torch is re-seeded before each ``act`` so both sample the same."""
    with torch.inference_mode():
        for t in range(T):
            torch.manual_seed(1000 + t)
            alg.act(rollout.obs[t])
            extras = {"time_outs": rollout.time_outs[t].clone()}
            if final_obs:
                extras["final_observations"] = rollout.final_obs[t]
            alg.process_env_step(rollout.obs[t + 1], rollout.rewards[t].clone(), rollout.dones[t].clone(), extras)
        if returns:
            alg.compute_returns(rollout.obs[T])


def max_abs(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.double() - b.double()).abs().max().item()


def update_both(ours, theirs, seed: int = 7) -> tuple[dict, dict]:
    torch.manual_seed(seed)
    out_ours = ours.update()
    torch.manual_seed(seed)
    out_theirs = theirs.update()
    return out_ours, out_theirs


# ============================================================================ GAE
@pytest.mark.parametrize("obs_norm", [False, True], ids=["raw-obs", "obs-norm"])
@pytest.mark.parametrize("per_mini_batch", [False, True], ids=["adv-norm-rollout", "adv-norm-per-mini-batch"])
def test_gae_returns_and_advantages_match(obs_norm: bool, per_mini_batch: bool):
    """Time-outs in extras without ``final_observations``: rlcore bootstraps them with V(o_t) like rsl_rl."""
    rollout = make_rollout()
    ours, theirs = ppo_pair(rollout, obs_norm=obs_norm, normalize_advantage_per_mini_batch=per_mini_batch)
    drive(ours, rollout)
    drive(theirs, rollout)
    a, b = ours.storage, theirs.storage
    assert torch.equal(a.actions, b.actions), "sampled actions differ: the comparison below would be meaningless"
    diffs = {name: max_abs(getattr(a, name), getattr(b, name))
             for name in ("values", "actions_log_prob", "rewards", "returns", "advantages")}
    diffs["dist_params"] = max(max_abs(p, q) for p, q in zip(a.distribution_params, b.distribution_params))
    report(f"GAE obs_norm={obs_norm} per_mini_batch={per_mini_batch}", **diffs)
    assert a.rewards[rollout.time_outs].abs().sum() > 0 and rollout.time_outs.any()
    assert max(diffs.values()) <= GAE_TOL, diffs


def test_time_out_bootstrap_from_final_observations_differs_by_design():
    """rlcore's deliberate deviation: with ``extras["final_observations"]`` a time-out at step t is bootstrapped with
    V(final observation) instead of rsl_rl's V(o_t). The stored rewards then differ by exactly
    ``gamma * (V(final_obs_t) - V(o_t))`` on time-out rows and nowhere else; without the key they agree (test above)."""
    rollout = make_rollout()
    ours, theirs = ppo_pair(rollout)
    drive(ours, rollout, final_obs=True)
    drive(theirs, rollout, final_obs=True)  # rsl_rl ignores the key
    with torch.no_grad():
        v_final = torch.stack([ours.critic(o).squeeze(-1) for o in rollout.final_obs])  # [T, N]
    expected = ours.gamma * (v_final - ours.storage.values.squeeze(-1)) * rollout.time_outs
    diff = (ours.storage.rewards - theirs.storage.rewards).squeeze(-1)
    report("time-out bootstrap from final_observations", deviation_minus_expected=max_abs(diff, expected),
           deviation=diff.abs().max().item())
    assert diff[~rollout.time_outs].abs().max() == 0.0
    assert diff[rollout.time_outs].abs().min() > 1e-3  # really different states
    assert max_abs(diff, expected) <= GAE_TOL


# ============================================================================ PPO update
PPO_CASES = {
    # one epoch, one mini-batch, fixed learning rate
    "1x1-adam": {},
    "1x1-adam-obs-norm": {"obs_norm": True},
    "1x1-sgd-obs-norm": {"obs_norm": True, "optimizer": "sgd", "learning_rate": 0.05},
    # gradient-norm clip active: rsl_rl clips actor and critic separately. SGD exposes each model's clip scale directly;
    # Adam's first step is lr * sign(g) whatever the scale, so it needs several steps to see the clip.
    "1x1-sgd-clip": {"optimizer": "sgd", "learning_rate": 0.5, "max_grad_norm": 0.05},
    "2x2-adam-clip": {"num_learning_epochs": 2, "num_mini_batches": 2, "max_grad_norm": 0.05},
    # several epochs and mini-batches (one permutation per update, as rsl_rl), adaptive schedule
    "4x3-adam-obs-norm": {"obs_norm": True, "num_learning_epochs": 4, "num_mini_batches": 3},
    "4x3-adam-adaptive": {"num_learning_epochs": 4, "num_mini_batches": 3, "schedule": "adaptive",
                          "desired_kl": 0.01},
    "3x2-sgd-adaptive-clip": {"optimizer": "sgd", "learning_rate": 0.05, "num_learning_epochs": 3,
                              "num_mini_batches": 2, "schedule": "adaptive", "desired_kl": 0.002,
                              "max_grad_norm": 0.5},
    "2x2-adam-adv-per-mini-batch": {"num_learning_epochs": 2, "num_mini_batches": 2,
                                    "normalize_advantage_per_mini_batch": True},
    "2x4-adam-no-value-clip": {"num_learning_epochs": 2, "num_mini_batches": 4, "use_clipped_value_loss": False},
}


def check_ppo_update(case: str, ours: PPO, theirs: RslPPO, rollout: Rollout) -> dict[str, float]:
    drive(ours, rollout)
    drive(theirs, rollout)
    assert torch.equal(ours.storage.actions, theirs.storage.actions)
    before = {k: v.detach().clone() for k, v in ours.actor.named_parameters()}
    losses, rsl_losses = update_both(ours, theirs)
    moved = max(max_abs(v, before[k]) for k, v in ours.actor.named_parameters())
    actor, critic = model_diff(ours.actor, theirs.actor), model_diff(ours.critic, theirs.critic)
    diffs = {"actor": actor["weights"], "std": actor["std"], "critic": critic["weights"],
             "norm": max(actor.get("norm", 0.0), critic.get("norm", 0.0)),
             "lr": abs(ours.learning_rate - theirs.learning_rate),
             "losses": max(abs(losses[k] - rsl_losses[k]) for k in ("value", "surrogate", "entropy"))}
    report(f"PPO {case} (actor moved {moved:.1e}, lr {ours.learning_rate:.2e})", **diffs)
    assert moved > 10 * PARAM_TOL, "the update barely moved the actor: the comparison would not test anything"
    return diffs


@pytest.mark.parametrize("case", list(PPO_CASES))
def test_ppo_update_matches(case: str):
    rollout = make_rollout()
    ours, theirs = ppo_pair(rollout, **PPO_CASES[case])
    lr0 = ours.learning_rate
    diffs = check_ppo_update(case, ours, theirs, rollout)
    assert max(diffs.values()) <= PARAM_TOL, diffs
    assert (ours.learning_rate != lr0) == ("adaptive" in case)  # the adaptive cases really change the rate


def test_joint_gradient_clip_option_differs_by_design():
    """``clip_gradients_jointly=True`` (rlcore's former behaviour) clips the joint actor+critic norm: with an active
    clip the parameters then leave rsl_rl's, which the per-model default (the cases above) matches."""
    rollout = make_rollout()
    ours, theirs = ppo_pair(rollout, clip_gradients_jointly=True, **PPO_CASES["1x1-sgd-clip"])
    diffs = check_ppo_update("1x1-sgd-clip with clip_gradients_jointly=True", ours, theirs, rollout)
    assert diffs["actor"] > 100 * PARAM_TOL and diffs["critic"] > 100 * PARAM_TOL


def test_reshuffle_each_epoch_default_differs_by_design():
    """rlcore's default draws a new permutation every epoch; rsl_rl reuses one per update. The cases above select
    ``reshuffle_each_epoch=False``; with the default, several epochs leave rsl_rl's parameters."""
    rollout = make_rollout()
    ours, theirs = ppo_pair(rollout, reshuffle_each_epoch=True, **PPO_CASES["4x3-adam-obs-norm"])
    diffs = check_ppo_update("4x3-adam-obs-norm with reshuffle_each_epoch=True", ours, theirs, rollout)
    assert diffs["actor"] > 100 * PARAM_TOL


@pytest.mark.parametrize("rnn_type", ["lstm", "gru"])
@pytest.mark.parametrize("variant", ["1x1-adam", "3x1-adam-obs-norm", "1x1-sgd-clip"])
def test_recurrent_ppo_update_matches(rnn_type: str, variant: str):
    """One mini-batch of whole trajectories (episodes end inside the rollout, so trajectories are split and padded).

    Several mini-batches differ by design: rlcore draws a new permutation of the envs every epoch, rsl_rl takes the
    envs in order (no option restores that); with one mini-batch only the row order inside the batch differs."""
    cfg = {"1x1-adam": {}, "3x1-adam-obs-norm": {"obs_norm": True, "num_learning_epochs": 3},
           "1x1-sgd-clip": {"optimizer": "sgd", "learning_rate": 0.5, "max_grad_norm": 0.05}}[variant]
    rollout = make_rollout()
    ours, theirs = ppo_pair(rollout, rnn_type=rnn_type, **cfg)
    diffs = check_ppo_update(f"recurrent {rnn_type} {variant}", ours, theirs, rollout)
    assert max(diffs.values()) <= PARAM_TOL, diffs


def test_ppo_with_rnd_matches():
    """PPO with RND: intrinsic rewards enter GAE, the predictor takes one Adam step per mini-batch."""
    rollout = make_rollout()
    rnd_cfg = {"num_outputs": 8, "predictor_hidden_dims": [16], "target_hidden_dims": [16], "weight": 2.0,
               "state_normalization": True, "learning_rate": 1e-3}
    ours, theirs = ppo_pair(rollout, rnd_cfg=rnd_cfg, num_learning_epochs=2, num_mini_batches=2)
    diffs = check_ppo_update("with RND", ours, theirs, rollout)
    pred = map_state(theirs.rnd.state_dict(), RND_KEY_MAP)
    diffs["rnd"] = max(max_abs(v, pred[k]) for k, v in ours.rnd.state_dict().items() if k not in RND_RLCORE_ONLY)
    report("PPO with RND: predictor and RND state normaliser", rnd=diffs["rnd"])
    assert max(diffs.values()) <= PARAM_TOL, diffs


# ============================================================================ Distillation
def distillation_pair(rollout: Rollout, student_rnn: str | None = None, obs_norm: bool = False,
                      **cfg) -> tuple[Distillation, RslDistillation]:
    """rlcore and rsl_rl Distillation on identical student/teacher models and the same settings."""
    obs = rollout.obs[0]
    student, rsl_student = model_pair(obs, "student", A, student_rnn, obs_norm, stochastic=True)
    teacher, rsl_teacher = model_pair(obs, "teacher", A, None, obs_norm=True)
    cfg = {"num_learning_epochs": 1, "gradient_length": 2, "learning_rate": 1e-3, **cfg}
    ours = Distillation(student, teacher, RolloutStorage("distillation", N, T, obs, [A]), **cfg)
    theirs = RslDistillation(rsl_student, rsl_teacher, RslRolloutStorage("distillation", N, T, obs, [A]), **cfg)
    ours.train_mode()
    theirs.train_mode()
    return ours, theirs


def check_distillation_update(case: str, ours: Distillation, theirs: RslDistillation,
                              rollout: Rollout) -> dict[str, float]:
    drive(ours, rollout)
    drive(theirs, rollout)
    assert torch.equal(ours.storage.actions, theirs.storage.actions)
    assert max_abs(ours.storage.privileged_actions, theirs.storage.privileged_actions) <= GAE_TOL
    before = {k: v.detach().clone() for k, v in ours.student.named_parameters()}
    losses, rsl_losses = update_both(ours, theirs)
    moved = max(max_abs(v, before[k]) for k, v in ours.student.named_parameters())
    d = model_diff(ours.student, theirs.student)
    diffs = {"student": d["weights"], "std": d["std"], "norm": d.get("norm", 0.0),
             "loss": abs(losses["behavior"] - rsl_losses["behavior"])}
    report(f"Distillation {case} (student moved {moved:.1e})", **diffs)
    assert moved > 10 * PARAM_TOL
    return diffs


SGD = {"optimizer": "sgd", "learning_rate": 0.05}
DISTILLATION_CASES = {
    # Adam with gradient_length 1: the mean and the sum of a one-step window are the same loss
    "mlp-adam": {"gradient_length": 1},
    "mlp-adam-obs-norm-2-epochs": {"gradient_length": 1, "obs_norm": True, "num_learning_epochs": 2},
    "gru-adam": {"gradient_length": 1, "student_rnn": "gru"},
    "lstm-adam-obs-norm": {"gradient_length": 1, "student_rnn": "lstm", "obs_norm": True},
    # a clip active on every window
    "mlp-adam-clip-window-2": {"gradient_length": 2, "max_grad_norm": 1e-3},
    # longer windows (truncated BPTT through several steps) with SGD: the summed window loss, same learning rate
    "mlp-sgd-window-4": {**SGD, "gradient_length": 4},
    "gru-sgd-window-4": {**SGD, "gradient_length": 4, "student_rnn": "gru"},
    "lstm-sgd-obs-norm-window-2-2-epochs": {**SGD, "gradient_length": 2, "student_rnn": "lstm", "obs_norm": True,
                                            "num_learning_epochs": 2},
}


@pytest.mark.parametrize("case", list(DISTILLATION_CASES))
def test_distillation_update_matches(case: str):
    """``T * num_learning_epochs`` is a multiple of ``gradient_length`` in every case, so rlcore's last partial
    window (applied; rsl_rl accumulates it but never steps) does not occur and the windows coincide."""
    rollout = make_rollout()
    ours, theirs = distillation_pair(rollout, **DISTILLATION_CASES[case])
    diffs = check_distillation_update(case, ours, theirs, rollout)
    assert max(diffs.values()) <= PARAM_TOL, diffs


@pytest.mark.parametrize("student_rnn", [None, "gru"], ids=["mlp", "gru"])
def test_distillation_window_loss_is_summed_like_rsl_rl(student_rnn: str | None):
    """Each optimiser step back-propagates the sum of the window's per-step losses, as rsl_rl 5.5.1 does (rlcore
    once stepped on their mean: with SGD a step ``gradient_length`` times smaller, and a different clip threshold)."""
    rollout = make_rollout()
    ours, theirs = distillation_pair(rollout, student_rnn=student_rnn, optimizer="sgd", learning_rate=0.05,
                                     gradient_length=4)
    diffs = check_distillation_update(f"window-4 SGD, same learning rate, {student_rnn or 'mlp'}", ours, theirs,
                                      rollout)
    assert max(diffs.values()) <= PARAM_TOL, diffs


# ============================================================================ RND intrinsic reward
def rnd_pair(state_norm: bool, reward_norm: bool, schedule: dict | None, step_dt: float = 0.02):
    """rlcore RND (weight per second, ``step_dt``) and rsl_rl RND (weight pre-multiplied by step_dt, as rsl_rl's
    ``resolve_rnd_config`` does) with the same predictor, target and normaliser states."""
    weight, final_value = 3.0, 0.5
    common = {"num_states": sum(SHAPES.values()), "num_outputs": 8, "predictor_hidden_dims": [16, 16],
              "target_hidden_dims": [16], "state_normalization": state_norm, "reward_normalization": reward_norm}
    ours_schedule = None if schedule is None else {**schedule, "final_value": final_value}
    # rsl_rl does not scale the schedule's final_value by step_dt; rlcore does (final_value is per second too)
    rsl_schedule = None if schedule is None else {**schedule, "final_value": final_value * step_dt}
    theirs = RslRND(obs_groups={"rnd_state": GROUPS["rnd_state"]}, weight=weight * step_dt,
                    weight_schedule=rsl_schedule, **common)
    ours = RandomNetworkDistillation(obs_groups=GROUPS["rnd_state"], weight=weight, step_dt=step_dt,
                                     weight_schedule=ours_schedule, **common)
    if state_norm:
        theirs.update_normalization(make_obs(torch.Generator().manual_seed(5), 64))
    copy_rnd(theirs, ours)
    return ours, theirs


RND_SCHEDULES = {"constant": None, "step": {"mode": "step", "final_step": 3},
                 "linear": {"mode": "linear", "initial_step": 1, "final_step": 4}}


@pytest.mark.parametrize("schedule", list(RND_SCHEDULES))
@pytest.mark.parametrize("state_norm", [False, True], ids=["raw-state", "state-norm"])
def test_rnd_intrinsic_reward_matches(state_norm: bool, schedule: str):
    """``weight(step) * step_dt * ||target(x) - predictor(x)||`` on fixed batches over five steps (schedule moving)."""
    ours, theirs = rnd_pair(state_norm, reward_norm=False, schedule=RND_SCHEDULES[schedule])
    gen = torch.Generator().manual_seed(11)
    diff, rewards = 0.0, []
    for _ in range(5):
        obs = make_obs(gen)
        r_ours, r_theirs = ours.get_intrinsic_reward(obs), theirs.get_intrinsic_reward(obs)
        diff = max(diff, max_abs(r_ours, r_theirs))
        rewards.append(r_ours.mean().item())
    report(f"RND reward state_norm={state_norm} schedule={schedule}", reward=diff)
    assert min(rewards) > 0 and ours.weight == (3.0 if schedule == "constant" else 0.5)  # the schedule ran to its end
    assert diff <= GAE_TOL


def test_rnd_reward_normalization_differs_only_by_epsilon():
    """By design rlcore divides the RND error by ``std + eps`` (eps = 1e-2) where rsl_rl divides by ``std`` alone.
    The running statistics agree, and ``r_rlcore * (std + eps) == r_rsl_rl * std`` (no option changes eps)."""
    ours, theirs = rnd_pair(state_norm=True, reward_norm=True, schedule=None)
    gen = torch.Generator().manual_seed(12)
    diff, stats, raw = 0.0, 0.0, 0.0
    for _ in range(4):
        obs = make_obs(gen)
        r_ours, r_theirs = ours.get_intrinsic_reward(obs), theirs.get_intrinsic_reward(obs)
        norm, rsl_norm = ours.reward_normalizer.emp_norm, theirs.reward_normalizer.emp_norm
        stats = max(stats, max_abs(norm._std, rsl_norm._std), max_abs(norm._mean, rsl_norm._mean))
        diff = max(diff, max_abs(r_ours * (norm._std + norm.eps), r_theirs * rsl_norm._std))
        raw = max(raw, max_abs(r_ours, r_theirs))
    report("RND reward normalisation", stats=stats, rescaled_reward=diff, raw_reward_deviation=raw)
    assert stats <= GAE_TOL and diff <= GAE_TOL
    assert raw > 10 * GAE_TOL  # the epsilon really is a difference
