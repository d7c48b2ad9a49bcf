"""A third, toy extension plugs into PPO through the :class:`Extension` hooks alone (no change to ppo.py).

``ActionPenalty`` adds ``coef * mean(mu(o)^2)`` (the actor's mean action on the mini-batch) to PPO's loss, logs
it as ``"action_penalty"``, gives a bonus ``BONUS * sum(policy obs)`` per step, and saves one checkpoint entry.
A scripted rollout (one epoch, one mini-batch, ``optimizer.step`` a no-op that records the gradients) lets the
gradient be compared with the hand-computed gradient of the penalty.
"""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rlcore.algorithms import PPO
from rlcore.extensions import Extension, Symmetry
from rlcore.models import MLPModel, RNNModel
from rlcore.storage import RolloutStorage

N, T, BONUS = 8, 4, 0.25
GROUPS = {"actor": ["policy"], "critic": ["policy"]}
GAUSSIAN = {"class_name": "GaussianDistribution", "init_std": 1.0}


class ActionPenalty(Extension):
    """Toy extension: a penalty on the mean action (an extra loss) and a bonus on the observations."""

    name = "action_penalty"
    loss_names = ("action_penalty",)

    def __init__(self, coef: float) -> None:
        self.coef = coef
        self.batches: list = []
        self.modes: list[str] = []
        self.calls = torch.zeros(())

    def intrinsic_reward(self, obs: TensorDict, sync: bool = False) -> torch.Tensor:
        return BONUS * obs["policy"].sum(-1)

    def extra_loss(self, alg, batch):
        self.batches.append(batch)
        penalty = alg.actor(batch.observations, stochastic_output=False).square().mean()
        return self.coef * penalty, {"action_penalty": penalty}

    def after_step(self, batch, sync: bool = False) -> dict[str, float]:
        self.calls += 1
        return {}

    def train_mode(self) -> None:
        self.modes.append("train")

    def eval_mode(self) -> None:
        self.modes.append("eval")

    def save(self) -> dict:
        return {"action_penalty_calls": self.calls.clone()}

    def load(self, state: dict) -> None:
        self.calls = state["action_penalty_calls"].clone()


def _obs(n: int = N) -> TensorDict:
    return TensorDict({"policy": torch.randn(n, 3)}, batch_size=[n])


def _ppo(coef: float, seed: int = 0) -> tuple[PPO, ActionPenalty, list[tuple[torch.Tensor, TensorDict]]]:
    """PPO with the toy extension and one collected rollout; returns it, the extension and the env's steps
    ``(reward_t, obs_{t+1})``."""
    torch.manual_seed(seed)
    obs = _obs()
    actor = MLPModel(obs, GROUPS, "actor", 2, hidden_dims=[16], init_gains=[2**0.5, 1.0], distribution_cfg=GAUSSIAN)
    critic = MLPModel(obs, GROUPS, "critic", 1, hidden_dims=[16])
    ext = ActionPenalty(coef)
    ppo = PPO(actor, critic, RolloutStorage("rl", N, T, obs, [2]), num_learning_epochs=1, num_mini_batches=1,
              schedule="fixed", max_grad_norm=1e9, extensions=[ext])
    steps = []
    with torch.inference_mode():
        for _ in range(T):
            ppo.act(obs)
            obs = _obs()
            steps.append((torch.randn(N), obs))
            ppo.process_env_step(obs, steps[-1][0], torch.zeros(N, dtype=torch.bool), {})
        ppo.compute_returns(obs)
    return ppo, ext, steps


def _update(ppo: PPO, monkeypatch) -> tuple[dict, torch.Tensor]:
    """``ppo.update()`` with a no-op optimiser step; returns its output and the gradient it would have applied."""
    grads = []
    params = [p for group in ppo.optimizer.param_groups for p in group["params"]]
    monkeypatch.setattr(ppo.optimizer, "step", lambda *a, **k: grads.append(
        torch.cat([torch.zeros(p.numel()) if p.grad is None else p.grad.reshape(-1).clone() for p in params])))
    out = ppo.update()
    assert len(grads) == 1
    return out, grads[0]


