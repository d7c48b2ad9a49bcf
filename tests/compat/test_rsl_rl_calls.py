"""Calls written for rsl_rl 5.5.1 mean the same in rlcore: positional order, rsl_rl's keyword names, its helpers.

``test_rsl_rl_api.py`` checks the signatures by inspection; these tests make the calls and check what they do (the
rsl_rl-dependent ones are skipped when ``rsl-rl-lib`` is not installed).
"""

from __future__ import annotations

import copy

import pytest
import torch
from tensordict import TensorDict

from rlcore.algorithms import PPO
from rlcore.errors import ConfigError
from rlcore.extensions import RandomNetworkDistillation, resolve_rnd_config
from rlcore.models import MLPModel
from rlcore.modules import CNN, MLP, RNN, EmpiricalDiscountedVariationNormalization
from rlcore.storage import RolloutStorage

N, A = 4, 2
GAUSSIAN = {"class_name": "GaussianDistribution", "init_std": 1.0}
RSL_PADDINGS = ("none", "zeros", "reflect", "replicate", "circular")


def _obs() -> TensorDict:
    g = torch.Generator().manual_seed(0)
    return TensorDict({"policy": torch.randn(N, 3, generator=g), "extra": torch.randn(N, 2, generator=g),
                       "image": torch.randn(N, 1, 6, 5, generator=g)}, batch_size=[N])


def _ppo_parts():
    obs = _obs()
    actor = MLPModel(obs, {"actor": ["policy"]}, "actor", A, [8], distribution_cfg=dict(GAUSSIAN))
    critic = MLPModel(obs, {"critic": ["policy"]}, "critic", 1, [8])
    return actor, critic, RolloutStorage("rl", N, 3, obs, [A])


# ---------------------------------------------------------------------------- PPO
def test_ppo_positional_arguments_follow_rsl_rls_order():
    """rsl_rl's 19 leading positional parameters, ending with use_mixed_precision and device, land on rlcore's
    parameters of the same names (rlcore's own options come after them)."""
    ppo = PPO(*_ppo_parts(), 3, 2, 0.3, 0.9, 0.8, 0.5, 0.02, 2e-3, 0.7, "sgd", False, "fixed", 0.02, True, True, "cpu")
    assert (ppo.num_learning_epochs, ppo.num_mini_batches, ppo.clip_param, ppo.gamma, ppo.lam) == (3, 2, 0.3, 0.9, 0.8)
    assert (ppo.value_loss_coef, ppo.entropy_coef, ppo.learning_rate, ppo.max_grad_norm) == (0.5, 0.02, 2e-3, 0.7)
    assert isinstance(ppo.optimizer, torch.optim.SGD)
    assert (ppo.use_clipped_value_loss, ppo.schedule, ppo.desired_kl) == (False, "fixed", 0.02)
    assert ppo.normalize_advantage_per_mini_batch is True
    assert ppo.use_mixed_precision is True and ppo.device == "cpu"
    assert ppo.reshuffle_each_epoch is True  # rlcore's option kept its default
    # rsl_rl's instance attributes
    assert ppo.gpu_world_size == 1 and not ppo.is_multi_gpu
    assert PPO(*_ppo_parts(), use_bf16=True).use_mixed_precision is True  # rlcore's older name sets the same flag
    assert PPO(*_ppo_parts()).use_mixed_precision is False


def test_ppo_load_takes_rsl_rls_keyword_loaded_dict():
    torch.manual_seed(0)
    source = PPO(*_ppo_parts())
    torch.manual_seed(1)
    target = PPO(*_ppo_parts())
    key = "mlp.0.weight"
    assert not torch.equal(target.actor.state_dict()[key], source.actor.state_dict()[key])
    assert target.load(loaded_dict=source.save(), load_cfg=None, strict=True) is True
    for model in ("actor", "critic"):
        for k, v in getattr(source, model).state_dict().items():
            assert torch.equal(getattr(target, model).state_dict()[k], v), (model, k)


