"""The Go2 observation terms are declared once (rlcore_tasks/go2/observations.py): the env's observation vectors and the
deployment metadata's ``observation_groups`` are both generated from that declaration, so they cannot drift.

The env's columns are checked against values computed here by hand from the env's state tensors with the
metadata's ``start:stop``, ``offset`` and ``scale``; a change of one term in the declaration must show in both."""

from __future__ import annotations

import dataclasses

import pytest
import torch

pytest.importorskip("mujoco")

from rlcore.deployment import read_onnx_interface
from rlcore_tasks.go2 import Go2Env, observations
from rlcore_tasks.go2.config import make_config
from rlcore_tasks.go2.randomization import PHYSICAL_TERMS

# Noise amplitudes 0 (no per-step draw) but add_noise on: the per-episode sensor biases are in the observations,
# and a term whose bias were dropped or doubled would be caught.
NO_NOISE = {"noise_ang_vel": 0.0, "noise_gravity": 0.0, "noise_dof_pos": 0.0, "noise_dof_vel": 0.0,
            "noise_height": 0.0}
KW = dict(num_envs=5, seed=3, sim={"threads": 1}, domain_rand={"num_variants": 3, "curriculum_steps": 0},
          obs={**NO_NOISE, "history_length": 3})


@pytest.fixture(scope="module")
def stepped():
    """An env after a few steps of random actions: its observations, its metadata and the policy frames seen."""
    env = Go2Env(**KW)
    gen = torch.Generator().manual_seed(0)
    frames = [env.get_observations()["policy"].clone()]
    for _ in range(4):
        obs, *_ = env.step(torch.randn(5, 12, generator=gen))
        frames.append(obs["policy"].clone())
    yield env, obs, env.deployment_interface()["observation_groups"], frames
    env.close()


def _by_hand(env: Go2Env) -> dict[str, torch.Tensor]:
    """Every policy and privileged term's quantity (plus its sensor bias) read from the env's state, by name."""
    variant = env.variant_params[env.sim.env_variant]
    q = {"base_ang_vel": env.base_ang_vel + env.imu_bias[:, :3], "projected_gravity": env.projected_gravity
         + env.imu_bias[:, 3:], "velocity_commands": env.commands, "joint_pos": env.dof_pos + env.joint_pos_bias,
         "joint_vel": env.dof_vel, "last_actions": env.actions, "base_lin_vel": env.base_lin_vel,
         "ground_friction": variant[:, 0:1], "added_base_mass": variant[:, 1:2], "motor_strength": variant[:, 2:3],
         "foot_forces": env.foot_forces, "push_velocity": env.push_vel,
         "ang_vel_bias": env.imu_bias[:, :3], "gravity_bias": env.imu_bias[:, 3:], "joint_pos_bias": env.joint_pos_bias}
    column = 3
    for name, size, *_ in PHYSICAL_TERMS:
        q[name] = variant[:, column:column + size]
        column += size
    return q


def test_every_column_is_the_metadata_term_of_the_env_state(stepped):
    """Column by column, ``obs[group][:, start:stop] = clip((quantity - offset) * scale)`` with the metadata's
    values; the terms tile each group's vector exactly and the widths match the observations."""
    env, obs, meta, _ = stepped
    quantity = _by_hand(env)
    assert (env.imu_bias != 0).any() and (env.joint_pos_bias != 0).any()  # the biases are really in play
    for group in ("policy", "privileged", "base_lin_vel"):
        g = meta[group]
        assert obs[group].shape == (5, g["size"])
        assert [t["start"] for t in g["terms"]] == [0] + [t["stop"] for t in g["terms"][:-1]]
        assert g["terms"][-1]["stop"] == g["size"]
        for t in g["terms"]:
            x = quantity[t["name"]]
            x = (x - torch.tensor(t.get("offset", 0.0))) * torch.tensor(t["scale"])
            if g["clip"] is not None:
                x = x.clamp(-g["clip"], g["clip"])
            assert torch.allclose(obs[group][:, t["start"]:t["stop"]], x, rtol=1e-6, atol=1e-7), (group, t["name"])
    assert [t["name"] for t in meta["policy"]["terms"]] == ["base_ang_vel", "projected_gravity", "velocity_commands",
                                                            "joint_pos", "joint_vel", "last_actions"]
    assert meta["policy"]["size"] == Go2Env.POLICY_SIZE == 45 and meta["privileged"]["size"] == 47