def _penalty_grad(ppo: PPO, obs: TensorDict) -> torch.Tensor:
    params = [p for group in ppo.optimizer.param_groups for p in group["params"]]
    penalty = ppo.actor(obs, stochastic_output=False).square().mean()
    grads = torch.autograd.grad(penalty, params, allow_unused=True)
    return torch.cat([torch.zeros(p.numel()) if g is None else g.reshape(-1) for p, g in zip(params, grads)])


def test_extra_loss_changes_the_gradient_by_coef_times_its_own_gradient(monkeypatch):
    """Same rollout, coefficients 0.5 and 2.0: the gradients differ by exactly 1.5 x grad(penalty)."""
    low_ppo, _, _ = _ppo(0.5, seed=3)
    low_out, low = _update(low_ppo, monkeypatch)
    ppo, ext, _ = _ppo(2.0, seed=3)
    out, high = _update(ppo, monkeypatch)
    (batch,) = ext.batches  # the mini-batch as stored: N * T rows
    assert batch.observations.batch_size == torch.Size([N * T])
    penalty_grad = _penalty_grad(ppo, batch.observations)
    assert penalty_grad.norm() > 1e-2 * high.norm()  # the term matters next to PPO's own gradient
    torch.testing.assert_close(high - low, 1.5 * penalty_grad, rtol=1e-3, atol=1e-6)
    with torch.no_grad():
        penalty = ppo.actor(batch.observations, stochastic_output=False).square().mean().item()
    assert out["action_penalty"] == pytest.approx(penalty, rel=1e-5)
    assert list(out) == ["value", "surrogate", "entropy", "kl", "action_penalty", "learning_rate"]
    assert low_out["surrogate"] == pytest.approx(out["surrogate"], rel=1e-6)  # PPO's own terms are untouched
    assert int(ext.calls) == 1  # after_step ran once per mini-batch


def test_intrinsic_reward_modes_and_checkpoint_go_through_the_hooks():
    ppo, ext, steps = _ppo(1.0)
    for t, (reward, next_obs) in enumerate(steps):  # the bonus is of the step's new observations
        bonus = BONUS * next_obs["policy"].sum(-1)
        assert bonus.abs().min() > 1e-3
        torch.testing.assert_close(ppo.storage.rewards[t].squeeze(-1), reward + bonus)
    torch.testing.assert_close(ppo.intrinsic_rewards, BONUS * steps[-1][1]["policy"].sum(-1))  # kept for logging
    ppo.train_mode()
    ppo.eval_mode()
    assert ext.modes == ["train", "eval"]
    ext.calls += 7
    state = ppo.save()
    assert int(state["action_penalty_calls"]) == 7
    other, other_ext, _ = _ppo(1.0, seed=1)
    assert other.load(state, {"action_penalty": False}) is False and int(other_ext.calls) == 0  # deselected
    assert other.load(state) is True and int(other_ext.calls) == 7
    assert other.rnd is None and other.symmetry is None  # rsl_rl's attributes, no such extension


def test_bad_extensions_are_refused_with_one_clear_error():
    obs = _obs()
    actor = MLPModel(obs, GROUPS, "actor", 2, hidden_dims=[8], distribution_cfg=GAUSSIAN)
    critic = MLPModel(obs, GROUPS, "critic", 1, hidden_dims=[8])
    storage = RolloutStorage("rl", N, T, obs, [2])
    with pytest.raises(ValueError, match="Extension instances, got dict"):
        PPO(actor, critic, storage, extensions=[{"coef": 1.0}])
    with pytest.raises(ValueError, match=r"distinct names.*\['action_penalty', 'action_penalty'\]"):
        PPO(actor, critic, storage, extensions=[ActionPenalty(1.0), ActionPenalty(2.0)])
    # an instance is checked against the models like a configured one: symmetry refuses a recurrent actor
    rnn = RNNModel(obs, GROUPS, "actor", 2, hidden_dims=[8], rnn_type="gru", rnn_hidden_dim=8,
                   distribution_cfg=GAUSSIAN)
    mirror = Symmetry(None, lambda env=None, obs=None, actions=None: (obs, actions), use_mirror_loss=True,
                      mirror_loss_coeff=1.0)
    with pytest.raises(ValueError, match="symmetry.*recurrent"):
        PPO(rnn, critic, storage, extensions=[mirror])
    ppo = PPO(actor, critic, storage, extensions=[mirror])
    assert ppo.symmetry is mirror and ppo.extensions == [mirror]