@pytest.mark.slow
def test_ppo_compile_validates_the_mode_and_compiles_the_heads_in_place():
    ppo = PPO(*_ppo_parts())
    keys = list(ppo.actor.state_dict())
    ppo.compile()  # None: nothing happens
    assert ppo.actor.mlp._compiled_call_impl is None and ppo.critic.mlp._compiled_call_impl is None
    with pytest.raises(ValueError, match="reduce-overhead"):
        ppo.compile("reduce-overhead")
    assert ppo.actor.mlp._compiled_call_impl is None
    ppo.compile("default")  # compiles lazily, on the first call; nothing is run here
    assert ppo.actor.mlp._compiled_call_impl is not None and ppo.critic.mlp._compiled_call_impl is not None
    assert list(ppo.actor.state_dict()) == keys  # in place: checkpoints keep their keys


def test_ppo_unknown_optimizer_is_a_config_error_naming_the_valid_ones():
    with pytest.raises(ConfigError, match=r"^Unknown optimizer 'adamx'\. Valid optimizers: adam, adamw, sgd, rmsprop\.$"):
        PPO(*_ppo_parts(), optimizer="adamx")
    assert isinstance(PPO(*_ppo_parts(), optimizer="AdamW").optimizer, torch.optim.AdamW)


# ---------------------------------------------------------------------------- RND
def test_rnd_positional_arguments_follow_rsl_rls_order():
    rnd = RandomNetworkDistillation(3, ["policy"], 4, [8], [8], "elu", True, False, 2.0, None, 5e-3, "cpu", 0.1)
    assert (rnd.state_normalization, rnd.reward_normalization) == (True, False)
    assert (rnd.initial_weight, rnd.learning_rate, rnd.step_dt) == (2.0, 5e-3, 0.1)


class _Env:
    step_dt = 0.02

    @property
    def unwrapped(self):  # rsl_rl's resolver reads env.unwrapped.step_dt
        return self


def test_resolve_rnd_config_fills_what_rsl_rls_does():
    """Same state size and groups as rsl_rl's resolver; rlcore keeps ``weight`` per second and hands over ``step_dt``
    (its module multiplies by it), where rsl_rl pre-multiplies the weight."""
    rsl_resolve = pytest.importorskip("rsl_rl.extensions").resolve_rnd_config

    obs, groups = _obs(), {"rnd_state": ["policy", "extra"]}
    given = {"rnd_cfg": {"weight": 1.5, "num_outputs": 4}}
    ours = resolve_rnd_config(copy.deepcopy(given), obs, groups, _Env())["rnd_cfg"]
    theirs = rsl_resolve(copy.deepcopy(given), obs, groups, _Env())["rnd_cfg"]
    assert ours["num_states"] == theirs["num_states"] == 5
    assert ours["obs_groups"] == theirs["obs_groups"]["rnd_state"] == ["policy", "extra"]
    assert ours["weight"] == 1.5 and ours["step_dt"] == 0.02
    assert ours["weight"] * ours["step_dt"] == pytest.approx(theirs["weight"])
    rnd = RandomNetworkDistillation(**ours)
    assert rnd.num_states == 5 and rnd.step_dt == 0.02


def test_resolve_rnd_config_without_rnd_and_with_bad_groups():
    given = {"rnd_cfg": {"weight": 1.5, "step_dt": 0.5}}
    resolved = resolve_rnd_config(given.copy(), _obs(), {"rnd_state": ["policy"]}, object())  # the config's dt wins
    assert resolved["rnd_cfg"]["step_dt"] == 0.5 and resolved["rnd_cfg"]["num_states"] == 3
    assert given["rnd_cfg"] == {"weight": 1.5, "step_dt": 0.5}  # the caller's dict is not modified
    assert resolve_rnd_config({}, _obs(), {}, object()) == {"rnd_cfg": None}
    with pytest.raises(ConfigError, match=r"^RND takes 1D observation groups, but 'image' has shape \(4, 1, 6, 5\)"):
        resolve_rnd_config({"rnd_cfg": {}}, _obs(), {"rnd_state": ["image"]}, _Env())
    with pytest.raises(ConfigError, match=r"^RND needs the env's control step"):
        resolve_rnd_config({"rnd_cfg": {}}, _obs(), {"rnd_state": ["policy"]}, object())


