"""Did a PPO update move the models the right way? Checked on the rollout the update learned from.

``watch_updates(alg)`` wraps ``alg.update``: before each update it keeps the rollout (observations, actions,
rollout log-probabilities, advantages, return targets) and copies of the actor and critic; after it, it evaluates
the updated models on that rollout with the observation statistics the update trained under (the normalisers
merge the rollout only after the mini-batches). A correct update lowers its own clipped surrogate and value loss
on its own data; a sign error, an update in the wrong direction or no update at all does not.
"""

from __future__ import annotations

import torch


def _state(model: torch.nn.Module) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _losses(alg, data: dict) -> tuple[float, float]:
    """(clipped surrogate, value MSE) of the algorithm's actor and critic on the kept rollout."""
    with torch.no_grad():
        alg.actor(data["obs"], stochastic_output=True)
        ratio = torch.exp(alg.actor.get_output_log_prob(data["actions"]) - data["old_log_prob"])
        adv, eps = data["advantages"], alg.clip_param
        surrogate = torch.max(-adv * ratio, -adv * ratio.clamp(1 - eps, 1 + eps)).mean()
        value = (alg.critic(data["obs"]).squeeze(-1) - data["returns"]).square().mean()
    return surrogate.item(), value.item()


def watch_updates(alg) -> list[dict]:
    """Wrap ``alg.update``; each update appends ``{"surrogate": (before, after), "value": (before, after)}``."""
    records: list[dict] = []
    update = alg.update
    models = (alg.actor, alg.critic)

    def watched_update():
        st = alg.storage
        data = {"obs": st.observations.reshape(-1).clone(),
                "actions": st.actions.reshape(-1, st.actions.shape[-1]).clone(),
                "old_log_prob": st.actions_log_prob.reshape(-1).clone(),
                "advantages": st.advantages.reshape(-1).clone(), "returns": st.returns.reshape(-1).clone()}
        before = [_state(m) for m in models]
        out = update()
        after = [_state(m) for m in models]
        for m, state in zip(models, before):
            m.load_state_dict(state)
        loss_before = _losses(alg, data)
        for m, state, old in zip(models, after, before):  # updated weights, the statistics it trained under
            m.load_state_dict({**state, **{k: v for k, v in old.items() if "normalizer" in k}})
        loss_after = _losses(alg, data)
        for m, state in zip(models, after):
            m.load_state_dict(state)
        records.append({"surrogate": (loss_before[0], loss_after[0]), "value": (loss_before[1], loss_after[1])})
        return out

    alg.update = watched_update
    return records


def assert_each_update_improved(records: list[dict], count: int) -> None:
    """Every update lowered its clipped surrogate and its value loss on its own rollout."""
    assert len(records) == count
    for i, rec in enumerate(records):
        (s0, s1), (v0, v1) = rec["surrogate"], rec["value"]
        assert s1 < s0 - 1e-4, f"update {i}: surrogate {s0:.5f} -> {s1:.5f} (should decrease)"
        assert v1 < v0, f"update {i}: value loss {v0:.5f} -> {v1:.5f} (should decrease)"
