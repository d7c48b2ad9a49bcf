"""rlcore is a drop-in for rsl_rl 5.5.1: its public API, walked name by name, and its meaning, checked against
the real package (skipped when rsl-rl-lib is not installed; CI installs it with the ``bench`` extra).

The signature rule is in ``api_walk.py`` (module docstring). Two explicit lists hold what is not compatible:

- ``DELIBERATE``: differences rlcore keeps on purpose (each with its reason);
- ``KNOWN_GAPS``: incompatibilities not fixed yet, in files owned elsewhere (each with what to change).

Both are strict: an entry that no longer matches a real difference fails the test, so the lists stay honest.
Print the coverage figure with ``python tests/compat/api_walk.py -v``.
"""

from __future__ import annotations

import copy
import os
import types

import pytest
import torch
from tensordict import TensorDict

rsl_rl = pytest.importorskip("rsl_rl")

from api_walk import walk  # noqa: E402  (after the skip: it imports rsl_rl)

from rlcore.env.task import make_task  # noqa: E402

# path -> the problems tolerated there (substrings of the walk's messages; "missing": the whole name).
DELIBERATE: dict[str, list[str]] = {
    # rlcore ships TensorBoard and wandb writers; Neptune users plug their own LogWriter subclass in through
    # cfg["logger"] = {"class_name": ...} (a third-party service client is not a dependency of rlcore).
    "utils.NeptuneLogWriter*": ["missing"],
    # rsl_rl's RND.forward raises NotImplementedError for every call; rlcore's returns the prediction error.
    "extensions.RandomNetworkDistillation.forward": ["missing *args", "missing **kwargs", "extra required"],
    # rlcore's default intrinsic weight (README, "Differences from rsl_rl"); rsl_rl's is 0.
    "extensions.RandomNetworkDistillation.__init__": ["'weight' default 0.5 != rsl_rl's 0.0"],
    # rsl_rl's Distillation swallows unknown settings in **kwargs; rlcore refuses them by name (TypeError).
    "algorithms.Distillation.__init__": ["missing **kwargs"],
    # rlcore's CNN pads "same" (d * (k - 1) // 2 zeros per side) by default, rsl_rl's not at all ("none"): with
    # rsl_rl's default, rlcore's own CNN configs (conf/model/cnn.yaml, the Go2 rough height scan) would change
    # architecture and their checkpoints would no longer load; padding="none" (or rsl_rl's other modes) gives
    # rsl_rl's network exactly (tests/compat/test_rsl_rl_calls.py).
    "modules.CNN.__init__": ["'padding' default 'same' != rsl_rl's 'none'"],
}

KNOWN_GAPS: dict[str, list[str]] = {}


def _tolerated(lists: list[dict[str, list[str]]], path: str) -> list[str]:
    out = []
    for table in lists:
        for key, allowed in table.items():
            key = key.split("#")[0]
            if key == path or (key.endswith("*") and path.startswith(key[:-1])):
                out += allowed
    return out


# ---------------------------------------------------------------------------- the walk
def test_every_public_name_of_rsl_rl_exists_in_rlcore_with_a_compatible_signature():
    items = walk()
    assert len(items) > 200  # the walk reached rsl_rl's packages
    problems = {it.path: it.why.split("; ") for it in items if not it.ok}
    unexplained = {}
    for path, whys in problems.items():
        allowed = _tolerated([DELIBERATE, KNOWN_GAPS], path)
        left = [w for w in whys if not any(a in w for a in allowed)]
        if left:
            unexplained[path] = left
    assert not unexplained, f"incompatible with rsl_rl 5.5.1: {unexplained}"
    # Every entry of the lists still describes a real difference (fixed ones must be removed).
    for table in (DELIBERATE, KNOWN_GAPS):
        for key, allowed in table.items():
            path = key.split("#")[0]
            hits = [w for p, whys in problems.items() if p == path or (path.endswith("*") and p.startswith(path[:-1]))
                    for w in whys]
            stale = [a for a in allowed if not any(a in w for w in hits)]
            assert not stale, f"{key}: {stale} no longer differs from rsl_rl; remove it from the list"


