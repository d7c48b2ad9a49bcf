"""The state estimator of a model (``estimator_cfg``): its place in the forward pass, its loss in PPO, its export.

The estimator maps the model's latent to privileged target groups; its estimate enters the head detached, so only
the supervised loss ``loss_coef * MSE`` trains it, and PPO adds that loss by itself (``EstimatorLoss``).
"""

from __future__ import annotations

import onnxruntime as ort
import pytest
import torch
from tensordict import TensorDict

from rlcore.deployment import export_onnx
from rlcore.errors import ConfigError
from rlcore.models import CNNModel, MLPModel, RNNModel

GAUSSIAN = {"class_name": "GaussianDistribution", "init_std": 1.0}
EST = {"target_groups": ["vel"], "hidden_dims": [16]}


def _obs(n: int = 6) -> TensorDict:
    policy = torch.randn(n, 5) * 2.0 + 1.0
    return TensorDict({"policy": policy, "vel": policy[:, :3] * 0.5 - 1.0, "privileged": torch.randn(n, 2)},
                      batch_size=[n])


def _actor(obs: TensorDict, **est) -> MLPModel:
    return MLPModel(obs, {"actor": ["policy"]}, "actor", 2, hidden_dims=[16], obs_normalization=True,
                    distribution_cfg=GAUSSIAN, estimator_cfg={**EST, **est})


def _perturb(model: torch.nn.Module) -> None:
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.3)


# ============================================================================ the model
def test_forward_appends_the_estimate_to_the_latent_and_the_loss_is_the_mse():
    obs = _obs()
    model = _actor(obs)
    _perturb(model)
    model.obs_normalizer.update(_obs(50)["policy"])
    z = model.obs_normalizer(obs["policy"])
    estimate = model.estimator(z)
    assert estimate.shape == (6, 3) and model.mlp[0].in_features == 5 + 3
    expected = model.mlp(torch.cat([z, estimate], -1))[..., :2]  # the Gaussian's mean is the head's output
    assert torch.allclose(model(obs), expected, atol=1e-6)
    # without the estimate the head would see other inputs: the check above can fail
    assert not torch.allclose(model.mlp(torch.cat([z, torch.zeros_like(estimate)], -1)), model.mlp(
        torch.cat([z, estimate], -1)), atol=1e-3)
    assert torch.allclose(model.estimator_loss(obs), (estimate - obs["vel"]).square().mean(), atol=1e-6)


def test_the_head_input_is_detached_so_the_policy_loss_does_not_train_the_estimator():
    obs = _obs()
    model = _actor(obs)
    model(obs, stochastic_output=True)
    model.get_output_log_prob(torch.randn(6, 2)).sum().backward()
    assert all(p.grad is None or p.grad.abs().max() == 0 for p in model.estimator.parameters())
    assert any(p.grad is not None and p.grad.abs().max() > 0 for p in model.mlp.parameters())


@pytest.mark.parametrize("cfg, message", [
    ({"target_groups": ["speed"]}, "'speed' is not a 1D observation group of the environment; available groups: "
                                   "policy, vel, privileged"),
    ({"target_groups": ["policy"]}, "'policy' is already an input"),
    ({"target_groups": []}, "must name at least one observation group"),
    ({"target_groups": ["vel"], "hidden": [8]}, "unknown keys ['hidden']; valid: ['target_groups', 'hidden_dims'"),
])
def test_bad_estimator_configs_get_one_clear_line(cfg, message):
    with pytest.raises(ConfigError) as err:
        MLPModel(_obs(), {"actor": ["policy"]}, "actor", 2, estimator_cfg=cfg)
    assert message in str(err.value)


def test_a_recurrent_model_estimates_from_its_memory():
    obs = _obs()
    model = RNNModel(obs, {"actor": ["policy"]}, "actor", 2, hidden_dims=[16], rnn_hidden_dim=8,
                     distribution_cfg=GAUSSIAN, estimator_cfg=EST)
    _perturb(model)
    assert model.estimator.input_dim == 8  # the LSTM's output, not the raw observations
    with torch.no_grad():
        actions = model(obs)
        model.reset()
        memory = model.rnn(model.obs_normalizer(obs["policy"]))
        assert torch.allclose(actions, model.mlp(torch.cat([memory, model.estimator(memory)], -1))[..., :2], atol=1e-6)


@pytest.mark.parametrize("train_latent", [True, False])
def test_train_latent_decides_whether_the_estimator_loss_trains_the_memory(train_latent):
    obs = _obs()
    model = RNNModel(obs, {"actor": ["policy"]}, "actor", 2, hidden_dims=[16], rnn_hidden_dim=8,
                     distribution_cfg=GAUSSIAN, estimator_cfg={**EST, "train_latent": train_latent})
    _perturb(model)
    for estimate in (None, "cached"):  # computed by estimator_loss, or the forward pass's last_estimate
        model.zero_grad()
        model.reset()
        if estimate == "cached":
            model(obs)
        loss = model.estimator_loss(obs, model.last_estimate if estimate else None)
        loss.backward()
        memory_grad = max(float(p.grad.abs().max()) if p.grad is not None else 0.0 for p in model.rnn.parameters())
        assert (memory_grad > 0) == train_latent
        assert all(p.grad is not None and p.grad.abs().max() > 0 for p in model.estimator.parameters())