def test_the_history_metadata_names_the_frames_the_env_returns(stepped):
    """``policy_history``: term ``joint_vel@t-k`` sits at the columns the metadata gives and holds the
    ``joint_vel`` term of the policy frame returned k steps ago."""
    env, obs, meta, frames = stepped
    h, policy = meta["policy_history"], {t["name"]: t for t in meta["policy"]["terms"]}
    assert h["frames"] == 3 and obs["policy_history"].shape == (5, h["size"]) and h["size"] == 3 * 45
    assert len(h["terms"]) == 3 * len(policy)
    for t in h["terms"]:
        name, k = t["name"].split("@t-")
        p = policy[name]
        expected = frames[-1 - int(k)][:, p["start"]:p["stop"]]
        assert torch.equal(obs["policy_history"][:, t["start"]:t["stop"]], expected), t["name"]


def test_the_height_scan_metadata_is_the_grid_the_env_returns():
    env = Go2Env(num_envs=2, seed=0, sim={"threads": 1}, terrain={"type": "rough"},
                 domain_rand={"num_variants": 1}, obs={"add_noise": False})
    meta = env.deployment_interface()["observation_groups"]["height_scan"]
    scan = env.get_observations()["height_scan"]
    assert list(scan.shape[1:]) == meta["shape"] and meta["clip"] is None
    assert meta["training_perturbations"]["noise"] == 0.0
    terrain = env.sim.heights(env.height_scan_points())
    target = env.cfg_task.rewards.base_height_target
    assert f"- {target}, -1, 1) [m]" in meta["quantity"]
    by_hand = (env.base_pos[:, 2, None, None] - terrain - target).clamp(-1.0, 1.0) * meta["scale"]
    assert torch.equal(scan[:, 0], by_hand)
    env.close()


def _changed(term_name: str, **change):
    """``observations.observation_groups`` with one term changed (in every group that has it)."""
    original = observations.observation_groups

    def groups(cfg):
        out = original(cfg)
        return {k: dataclasses.replace(g, terms=tuple(dataclasses.replace(t, **change) if t.name == term_name else t
                                                      for t in g.terms)) for k, g in out.items()}
    return groups


@pytest.mark.parametrize(("group", "term", "factor"), [("policy", "joint_vel", 3.0), ("privileged", "foot_forces", 0.5),
                                                       ("privileged", "latency", 2.0)])
def test_a_changed_scale_in_the_declaration_changes_observations_and_metadata(monkeypatch, group, term, factor):
    """The declaration is the one source: scaling one term there scales that term's columns in the env's
    observations, its scale in the metadata (and the history's copies), and nothing else."""
    env = Go2Env(**KW)
    env.step(torch.full((5, 12), 0.3))  # foot forces, actions and the rest away from zero
    before_obs, before_meta = env.get_observations(), env.deployment_interface()["observation_groups"]
    declared = next(t for t in observations.observation_groups(env.cfg_task)[group].terms if t.name == term)
    monkeypatch.setattr(observations, "observation_groups", _changed(term, scale=declared.scale * factor))
    after_obs, after_meta = env.get_observations(), env.deployment_interface()["observation_groups"]
    sl = next(slice(t["start"], t["stop"]) for t in before_meta[group]["terms"] if t["name"] == term)
    assert before_obs[group][:, sl].abs().max() > 0
    assert torch.allclose(after_obs[group][:, sl], before_obs[group][:, sl] * factor, rtol=1e-6)
    rest = torch.ones(before_obs[group].shape[1], dtype=torch.bool)
    rest[sl] = False
    assert torch.equal(after_obs[group][:, rest], before_obs[group][:, rest])
    for g in before_meta:
        for t_before, t_after in zip(before_meta[g].get("terms", []), after_meta[g].get("terms", [])):
            changed = t_before["name"].split("@")[0] == term
            assert t_after["scale"] == (pytest.approx(t_before["scale"] * factor) if changed else t_before["scale"])
    env.close()