# ---------------------------------------------------------------------------- runners built by both libraries
NUM_ENVS = 16
GAUSSIAN = {"class_name": "GaussianDistribution", "init_std": 1.0}


def ppo_cfg(**runner_keys) -> dict:
    cfg = {
        "seed": 1, "num_steps_per_env": 8, "save_interval": 50, "logger": "tensorboard",
        "obs_groups": {"actor": ["policy"], "critic": ["critic"]},
        "actor": {"class_name": "MLPModel", "hidden_dims": [16], "obs_normalization": True,
                  "distribution_cfg": dict(GAUSSIAN)},
        "critic": {"class_name": "MLPModel", "hidden_dims": [16], "obs_normalization": True},
        "algorithm": {"class_name": "PPO", "num_learning_epochs": 1, "num_mini_batches": 2},
    }
    cfg.update(runner_keys)
    return cfg


def distillation_cfg() -> dict:
    return {
        "num_steps_per_env": 8, "save_interval": 50, "obs_groups": {"student": ["policy"], "teacher": ["policy"]},
        "student": {"class_name": "MLPModel", "hidden_dims": [16], "distribution_cfg": dict(GAUSSIAN)},
        "teacher": {"class_name": "MLPModel", "hidden_dims": [16], "distribution_cfg": dict(GAUSSIAN)},
        "algorithm": {"class_name": "Distillation", "gradient_length": 4},
    }


def both_runners(kind: str, cfg: dict, log_dirs: tuple[str | None, str | None] = (None, None)):
    from rlcore import runners as rl

    ref_cls = getattr(rsl_rl.runners, kind)
    new_cls = getattr(rl, kind)
    ref = ref_cls(make_task("pendulum", num_envs=NUM_ENVS, seed=0), copy.deepcopy(cfg), log_dirs[0], "cpu")
    new = new_cls(make_task("pendulum", num_envs=NUM_ENVS, seed=0), copy.deepcopy(cfg), log_dirs[1], "cpu")
    return ref, new


# Public instance attributes of rsl_rl objects not yet on rlcore's: {part: {name, ...}} (none left).
ATTRIBUTE_GAPS: dict[str, set[str]] = {}


@pytest.mark.parametrize("kind, cfg", [("OnPolicyRunner", ppo_cfg()), ("DistillationRunner", distillation_cfg())],
                         ids=["ppo", "distillation"])
def test_instance_attributes_a_runner_subclass_reads_exist(kind, cfg, tmp_path):
    """Every public instance attribute of rsl_rl's runner, its logger, algorithm, models and storage exists on
    rlcore's, plus the ones rsl_rl <= 5.4 had and framework subclasses still read (log_dir, logger_type, ...)."""
    ref, new = both_runners(kind, cfg, (None, str(tmp_path)))
    parts = ["", "logger", "alg", "alg.storage"] + (["alg.actor", "alg.critic"] if kind == "OnPolicyRunner"
                                                    else ["alg.student", "alg.teacher"])
    missing = {}
    for part in parts:
        r, n = ref, new
        for name in filter(None, part.split(".")):
            r, n = getattr(r, name), getattr(n, name)
        gaps = {k for k in vars(r) if not k.startswith("_") and not hasattr(n, k)}
        gaps -= ATTRIBUTE_GAPS.get(part, set()) if kind == "OnPolicyRunner" else set()
        if gaps:
            missing[part or "runner"] = sorted(gaps)
    assert not missing, f"attributes of rsl_rl's objects missing in rlcore: {missing}"

    # Values with rsl_rl's meaning.
    assert new.env is not None and new.device == "cpu" and new.cfg["num_steps_per_env"] == 8
    assert (new.is_distributed, new.gpu_world_size, new.gpu_global_rank, new.gpu_local_rank) == (False, 1, 0, 0)
    assert new.current_learning_iteration == ref.current_learning_iteration == 0
    assert new.log_dir == new.logger.log_dir == str(tmp_path)
    assert (new.num_steps_per_env, new.save_interval) == (8, 50)
    assert new.logger.writer is None and ref.logger.writer is None  # created when training starts
    assert new.logger.logger_type == "tensorboard"  # rsl_rl <= 5.4's attribute
    assert type(ref.alg).__name__ == type(new.alg).__name__
    assert new.get_inference_policy() is new.alg.get_policy()  # the model itself, in eval mode, as in rsl_rl
    assert not new.alg.get_policy().training