# ============================================================================ export
def test_onnx_and_jit_exports_carry_the_estimator(tmp_path):
    obs = _obs(7)
    model = _actor(obs)
    _perturb(model)
    model.obs_normalizer.update(_obs(50)["policy"])
    model.eval()
    with torch.no_grad():
        expected = model(obs)
        without = model.distribution.deterministic_output(model.mlp(torch.cat(
            [model.obs_normalizer(obs["policy"]), torch.zeros(7, 3)], -1)))
    assert (without - expected).abs().max() > 1e-2  # an export that dropped the estimate would be caught
    path = export_onnx(model.as_onnx(), tmp_path / "est.onnx")
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [i.name for i in sess.get_inputs()] == ["obs"]  # no extra input: the estimate is computed inside
    (actions,) = sess.run(None, {"obs": obs["policy"].numpy()})
    assert abs(actions - expected.numpy()).max() < 1e-5
    with torch.no_grad():
        assert (model.as_jit()(obs["policy"]) - expected).abs().max() < 1e-5


def test_a_cnn_model_with_an_estimator_exports_it_too(tmp_path):
    obs = _obs(4)
    obs["scan"] = torch.randn(4, 1, 6, 6)
    model = CNNModel(obs, {"actor": ["policy", "scan"]}, "actor", 2, hidden_dims=[16], distribution_cfg=GAUSSIAN,
                     cnn_cfg={"output_channels": [4], "kernel_size": 3}, estimator_cfg=EST)
    _perturb(model)
    model.eval()
    assert model.estimator.input_dim == model._latent_dim()  # the estimator reads the CNN features as well
    with torch.no_grad():
        expected = model(obs)
    path = export_onnx(model.as_onnx(), tmp_path / "cnn.onnx")
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (actions,) = sess.run(None, {"obs": obs["policy"].numpy(), "scan": obs["scan"].numpy()})
    assert abs(actions - expected.numpy()).max() < 1e-5


# ============================================================================ PPO
class _VelocityEnv:
    """FakeEnv whose ``vel`` group is a fixed linear function of ``policy`` (so it can be estimated)."""

    def __new__(cls, kit, num_envs: int = 16):
        env = kit.FakeEnv(num_envs=num_envs, shapes={"policy": (5,), "privileged": (2,), "vel": (3,)})
        make = env._random_obs

        def observe():
            obs = make()
            obs["vel"] = obs["policy"][:, :3] * 0.5 - 1.0
            return obs

        env._random_obs = observe
        env.obs = observe()
        return env


def _estimator_ppo(kit, coef: float = 1.0, **kwargs):
    env = _VelocityEnv(kit)
    obs = env.get_observations()
    ppo = kit.make_ppo(obs, 8, actor_kwargs={"estimator_cfg": {**EST, "loss_coef": coef}},
                       **{"num_learning_epochs": 1, "num_mini_batches": 1, "schedule": "fixed", **kwargs})
    return ppo, env


def test_ppo_attaches_the_estimator_loss_and_its_gradient_is_coef_times_the_mse(kit, monkeypatch):
    ppo, env = _estimator_ppo(kit, coef=0.4, max_grad_norm=1e9)
    assert [ext.name for ext in ppo.extensions] == ["estimator"]
    kit.collect(ppo, env, 8)
    params = list(ppo.actor.estimator.parameters())
    seen = {}

    def step(*args, **kwargs):
        seen["grads"] = [p.grad.detach().clone() for p in params]

    batches = []
    generator = ppo.storage.mini_batch_generator

    def record(*args, **kwargs):
        for batch in generator(*args, **kwargs):
            batches.append(batch)
            yield batch

    monkeypatch.setattr(ppo.optimizer, "step", step)
    monkeypatch.setattr(ppo.storage, "mini_batch_generator", record)
    losses = ppo.update()
    obs = batches[0].observations
    mse = ppo.actor.estimator_loss(obs)
    expected = torch.autograd.grad(0.4 * mse, params)
    for got, want in zip(seen["grads"], expected):
        assert torch.allclose(got, want, atol=1e-6)
    assert abs(losses["estimator"] - float(mse.detach())) < 1e-5  # logged: the MSE before the weight