# ---------------------------------------------------------------------------- modules
@pytest.mark.parametrize("padding", RSL_PADDINGS)
def test_cnn_padding_modes_give_rsl_rls_network(padding):
    """Positional arguments in rsl_rl's order (padding after dilation); with rsl_rl's weights loaded, rlcore's CNN
    has rsl_rl's output size and outputs, on odd and even sizes, strides 1-3, dilation and layer norm."""
    RslCNN = pytest.importorskip("rsl_rl.modules").CNN

    for size, args, kwargs in [((17, 11), ([4, 8], 3, [1, 2], 1), {}),
                               ((25, 20), ([4, 8, 3], [5, 3, 2], [2, 1, 2], [1, 2, 1]), {"norm": "layer"}),
                               ((25, 20), ([4, 8, 3], [4, 3, 3], [2, 1, 3], 1), {})]:
        torch.manual_seed(0)
        theirs = RslCNN(size, 1, *args, padding, **kwargs)
        ours = CNN(size, 1, *args, padding, **kwargs)
        ours.load_state_dict(theirs.state_dict())
        x = torch.randn(2, 1, *size)
        assert ours.output_dim == theirs.output_dim and ours.output_channels is theirs.output_channels is None
        torch.testing.assert_close(ours(x), theirs(x), rtol=1e-6, atol=1e-6)
        theirs = RslCNN(size, 1, *args, padding, flatten=False, **kwargs)
        ours = CNN(size, 1, *args, padding, flatten=False, **kwargs)
        assert ours.output_channels == theirs.output_channels == args[0][-1]
        assert ours(x).shape == theirs(x).shape


def test_cnn_default_padding_keeps_the_size_and_bad_padding_is_refused():
    cnn = CNN((9, 11), 1, [4, 6], [3, 5])  # "same": d * (k - 1) // 2 per side
    assert cnn.output_dim == 6 * 9 * 11
    assert CNN((9, 11), 1, [4, 6], [3, 5], padding="none").output_dim == 6 * (9 - 6) * (11 - 6)
    with pytest.raises(ConfigError, match=r"^Unknown CNN padding 'valid'\. Valid: same, none, zeros"):
        CNN((9, 11), 1, [4], padding="valid")


def test_mlp_init_weights_takes_rsl_rls_scales():
    """``init_weights(scales)``: one gain for every Linear layer (orthogonal: W W^T = g^2 I on the short side),
    or one per Linear layer; biases zero."""
    mlp = MLP(8, 4, [16])
    for layer in mlp.linear_layers:
        torch.nn.init.normal_(layer.bias)
    mlp.init_weights(scales=2.0)
    first, last = mlp.linear_layers
    torch.testing.assert_close(first.weight.T @ first.weight, 4.0 * torch.eye(8), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(last.weight @ last.weight.T, 4.0 * torch.eye(4), rtol=1e-5, atol=1e-5)
    assert all(not layer.bias.any() for layer in mlp.linear_layers)
    mlp.init_weights([1.0, 0.5])
    torch.testing.assert_close(last.weight @ last.weight.T, 0.25 * torch.eye(4), rtol=1e-5, atol=1e-5)
    with pytest.raises(ConfigError, match="scales has 3 entries but the MLP has 2 Linear layers"):
        mlp.init_weights([1.0, 1.0, 1.0])


def test_rnn_forward_takes_rsl_rls_keyword_input():
    RslRNN = pytest.importorskip("rsl_rl.modules").RNN

    torch.manual_seed(0)
    theirs, ours = RslRNN(3, 5, 1, "gru"), RNN(3, 5, 1, "gru")
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(N, 3)
    for _ in range(2):  # the carried state too
        torch.testing.assert_close(ours(input=x), theirs(input=x).squeeze(0))


def test_discounted_variation_normalization_positional_order_is_shape_eps_gamma_until():
    norm = EmpiricalDiscountedVariationNormalization((), 0.5, 0.9, 7)
    assert (norm.emp_norm.eps, norm.gamma, norm.emp_norm.until) == (0.5, 0.9, 7)