def test_iteration_numbers_and_checkpoint_names_mean_what_they_mean_in_rsl_rl(tmp_path):
    """Both libraries train 3 iterations with save_interval=2: same current_learning_iteration, same checkpoint
    files with the same "iter", and a load restores the same number."""
    cfg = ppo_cfg(save_interval=2)
    ref, new = both_runners("OnPolicyRunner", cfg, (str(tmp_path / "ref"), str(tmp_path / "new")))
    ref.learn(3)
    new.learn(3)
    assert ref.current_learning_iteration == new.current_learning_iteration == 2

    def checkpoints(d):
        return sorted(n for n in os.listdir(d) if n.endswith(".pt"))

    assert checkpoints(tmp_path / "ref") == checkpoints(tmp_path / "new") == ["model_0.pt", "model_2.pt"]
    for name in ("model_0.pt", "model_2.pt"):
        ref_iter = torch.load(tmp_path / "ref" / name, weights_only=False)["iter"]
        assert ref_iter == torch.load(tmp_path / "new" / name, weights_only=True)["iter"]
    assert new.logger.writer is not None and ref.logger.writer is not None

    # rlcore reads rsl_rl's checkpoint file (its keys) and restores the same iteration number.
    _, reader = both_runners("OnPolicyRunner", cfg)
    ref_ckpt = torch.load(tmp_path / "ref" / "model_2.pt", weights_only=False)
    assert reader.alg.load(ref_ckpt, None, True) is True
    for key, value in ref.alg.actor.state_dict().items():
        assert torch.equal(reader.alg.actor.state_dict()[key], value), key


# ---------------------------------------------------------------------------- as_onnx() of every model
def _models(lib, obs):
    import importlib

    models = importlib.import_module(f"{lib.__name__}.models")  # not an attribute until someone imports it
    groups = {"actor": ["policy"], "image": ["policy", "image"]}
    cnn_cfg = {"output_channels": [4], "kernel_size": [3]}
    return {
        "mlp": models.MLPModel(obs, groups, "actor", 2, [16], obs_normalization=True, distribution_cfg=GAUSSIAN),
        "gru": models.RNNModel(obs, groups, "actor", 2, [16], distribution_cfg=GAUSSIAN, rnn_type="gru",
                               rnn_hidden_dim=8),
        "lstm": models.RNNModel(obs, groups, "actor", 2, [16], rnn_type="lstm", rnn_hidden_dim=8, rnn_num_layers=2),
        "cnn": models.CNNModel(obs, groups, "image", 2, [16], distribution_cfg=GAUSSIAN, cnn_cfg=cnn_cfg),
    }