def test_recurrent_ppo_reuses_the_estimate_and_matches_the_loss_on_the_valid_steps(kit, monkeypatch):
    """Trajectory batches: the loss is the MSE over valid (unpadded) steps; the estimate of PPO's forward pass, which
    the loss reuses, gives the gradient of a fresh computation from the stored hidden states."""
    env = _VelocityEnv(kit, num_envs=4)
    env.done_fn = kit.periodic_dones(4, [3, 0, 2, 5])
    ppo = kit.make_ppo(env.get_observations(), 8, actor_rnn="lstm", actor_kwargs={"estimator_cfg": EST},
                       num_learning_epochs=1, num_mini_batches=1, schedule="fixed", max_grad_norm=1e9)
    kit.collect(ppo, env, 8)
    stored_vel, stored_actions = ppo.storage.observations["vel"].clone(), ppo.storage.actions.clone()  # [T, N, ...]
    params = list(ppo.actor.estimator.parameters())
    seen, batches = {}, []
    generator = ppo.storage.recurrent_mini_batch_generator

    def record(*args, **kwargs):
        for batch in generator(*args, **kwargs):
            batches.append(batch)
            yield batch

    monkeypatch.setattr(ppo.optimizer, "step", lambda *a, **k: seen.update(grads=[p.grad.clone() for p in params]))
    monkeypatch.setattr(ppo.storage, "recurrent_mini_batch_generator", record)
    losses = ppo.update()
    batch = batches[0]
    assert batch.masks is not None and not bool(batch.masks.all())  # padding present
    fresh = ppo.actor.estimator_loss(batch.observations, None, batch.masks, batch.hidden_states[0])
    for got, want in zip(seen["grads"], torch.autograd.grad(fresh, params)):
        assert torch.allclose(got, want, atol=1e-6)
    # the same value from the stored per-step targets [T, N, 3] (the batch holds the envs in a shuffled order,
    # recovered from the actions), so no padded step enters the mean
    order = [int((stored_actions - batch.actions[:, j:j + 1]).abs().sum((0, 2)).argmin()) for j in range(4)]
    with torch.no_grad():
        latent = ppo.actor.get_latent(batch.observations, batch.masks, batch.hidden_states[0])
        want = (ppo.actor.estimator(latent) - stored_vel[:, order]).square().mean()
    assert sorted(order) == [0, 1, 2, 3]
    assert abs(float(want) - float(fresh.detach())) < 1e-6 and abs(losses["estimator"] - float(want)) < 1e-5


@pytest.mark.slow
def test_ppo_updates_teach_the_estimator(kit):
    ppo, env = _estimator_ppo(kit, learning_rate=3e-3, num_learning_epochs=5, num_mini_batches=2)
    first = None
    for _ in range(40):
        kit.collect(ppo, env, 8)
        losses = ppo.update()
        first = losses["estimator"] if first is None else first
    obs = env.get_observations()
    with torch.no_grad():
        final = float(ppo.actor.estimator_loss(obs))
    assert first > 0.5 and final < 0.1 * first, (first, final)


def test_a_teacher_with_an_estimator_labels_with_its_estimate(kit):
    obs = _obs()
    groups = {"student": ["policy"], "teacher": ["policy"]}
    alg = kit.make_distillation(obs, 4, groups=groups, teacher_kwargs={"estimator_cfg": EST})
    _perturb(alg.teacher)
    with torch.no_grad():
        z = alg.teacher.obs_normalizer(obs["policy"])
        want = alg.teacher.mlp(torch.cat([z, alg.teacher.estimator(z)], -1))
        assert torch.allclose(alg.teacher(obs), want, atol=1e-6)


def test_the_estimator_gradient_is_clipped_apart_from_the_policy(kit, monkeypatch):
    """With a tiny bound each of actor head, critic and estimator ends at exactly that norm: the estimator's large
    supervised gradient does not shrink the policy's step."""
    bound = 1e-3
    ppo, env = _estimator_ppo(kit, coef=100.0, max_grad_norm=bound)
    kit.collect(ppo, env, 8)
    est = list(ppo.actor.estimator.parameters())
    groups = {"actor": [p for p in ppo.actor.parameters() if all(p is not q for q in est)], "estimator": est,
              "critic": list(ppo.critic.parameters())}
    norms = {}

    def step(*args, **kwargs):
        for name, params in groups.items():
            norms[name] = float(torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in params])))

    monkeypatch.setattr(ppo.optimizer, "step", step)
    ppo.update()
    for name, norm in norms.items():
        assert abs(norm - bound) < 1e-6, (name, norm)


def test_a_recurrent_model_exports_its_estimator_with_its_state(tmp_path):
    obs = _obs(3)
    model = RNNModel(obs, {"actor": ["policy"]}, "actor", 2, hidden_dims=[16], rnn_hidden_dim=8, rnn_type="lstm",
                     distribution_cfg=GAUSSIAN, estimator_cfg=EST)
    _perturb(model)
    model.eval()
    steps = [_obs(3) for _ in range(4)]
    with torch.no_grad():
        expected = [model(o) for o in steps]
    path = export_onnx(model.as_onnx(), tmp_path / "lstm.onnx")
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    h = c = torch.zeros(1, 3, 8).numpy()
    for o, want in zip(steps, expected):
        actions, h, c = sess.run(None, {"obs": o["policy"].numpy(), "h_in": h, "c_in": c})
        assert abs(actions - want.numpy()).max() < 1e-5
