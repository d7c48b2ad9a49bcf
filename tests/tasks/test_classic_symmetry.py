"""Tests of rlcore_tasks.classic.symmetry.cartpole_mirror: layout, both observation variants, and that it is a true
symmetry of the cart-pole dynamics (the mirrored state under the mirrored action stays the mirror image)."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rlcore.extensions import Symmetry
from rlcore_tasks.classic.cartpole import CartPole
from rlcore_tasks.classic.symmetry import cartpole_mirror


@pytest.mark.parametrize("hide_velocity", [False, True])
def test_layout_original_first_then_negated(hide_velocity):
    env = CartPole(num_envs=5, seed=0, hide_velocity=hide_velocity)
    obs, actions = env.get_observations(), torch.randn(5, 1)
    obs_aug, actions_aug = cartpole_mirror(env=env, obs=obs, actions=actions)
    assert obs_aug.batch_size == torch.Size([10]) and actions_aug.shape == (10, 1)
    assert obs_aug["policy"].shape == (10, 2 if hide_velocity else 4) and obs_aug["critic"].shape == (10, 4)
    for key in ("policy", "critic"):
        assert torch.equal(obs_aug[key][:5], obs[key]) and torch.equal(obs_aug[key][5:], -obs[key])
    assert torch.equal(actions_aug, torch.cat([actions, -actions]))
    # Accepted by the PPO symmetry extension (which checks that the originals come first).
    Symmetry(env=env, use_data_augmentation=True, data_augmentation_func=cartpole_mirror).augment(obs, actions)


def test_none_inputs_give_none_outputs():
    obs = CartPole(num_envs=3, seed=0).get_observations()
    assert cartpole_mirror(obs=obs)[1] is None
    assert cartpole_mirror(actions=torch.zeros(3, 1))[0] is None
    assert cartpole_mirror() == (None, None)


def test_is_a_symmetry_of_the_dynamics():
    """Stepping the mirrored state with the mirrored action gives the mirror of the stepped state."""
    env, mirrored_env = CartPole(num_envs=64, seed=0, reset_noise=0.2), CartPole(num_envs=64, seed=1, reset_noise=0.2)
    mirrored_env.state = -env.state.clone()
    keep = torch.ones(64, dtype=torch.bool)  # envs not reset yet (a reset draws fresh, unrelated start states)
    for _ in range(5):
        actions = torch.rand(64, 1) * 2 - 1
        obs, _, dones, _ = env.step(actions)
        _, actions_aug = cartpole_mirror(actions=actions)
        mirrored_obs, _, mirrored_dones, _ = mirrored_env.step(-actions)
        assert torch.equal(dones[keep], mirrored_dones[keep])
        keep &= ~dones
        torch.testing.assert_close(obs["critic"][keep], -mirrored_obs["critic"][keep])
        mirror_of_obs, _ = cartpole_mirror(obs=obs[keep])
        torch.testing.assert_close(mirror_of_obs[int(keep.sum()):]["critic"], mirrored_obs["critic"][keep])
        assert torch.equal(actions_aug[64:], -actions)


def test_rejects_non_cartpole_groups():
    obs = TensorDict({"policy": torch.zeros(3, 4), "camera": torch.zeros(3, 7)}, batch_size=[3])
    with pytest.raises(ValueError, match="camera"):
        cartpole_mirror(obs=obs)