@pytest.mark.slow
def test_as_onnx_modules_have_rsl_rls_export_interface(tmp_path):
    """``m = model.as_onnx(verbose=...)`` then rsl_rl's own export call works on rlcore's module: same names, same
    dummy-input shapes, the public attributes of rsl_rl's wrapper; onnxruntime gives the torch outputs."""
    ort = pytest.importorskip("onnxruntime")
    import rlcore.models

    torch.manual_seed(0)
    obs = TensorDict({"policy": torch.randn(3, 5), "image": torch.randn(3, 1, 6, 7)}, batch_size=[3])
    ref_models, new_models = _models(rsl_rl, obs), _models(rlcore, obs)
    module_attrs = set(dir(torch.nn.Module()))
    for name, ref_model in ref_models.items():
        ref, new = ref_model.as_onnx(verbose=False), new_models[name].as_onnx(verbose=False)
        assert new.input_names == ref.input_names and new.output_names == ref.output_names, name
        assert [t.shape for t in new.get_dummy_inputs()] == [t.shape for t in ref.get_dummy_inputs()], name
        public = {a for a in set(dir(ref)) - module_attrs if not a.startswith("_")}
        assert not {a for a in public if not hasattr(new, a)}, name
        for attr in ("is_recurrent", "input_size", "hidden_size", "num_layers", "rnn_type", "obs_groups_2d",
                     "obs_dim_1d", "obs_channels_2d", "verbose"):
            if hasattr(ref, attr):
                assert getattr(new, attr) == getattr(ref, attr), (name, attr)
        # rsl_rl's OnPolicyRunner.export_policy_to_onnx call, verbatim in its arguments.
        new.to("cpu")
        new.eval()
        path = str(tmp_path / f"{name}.onnx")
        torch.onnx.export(new, new.get_dummy_inputs(), path, export_params=True, opset_version=18, verbose=False,
                          input_names=new.input_names, output_names=new.output_names)
        inputs = [torch.randn_like(t) for t in new.get_dummy_inputs()]
        expected = new(*inputs)
        expected = [t for t in (expected if isinstance(expected, tuple) else (expected,)) if t is not None]
        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        got = session.run(None, {n: t.numpy() for n, t in zip(new.input_names, inputs)})
        assert len(got) == len(expected), name
        for g, e in zip(got, expected):
            torch.testing.assert_close(torch.from_numpy(g), e.detach(), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------- rsl_rl.utils, same results
def test_trajectory_helpers_give_rsl_rls_results():
    from rsl_rl.utils import split_and_pad_trajectories as ref_split
    from rsl_rl.utils import unpad_trajectories as ref_unpad

    from rlcore.utils import split_and_pad_trajectories, unpad_trajectories

    torch.manual_seed(0)
    x = torch.randn(6, 3, 2)
    dones = torch.zeros(6, 3, 1)
    dones[1, 0] = dones[3, 1] = dones[4, 1] = dones[2, 2] = 1
    padded, masks = split_and_pad_trajectories(x, dones)
    ref_padded, ref_masks = ref_split(x, dones)
    assert torch.equal(masks, ref_masks) and torch.equal(padded, ref_padded)
    assert torch.equal(unpad_trajectories(trajectories=padded, masks=masks), ref_unpad(ref_padded, ref_masks))
    td = TensorDict({"a": x, "b": x[..., :1] * 2}, batch_size=[6, 3])
    td_padded, td_masks = split_and_pad_trajectories(td, dones)
    ref_td, _ = ref_split(td, dones)
    assert all(torch.equal(td_padded[k], ref_td[k]) for k in ("a", "b")) and torch.equal(td_masks, ref_masks)


def test_resolvers_and_helpers_give_rsl_rls_results():
    import rsl_rl.utils as ref

    import rlcore.utils as new
    from rlcore.algorithms import PPO
    from rlcore.modules import GaussianDistribution

    assert new.get_param([3, 5], 1) == ref.get_param([3, 5], 1) == 5 and new.get_param(7, 2) == ref.get_param(7, 2)
    for name in ("adam", "AdamW", "sgd", "rmsprop"):
        assert new.resolve_optimizer(name) is ref.resolve_optimizer(name)
    for name in ("elu", "selu", "relu", "crelu", "lrelu", "tanh", "sigmoid", "softplus", "gelu", "swish", "mish",
                 "identity"):
        assert type(new.resolve_nn_activation(name)) is type(ref.resolve_nn_activation(name)), name
    model = torch.nn.Linear(2, 2)
    assert new.compile_model(model) is model and ref.compile_model(model) is model
    with pytest.raises(ValueError, match="reduce-overhead"):
        new.compile_model(model, "reduce-overhead")
    assert new.resolve_callable(PPO) is PPO
    assert new.resolve_callable("rlcore.algorithms:PPO") is PPO and new.resolve_callable("rlcore.algorithms.PPO") is PPO
    assert new.resolve_callable("PPO") is PPO
    assert new.resolve_callable("GaussianDistribution") is GaussianDistribution  # a simple name, searched
    assert new.resolve_callable("torch.nn:Linear") is ref.resolve_callable("torch.nn:Linear") is torch.nn.Linear
    cls, kwargs = new.resolve_class({"class_name": "PPO", "gamma": 0.9})
    assert (cls, kwargs) == (PPO, {"gamma": 0.9})
    obs = TensorDict({"policy": torch.zeros(2, 3), "critic": torch.zeros(2, 4)}, batch_size=[2])
    for given in ({"actor": ["policy"]}, {}, {"actor": ["policy"], "critic": ["policy", "critic"]}):
        expected = ref.resolve_obs_groups(obs, copy.deepcopy(given), ["actor", "critic"])
        assert new.resolve_obs_groups(obs, copy.deepcopy(given), default_sets=["actor", "critic"]) == expected
    bad = TensorDict({"policy": torch.tensor([[0.0, float("nan")]])}, batch_size=[1])
    for lib in (new, ref):
        with pytest.raises(ValueError, match="'policy'"):
            lib.check_nan(bad, torch.zeros(1), torch.zeros(1))
    new.check_nan(obs, torch.zeros(2), torch.zeros(2))  # finite: no error
    with pytest.raises(ValueError, match="world_size=2"):
        new.reduce_gradients_in_buckets(model.parameters(), 2, 25.0)


# ---------------------------------------------------------------------------- Symmetry's mini-batch interface
def _mirror(env=None, obs=None, actions=None):
    sign_obs, sign_act = torch.tensor([1.0, -1.0, 1.0]), torch.tensor([1.0, -1.0])
    obs_aug = None if obs is None else TensorDict(
        {"policy": torch.cat([obs["policy"], obs["policy"] * sign_obs])}, batch_size=[2 * obs.batch_size[0]])
    return obs_aug, None if actions is None else torch.cat([actions, actions * sign_act])


def _batch(b: int = 5) -> types.SimpleNamespace:
    g = torch.Generator().manual_seed(1)
    return types.SimpleNamespace(
        observations=TensorDict({"policy": torch.randn(b, 3, generator=g)}, batch_size=[b]),
        actions=torch.randn(b, 2, generator=g), old_actions_log_prob=torch.randn(b, 1, generator=g),
        values=torch.randn(b, 1, generator=g), advantages=torch.randn(b, 1, generator=g),
        returns=torch.randn(b, 1, generator=g))


@pytest.mark.parametrize("augment, mirror_loss", [(True, True), (False, True), (True, False), (False, False)])
def test_symmetry_augment_batch_and_compute_loss_match_rsl_rl(augment, mirror_loss):
    from rsl_rl.extensions import Symmetry as RefSymmetry

    from rlcore.extensions import Symmetry
    from rlcore.models import MLPModel

    torch.manual_seed(0)
    actor = MLPModel(_batch().observations, {"actor": ["policy"]}, "actor", 2, [8], distribution_cfg=GAUSSIAN)
    flags = {"use_data_augmentation": augment, "use_mirror_loss": mirror_loss, "mirror_loss_coeff": 0.5}
    ref, new = RefSymmetry(None, _mirror, **flags), Symmetry(None, _mirror, **flags)
    ref_batch, new_batch = _batch(), _batch()
    ref.augment_batch(ref_batch, 5)
    new.augment_batch(new_batch, 5)
    for field in ("actions", "old_actions_log_prob", "values", "advantages", "returns"):
        assert torch.equal(getattr(new_batch, field), getattr(ref_batch, field)), field
    assert torch.equal(new_batch.observations["policy"], ref_batch.observations["policy"])
    ref_loss = ref.compute_loss(actor, ref_batch, 5)
    new_loss = new.compute_loss(actor, new_batch, 5)
    torch.testing.assert_close(new_loss, ref_loss)
    assert new_loss.requires_grad == ref_loss.requires_grad == mirror_loss
    assert new_loss.item() > 1e-6  # an untrained actor is not symmetric: the comparison means something
    assert new_batch.observations.batch_size == ref_batch.observations.batch_size == torch.Size([10])


def test_resolve_symmetry_config_hands_over_the_env():
    from rsl_rl.extensions import resolve_symmetry_config as ref

    from rlcore.extensions import resolve_symmetry_config

    env = object()
    given = {"symmetry_cfg": {"use_mirror_loss": True}}
    assert resolve_symmetry_config(copy.deepcopy(given), env) == ref(copy.deepcopy(given), env)
    assert resolve_symmetry_config({"symmetry_cfg": None}, env) == ref({"symmetry_cfg": None}, env)
    assert given["symmetry_cfg"] == {"use_mirror_loss": True}
