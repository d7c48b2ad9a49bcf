"""Regression tests of PPO defects found in review (issue 11): each fails on the code before its fix.

- gradients are clipped per model (actor, critic) as rsl_rl does, not by their joint norm (the critic's large
  gradient shrank the actor's step ~100x); ``clip_gradients_jointly=True`` keeps the joint clip;
- a recurrent model with one-step rollouts can be updated (its first stored hidden state used to be missing);
- the RND predictor is trained on the real transitions of a recurrent mini-batch only, not on its zero padding.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from rlcore.algorithms.ppo import clip_grad_norm_per_model

BOUND = 1e-3  # far below every gradient norm here, so every clip is active


def _grad_norm(module: nn.Module) -> float:
    return torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in module.parameters() if p.grad is not None])).item()


def _one_update_grads(kit, **ppo_kwargs) -> tuple[dict, dict]:
    """Gradient norms of actor and critic right after backward (pre) and at the optimiser step (post)."""
    env = kit.FakeEnv(num_envs=8)
    ppo = kit.make_ppo(env.get_observations(), 6, num_learning_epochs=1, num_mini_batches=1, max_grad_norm=BOUND,
                       schedule="fixed", **ppo_kwargs)
    kit.collect(ppo, env, 6)
    pre, post = {}, {}
    backward = torch.Tensor.backward

    def recording_backward(self, *args, **kwargs):
        backward(self, *args, **kwargs)
        if not pre:
            pre.update(actor=_grad_norm(ppo.actor), critic=_grad_norm(ppo.critic))

    step = ppo.optimizer.step
    ppo.optimizer.step = lambda *a, **k: (post.update(actor=_grad_norm(ppo.actor), critic=_grad_norm(ppo.critic)),
                                          step(*a, **k))[1]
    torch.Tensor.backward = recording_backward
    try:
        ppo.update()
    finally:
        torch.Tensor.backward = backward
    return pre, post


def test_actor_and_critic_gradients_are_clipped_separately(kit):
    pre, post = _one_update_grads(kit)
    assert min(pre.values()) > 10 * BOUND  # both clips active
    # each model's norm is exactly the bound: the actor's step no longer depends on the critic's gradient
    # (clipped jointly, the actor would end at BOUND * |g_a| / |(g_a, g_c)|)
    assert post["actor"] == pytest.approx(BOUND, rel=1e-4)
    assert post["critic"] == pytest.approx(BOUND, rel=1e-4)


def test_joint_clipping_is_an_option(kit):
    pre, post = _one_update_grads(kit, clip_gradients_jointly=True)
    joint_pre = (pre["actor"] ** 2 + pre["critic"] ** 2) ** 0.5
    assert (post["actor"] ** 2 + post["critic"] ** 2) ** 0.5 == pytest.approx(BOUND, rel=1e-4)
    # both shrink by the same factor, so the actor ends below the bound
    assert post["actor"] / pre["actor"] == pytest.approx(BOUND / joint_pre, rel=1e-4)
    assert post["actor"] < 0.9 * BOUND


def test_per_model_clip_equals_torch_clip_on_each_model():
    """Without shared parameters: exactly ``clip_grad_norm_`` on the actor, then on the critic (rsl_rl)."""
    torch.manual_seed(0)
    actor, critic = nn.Linear(4, 3), nn.Sequential(nn.Linear(4, 5), nn.Linear(5, 1))
    for p in [*actor.parameters(), *critic.parameters()]:
        p.grad = torch.randn_like(p) * (10.0 if p in set(critic.parameters()) else 0.3)
    expected = {}
    for model in (actor, critic):
        grads = [p.grad.clone() for p in model.parameters()]
        clone = [nn.Parameter(p.detach().clone()) for p in model.parameters()]
        for c, g in zip(clone, grads):
            c.grad = g
        nn.utils.clip_grad_norm_(clone, 1.0)
        expected[model] = [c.grad for c in clone]
    norms = clip_grad_norm_per_model([actor, critic], 1.0)
    assert norms[1] > 1.0 and norms[0] > 1.0
    for model in (actor, critic):
        for p, e in zip(model.parameters(), expected[model]):
            torch.testing.assert_close(p.grad, e, rtol=1e-6, atol=0)


def test_shared_encoder_is_scaled_once_by_the_smaller_factor():
    """A CNN encoder shared by actor and critic: both models end within the bound, whatever their order."""
    torch.manual_seed(1)
    shared, actor_head, critic_head = nn.Linear(3, 3), nn.Linear(3, 2), nn.Linear(3, 1)
    actor, critic = nn.ModuleList([shared, actor_head]), nn.ModuleList([shared, critic_head])
    grads = {p: torch.randn_like(p) for p in [*actor.parameters(), *critic_head.parameters()]}
    for p in critic_head.parameters():
        grads[p] = grads[p] * 50.0

    def run(models):
        for p, g in grads.items():
            p.grad = g.clone()
        clip_grad_norm_per_model(models, 1.0)
        return {p: p.grad.clone() for p in grads}

    def norm(ps):
        return torch.linalg.vector_norm(torch.stack([grads[p].norm() for p in ps])).item()

    out = run([actor, critic])
    c_actor, c_critic = min(1.0, 1.0 / norm(actor.parameters())), min(1.0, 1.0 / norm(critic.parameters()))
    assert c_critic < c_actor < 1.0
    for p in actor_head.parameters():
        torch.testing.assert_close(out[p], grads[p] * c_actor, rtol=1e-5, atol=0)
    for p in critic_head.parameters():
        torch.testing.assert_close(out[p], grads[p] * c_critic, rtol=1e-5, atol=0)
    for p in shared.parameters():
        torch.testing.assert_close(out[p], grads[p] * c_critic, rtol=1e-5, atol=0)
    for model in (actor, critic):
        assert torch.linalg.vector_norm(torch.stack([out[p].norm() for p in model.parameters()])) <= 1.0 + 1e-5
    reversed_order = run([critic, actor])
    for p in grads:
        assert torch.equal(out[p], reversed_order[p])


@pytest.mark.parametrize("rnn_type", ["gru", "lstm"])
def test_recurrent_ppo_with_one_step_rollouts(kit, rnn_type):
    """``num_steps_per_env=1``: the only stored state of the first rollout is the not-yet-run model's (zeros)."""
    env = kit.FakeEnv(num_envs=4)
    ppo = kit.make_ppo(env.get_observations(), 1, actor_rnn=rnn_type, critic_rnn=rnn_type, num_mini_batches=2,
                       num_learning_epochs=1)
    kit.collect(ppo, env, 1)
    first = [b.clone() for b in ppo.storage.saved_hidden_state_a]
    assert all(torch.count_nonzero(b) == 0 for b in first)  # the initial state is zero
    ppo.update()
    kit.collect(ppo, env, 1)
    assert any(torch.count_nonzero(b) > 0 for b in ppo.storage.saved_hidden_state_a)  # now the carried state
    losses = ppo.update()
    assert all(torch.isfinite(torch.tensor(v)) for v in losses.values())