def test_a_changed_noise_in_the_declaration_changes_observations_and_metadata(monkeypatch):
    env = Go2Env(**KW)
    monkeypatch.setattr(observations, "observation_groups", _changed("joint_vel", noise=0.5))
    meta = {t["name"]: t for t in env.deployment_interface()["observation_groups"]["policy"]["terms"]}
    assert meta["joint_vel"]["training_perturbations"]["noise"] == pytest.approx(0.5 * meta["joint_vel"]["scale"])
    assert meta["joint_pos"]["training_perturbations"]["noise"] == 0.0
    a, b = env.get_observations()["policy"], env.get_observations()["policy"]  # two draws of the noise
    cols = slice(meta["joint_vel"]["start"], meta["joint_vel"]["stop"])
    diff = (a[:, cols] - b[:, cols]).abs()
    assert 0 < diff.max() <= 2 * meta["joint_vel"]["training_perturbations"]["noise"] + 1e-6
    others = torch.ones(45, dtype=torch.bool)
    others[cols] = False
    assert torch.equal(a[:, others], b[:, others])
    env.close()


def test_every_term_states_its_unit():
    """Every declared unit is written into the metadata's quantity text, and no placeholder is left over."""
    groups = observations.observation_groups(make_config({}))
    units = 0
    for g in groups.values():
        for t in g.terms:
            text = t.describe()
            assert t.quantity and "{" not in text and "}" not in text, t.name
            for unit in (t.unit,) if isinstance(t.unit, str) else t.unit:
                if unit:
                    units += 1
                    assert f"[{unit}]" in text, (t.name, unit, text)
    assert units >= 15


@pytest.mark.parametrize("name", ["go2_flat", "go2_flat_student"])
def test_the_shipped_policies_layout_is_what_the_declaration_generates(name):
    """The metadata the task generates today for the shipped files' configuration (conf/task/go2.yaml: 5 history
    frames) describes the groups their graphs read as the files do: every term's columns, scale, offset and training
    perturbations (a version-1 file is read as version 2; a version-2 file also matches units and history fields)."""
    from rlcore_tasks.go2.pretrained import PRETRAINED

    meta = read_onnx_interface(PRETRAINED[name].path)
    env = Go2Env(num_envs=1, seed=0, sim={"threads": 1}, domain_rand={"num_variants": 1},
                 obs={"history_length": 5})
    generated = env.deployment_interface()["observation_groups"]
    env.close()
    read = meta["obs_groups"]
    fields = ("name", "start", "stop", "scale", "offset", "training_perturbations")
    if "upgraded_from" not in meta:  # a version-2 file: the whole description, and nothing the graph does not read
        assert set(meta["observation_groups"]) == set(read)
        assert {g: generated[g] for g in read} == meta["observation_groups"]
    for group in read:
        ours, theirs = generated[group], meta["observation_groups"][group]
        assert [{k: t.get(k) for k in fields} for t in ours["terms"]] == [
            {k: t.get(k) for k in fields} for t in theirs["terms"]]
        assert (ours["size"], ours["clip"], ours.get("lags")) == (theirs["size"], theirs["clip"], theirs.get("lags"))


def test_the_mirror_tables_keep_every_term_in_its_columns():
    """rlcore_tasks/go2/symmetry.py's column permutations (written by hand) move each declared term's columns among
    themselves only, so the mirror stays aligned with the declared layout."""
    from rlcore_tasks.go2 import symmetry

    groups = observations.observation_groups(make_config({}))
    for group, perm in (("policy", symmetry._POLICY_PERM), ("privileged", symmetry._PRIV_PERM)):
        assert len(perm) == groups[group].size
        for name, cols in groups[group].slices().items():
            assert sorted(perm[cols]) == list(range(cols.start, cols.stop)), (group, name)