def test_rnd_predictor_trains_on_real_transitions_only(kit):
    """Recurrent mini-batches are padded trajectories; RND must not learn the zero rows of the padding."""
    n, t = 8, 24
    env = kit.FakeEnv(num_envs=n, done_fn=kit.periodic_dones(n, [10] * n))
    rnd_cfg = {"num_states": 5, "obs_groups": ["policy"], "num_outputs": 4, "predictor_hidden_dims": [8],
               "target_hidden_dims": [8], "step_dt": 0.02}
    ppo = kit.make_ppo(env.get_observations(), t, actor_rnn="gru", critic_rnn="gru", num_mini_batches=2,
                       num_learning_epochs=1, rnd_cfg=rnd_cfg)
    kit.collect(ppo, env, t)
    padding = [1.0 - b.masks.float().mean().item() for b in ppo.storage.recurrent_mini_batch_generator(2, 1)]
    assert min(padding) > 0.5  # most rows of these mini-batches are padding
    rows = []
    forward = ppo.rnd.predictor.forward
    ppo.rnd.predictor.forward = lambda x: (rows.append(x.detach().clone()), forward(x))[1] if torch.is_grad_enabled() \
        else forward(x)
    ppo.update()
    seen = torch.cat(rows)
    assert seen.shape[0] == n * t  # every real transition once per epoch, nothing else
    assert not (seen == 0).all(dim=-1).any()
    expected = torch.sort(ppo.storage.observations["policy"].reshape(-1, 5), dim=0).values
    torch.testing.assert_close(torch.sort(seen, dim=0).values, expected)
