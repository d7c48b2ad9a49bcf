"""The Go2 model variants (rlcore_tasks/go2/variants.py) and the ONNX-only robustness tool (rlcore/robustness.py).

- every variant of the grid changes exactly the compiled-model arrays it names, to the values written here;
- latency delays the applied PD target by exactly k physics steps (the ctrl MuJoCo receives, and the physics);
- physics failures (non-finite state, impossible speeds) are flagged per env;
- the tool, fed tiny ONNX policies (constant outputs) with a Go2 interface in their metadata, counts a policy
  that falls and measures a standing policy's error as the command speed; it refuses files without metadata;
- a step from rest holds the command at zero until its step, then the command, and measures after the step;
- reached/commanded ratios, rise times and the yaw summary equal hand-computed values.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

pytest.importorskip("mujoco")

import mujoco

from rlcore.config.cli import UserError
from rlcore.deployment import policy_metadata, read_onnx_interface, write_onnx_metadata
from rlcore.models import MLPModel
from rlcore.robustness import (
    along_command,
    evaluate,
    main,
    not_followed,
    probe_command,
    reached_ratios,
    rise_time,
    step_summary,
    yaw_summary,
)
from rlcore_tasks.go2 import Go2Env
from rlcore_tasks.go2.config import make_config, no_randomization
from rlcore_tasks.go2.sim import Go2Sim
from rlcore_tasks.go2.terrain import Terrain
from rlcore_tasks.go2.variants import (
    ROBUSTNESS_GRID,
    Go2VariantEnv,
    Variant,
    latency_steps,
    variant_model,
)

KP, KD = 30.0, 0.5
LEGS = ("FL", "FR", "RL", "RR")
LEG_BODIES = [f"{leg}_{p}" for leg in LEGS for p in ("hip", "thigh", "calf", "foot")]
# Leg dofs are 6..17 (after the free joint); the nominal task model has no passive damping or friction.
LEG_DOFS = slice(6, 18)
ARRAYS = ("dof_damping", "dof_frictionloss", "geom_solimp", "geom_condim", "body_mass", "body_inertia",
          "actuator_gainprm", "actuator_biasprm", "geom_friction")


def by_name(name: str) -> Variant:
    return next(v for v in ROBUSTNESS_GRID if v.name == name)


@pytest.fixture(scope="module")
def models():
    cfg = make_config({"sim": {"threads": 1}})
    terrain = Terrain(cfg.terrain, 1, torch.device("cpu"), torch.Generator())
    return {v.name: variant_model(cfg, terrain, v, KP, KD) for v in ROBUSTNESS_GRID}


# ---------------------------------------------------------------------------- the variants
def test_grid_is_the_issue_grid():
    assert [v.name for v in ROBUSTNESS_GRID] == [
        "nominal", "damping_1", "damping_2", "damping_3", "frictionloss_0.2", "frictionloss_0.4", "soft_feet",
        "condim6_feet", "legs_+25%", "kp_-25%", "kp_+25%", "latency_10ms", "latency_20ms", "base_+3kg",
        "ground_friction_0.4", "ground_friction_1.2", "worst_plausible"]


def test_nominal_model_is_the_task_model(models):
    m = models["nominal"]
    assert np.all(m.dof_damping == 0) and np.all(m.dof_frictionloss == 0)
    assert np.all(m.actuator_gainprm[:, 0] == KP) and np.all(m.actuator_biasprm[:, 1:3] == [-KP, -KD])
    foot = m.geom("FL_foot").id
    assert m.geom_condim[foot] == 3 and m.body_mass[m.body("base").id] == pytest.approx(6.921)
    assert m.geom_friction[m.geom("ground").id, 0] == 1.0


#: What each variant must change, read back from its compiled model: array name -> check(model, nominal).
def _expected_changes() -> dict[str, dict]:
    def leg_dofs(attr, value):
        return lambda m, n: np.all(getattr(m, attr)[LEG_DOFS] == value) and np.all(getattr(m, attr)[:6] == 0)

    def feet(attr, value):
        return lambda m, n: all(np.allclose(np.atleast_1d(getattr(m, attr)[m.geom(f"{leg}_foot").id])[:np.size(value)],
                                            value) for leg in LEGS)

    def legs_scaled(attr):
        return lambda m, n: all(np.allclose(getattr(m, attr)[m.body(b).id], 1.25 * getattr(n, attr)[n.body(b).id],
                                            rtol=1e-12) for b in LEG_BODIES)

    def kp(scale):
        return {"actuator_gainprm": lambda m, n: np.allclose(m.actuator_gainprm[:, 0], KP * scale),
                "actuator_biasprm": lambda m, n: np.allclose(m.actuator_biasprm[:, 1], -KP * scale)
                and np.all(m.actuator_biasprm[:, 2] == -KD)}

    def ground(mu):
        return {"geom_friction": lambda m, n: m.geom_friction[m.geom("ground").id, 0] == mu}

    base = {"body_mass": lambda m, n: m.body_mass[m.body("base").id] == pytest.approx(6.921 + 3.0)}
    worst = {"dof_damping": leg_dofs("dof_damping", 2.0), "dof_frictionloss": leg_dofs("dof_frictionloss", 0.2),
             "geom_solimp": feet("geom_solimp", [0.015, 1.0, 0.03]), "geom_condim": feet("geom_condim", 6),
             "body_inertia": legs_scaled("body_inertia"),
             "body_mass": lambda m, n: legs_scaled("body_mass")(m, n) and base["body_mass"](m, n)}
    return {
        "nominal": {}, "latency_10ms": {}, "latency_20ms": {},  # latency changes the timing, not the model
        **{f"damping_{d}": {"dof_damping": leg_dofs("dof_damping", float(d))} for d in (1, 2, 3)},
        **{f"frictionloss_{f}": {"dof_frictionloss": leg_dofs("dof_frictionloss", f)} for f in (0.2, 0.4)},
        "soft_feet": {"geom_solimp": feet("geom_solimp", [0.015, 1.0, 0.03, 0.5, 2.0])},
        "condim6_feet": {"geom_condim": feet("geom_condim", 6)},
        "legs_+25%": {"body_mass": legs_scaled("body_mass"), "body_inertia": legs_scaled("body_inertia")},
        "kp_-25%": kp(0.75), "kp_+25%": kp(1.25), "base_+3kg": base,
        "ground_friction_0.4": ground(0.4), "ground_friction_1.2": ground(1.2),
        "worst_plausible": worst,
    }


@pytest.mark.parametrize("name", [v.name for v in ROBUSTNESS_GRID])
def test_variant_changes_exactly_what_it_names(models, name):
    expected = _expected_changes()[name]
    m, nominal = models[name], models["nominal"]
    changed = {a for a in ARRAYS if not np.array_equal(getattr(m, a), getattr(nominal, a))}
    assert changed == set(expected), f"{name}: changed {sorted(changed)}, expected {sorted(expected)}"
    for array, check in expected.items():
        assert check(m, nominal), f"{name}: {array} does not hold the variant's value"


def test_latency_in_whole_physics_steps():
    assert latency_steps(by_name("latency_10ms"), 0.005) == 2
    assert latency_steps(by_name("latency_20ms"), 0.005) == 4
    assert latency_steps(by_name("worst_plausible"), 0.005) == 2
    assert latency_steps(by_name("nominal"), 0.005) == 0
    with pytest.raises(ValueError, match="not a whole number"):
        latency_steps(Variant("odd", latency_s=0.007), 0.005)


# ---------------------------------------------------------------------------- delayed actuation
def _delayed_sim(num_envs: int) -> Go2Sim:
    cfg = make_config({"sim": {"threads": 1}, "domain_rand": no_randomization()})
    terrain = Terrain(cfg.terrain, num_envs, torch.device("cpu"), torch.Generator())
    return Go2Sim(cfg, num_envs, terrain, np.random.default_rng(0))


def test_latency_delays_the_applied_target_by_k_physics_steps():
    sim = _delayed_sim(5)
    latency = np.array([0, 1, 2, 4, 5])
    sim.set_latency(np.arange(5), latency)
    applied = []  # per control step, the targets MuJoCo received for each physics step [N, 4, 12]
    for t in range(4):
        sim.step(np.full((5, 12), float(t)))  # target of control step t: the value t on every joint
        applied.append(sim.ctrl.copy())
    timeline = np.concatenate(applied, axis=1)  # [N, 16 physics steps, 12]
    assert np.all(timeline == timeline[:, :, :1])
    # physics step s applies the target of control step floor((s - k) / 4), the first target before that
    by_hand = {0: [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3],
               1: [0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3],
               2: [0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3],
               4: [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2],
               5: [0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2]}
    for e, k in enumerate(latency):
        assert timeline[e, :, 0].tolist() == by_hand[k], f"latency {k}"
    sim.close()


def test_latency_reaches_the_physics():
    """An env with 4 steps (one control step) of latency moves exactly like an undelayed env one target behind."""
    sim = _delayed_sim(2)
    sim.set_latency(np.arange(2), np.array([4, 0]))
    pose = np.array([0.1, 0.8, -1.5, -0.1, 0.8, -1.5, 0.1, 1.0, -1.5, -0.1, 1.0, -1.5])
    targets = [pose, pose + 0.3, pose - 0.2, pose + 0.1]
    # env 0 gets targets[t]; env 1 gets what env 0 should feel: targets[t - 1] (targets[0] at first)
    for t in range(len(targets)):
        sim.step(np.stack([targets[t], targets[max(0, t - 1)]]))
        np.testing.assert_array_equal(sim.qpos[0], sim.qpos[1])
    assert np.abs(sim.qpos[0, 7:] - pose).max() > 0.01  # the joints did move
    sim.close()


def test_physics_failures_are_flagged_per_env():
    sim = _delayed_sim(3)
    sim.step(np.zeros((3, 12)))
    assert not sim.unstable.any()
    sim.qvel[1, 8] = np.nan  # MuJoCo resets env 1 (its clock jumps back)
    sim.qvel[2, 3] = 500.0  # env 2 spins its base at 500 rad/s: no Go2 does that
    sim.step(np.zeros((3, 12)))
    assert sim.unstable.tolist() == [False, True, True]
    sim.close()


# ---------------------------------------------------------------------------- the tool on tiny ONNX policies
class Constant(torch.nn.Module):
    """A policy that outputs the same actions whatever it observes."""

    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return obs[:, :12] * 0.0 + self.value


@pytest.fixture(scope="module")
def go2_meta():
    """The interface of a Go2 MLP policy (kp 30 as in conf/task/go2.yaml)."""
    env = Go2Env(num_envs=1, sim={"threads": 1}, control={"kp": KP})
    mlp = MLPModel(env.get_observations(), {"actor": ["policy"]}, "actor", 12, hidden_dims=[8])
    meta = policy_metadata(mlp.as_onnx(), mlp, env, "go2")
    env.close()
    return meta


def constant_policy(path, value: float, meta: dict | None) -> str:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Constant(value), (torch.zeros(1, 45),), str(path), input_names=["obs"],
                          output_names=["actions"], dynamic_axes={"obs": {0: "batch"}, "actions": {0: "batch"}},
                          dynamo=False)
    if meta is not None:
        write_onnx_metadata(path, meta)
    return str(path)


COMMANDS = [("vx_0.5", (0.5, 0.0, 0.0)), ("vy_-0.5", (0.0, -0.5, 0.0)), ("yaw_1.0", (0.0, 0.0, 1.0))]
SHORT = {"settle_s": 1.0, "measure_s": 1.0, "threads": 1}


def test_a_standing_policy_errs_by_the_command_speed(tmp_path, go2_meta):
    path = constant_policy(tmp_path / "stand.onnx", 0.0, go2_meta)
    lines = []
    r = evaluate(path, ["nominal", by_name("kp_-25%")], COMMANDS, out=lines.append, **SHORT)  # a name or a Variant
    assert r["falls"] == 0 and r["cases_n"] == 6
    for case in r["cases"]:
        assert np.abs(case["vel"]).max() < 0.03, case  # it does not go anywhere
        assert case["err_yaw"] == pytest.approx(abs(case["cmd"][2]), abs=0.03), case
        # the error of the reached (mean) velocity: |command - mean velocity|, from the case's own figures
        assert case["err_reached_xy"] == pytest.approx(
            np.hypot(case["cmd"][0] - case["vel"][0], case["cmd"][1] - case["vel"][1]), abs=1e-9)
        if case["command"] == "yaw_1.0":  # no planar command: the error is the PD-held body's rocking, < 0.1 m/s
            assert case["err_xy"] < 0.1, case
            assert case["err_reached_xy"] < 0.03, case  # ... which averages out of the reached velocity
        else:
            assert case["err_xy"] == pytest.approx(0.5, abs=0.04), case
            assert case["err_reached_xy"] == pytest.approx(0.5, abs=0.03), case
    # err of a variant = mean planar error over its commands = (0.5 + 0.5 + rocking) / 3
    assert r["nominal_err"] == pytest.approx(1.0 / 3.0, abs=0.04)
    assert r["worst_err"] == max(v["err"] for v in r["variants"].values())
    assert lines[-1] == (f"robustness: nominal_err={r['nominal_err']:.3f} mean_err={r['mean_err']:.3f} "
                         f"worst_err={r['worst_err']:.3f} falls=0/6 policy={path}")
    # standing still follows none of the three commands; the yaw line counts and names them
    assert [(c["variant"], c["command"]) for c in r["not_followed"]] == [
        (v, c) for v in ("nominal", "kp_-25%") for c in ("vx_0.5", "vy_-0.5", "yaw_1.0")]
    assert r["nominal_err_yaw"] == pytest.approx(1.0 / 3.0, abs=0.02)  # yaw error 1 on one command of three
    assert lines[-2].startswith(f"yaw rate: nominal_err_yaw={r['nominal_err_yaw']:.3f} ")
    # standing still: about none of the commanded speed or turn reached; no step cases here, so no rise-time line
    assert all(abs(c["ratio_yaw"] if c["command"] == "yaw_1.0" else c["ratio_xy"]) < 0.06 for c in r["cases"])
    assert r["steps_n"] == 0 and not any(ln.startswith("steps from rest:") for ln in lines)
    low = r["yaw_ratio_min_case"]
    assert low[1] == "yaw_1.0" and r["yaw_ratio_min"] == min(c["ratio_yaw"] for c in r["cases"] if c["ratio_yaw"] is not None)
    assert lines[-3] == (f"yaw ratio (reached/commanded, held yaw commands): nominal {r['yaw_ratio_nominal_min']:.2f}.."
                         f"{r['yaw_ratio_nominal_max']:.2f}, min {r['yaw_ratio_min']:.2f} ({low[0]}/yaw_1.0)")
    reached = r["variants"]["nominal"]["err_reached"]
    assert r["nominal_err_reached"] == reached == pytest.approx(np.mean(
        [c["err_reached_xy"] for c in r["cases"] if c["variant"] == "nominal"]))
    assert r["worst_err_reached"] == max(v["err_reached"] for v in r["variants"].values())
    assert lines[-4].startswith(f"reached velocity: nominal_err_reached={reached:.3f} "
                                f"mean_err_reached={r['mean_err_reached']:.3f} ")
    assert "commands not followed (standing, under 0.5 of the command reached): 6/6: nominal/vx_0.5 (planar " in lines[-2]
    assert sum(ln.startswith("nominal ") for ln in lines) == 4  # 3 case rows + the variant row


def test_a_falling_policy_is_flagged(tmp_path, go2_meta):
    path = constant_policy(tmp_path / "fall.onnx", 4.0, go2_meta)  # every joint target 1 rad off the pose
    r = evaluate(path, [by_name("nominal"), by_name("base_+3kg")], COMMANDS[:2], out=lambda _: None, **SHORT)
    assert r["falls"] == 4 and all(c["fell"] and not c["unstable"] for c in r["cases"])
    assert all(c["fall_time_s"] < 0.5 for c in r["cases"])
    # fallen before the measured second: the robot counts as standing still, error = command speed
    assert all(c["err_xy"] == pytest.approx(0.5) for c in r["cases"])
    assert r["not_followed"] == []  # a fall is counted as a fall, not as a command not followed


@pytest.mark.slow
def test_action_noise_and_repeats(tmp_path, go2_meta):
    """repeats=2 runs every case twice (cases <command>#0/#1): without noise the copies are identical, with
    action_noise each copy draws its own noise (the copies differ) and the same seed draws the same noise."""
    path = constant_policy(tmp_path / "stand.onnx", 0.0, go2_meta)
    cmds = COMMANDS[2:]  # yaw_1.0: a standing policy only rocks, so its error is the noise's doing

    def run(**kw):
        r = evaluate(path, ["nominal"], cmds, out=lambda _: None, repeats=2, **SHORT, **kw)
        assert [c["command"] for c in r["cases"]] == ["yaw_1.0#0", "yaw_1.0#1"] and r["cases_n"] == 2
        return [np.array(c["vel"] + [c["err_xy"]]) for c in r["cases"]]

    quiet = run()
    assert np.array_equal(quiet[0], quiet[1])
    noisy = run(action_noise=0.3, seed=1)
    assert not np.allclose(noisy[0], noisy[1])
    assert noisy[0][3] > quiet[0][3] + 0.01  # joint targets jittering by ~0.08 rad shake the body
    again = run(action_noise=0.3, seed=1)
    assert all(np.array_equal(a, b) for a, b in zip(noisy, again))
    with pytest.raises(UserError, match="need action_noise >= 0 and repeats >= 1"):
        evaluate(path, ["nominal"], cmds, out=lambda _: None, action_noise=-0.1, **SHORT)


def _case(cmd, vel, fell=False):
    return {"cmd": list(cmd), "vel": list(vel), "fell": fell}


def test_not_followed_by_hand():
    """Half of the command along its direction (planar) or with its sign (yaw) is the line."""
    assert not_followed(_case((0.5, 0.0, 0.0), (0.26, 0.3, 0.0))) == ""  # 0.26 of 0.5 along x: followed
    assert not_followed(_case((0.5, 0.0, 0.0), (0.24, 0.0, 0.0))) == "planar +0.24 of 0.5 m/s"
    # (0.3, 0.4) m/s commanded (speed 0.5); (0.4, -0.3) reached is as fast but at right angles: 0 along it
    assert not_followed(_case((0.3, 0.4, 0.0), (0.4, -0.3, 0.0))) == "planar +0.00 of 0.5 m/s"
    assert not_followed(_case((0.0, 0.0, -1.0), (0.0, 0.0, -0.02))) == "yaw -0.02 of -1.0 rad/s"
    assert not_followed(_case((0.0, 0.0, -1.0), (0.0, 0.0, 0.6))) == "yaw +0.60 of -1.0 rad/s"  # the wrong way
    assert not_followed(_case((0.0, 0.0, -1.0), (0.0, 0.0, -0.5))) == ""
    assert not_followed(_case((0.7, 0.0, 0.5), (0.1, 0.0, 0.1))) == "planar +0.10 of 0.7 m/s, yaw +0.10 of +0.5 rad/s"
    assert not_followed(_case((0.0, 0.0, 0.0), (0.3, 0.0, 0.4))) == ""  # zero command: nothing to follow
    assert not_followed(_case((0.5, 0.0, 0.0), (0.0, 0.0, 0.0), fell=True)) == ""


def test_reached_ratios_by_hand():
    """Reached planar velocity along the command over its speed; reached over commanded yaw rate; None for zero."""
    r = reached_ratios(_case((0.6, 0.8, 0.5), (0.3, 0.4, 0.6)))  # half the speed along it, 1.2 x the turn
    assert r["ratio_xy"] == pytest.approx(0.5) and r["ratio_yaw"] == pytest.approx(1.2)
    # (0.4, -0.3) at right angles to (0.3, 0.4): nothing along it; half the (negative) turn
    r = reached_ratios(_case((0.3, 0.4, -1.0), (0.4, -0.3, -0.5)))
    assert r["ratio_xy"] == pytest.approx(0.0, abs=1e-12) and r["ratio_yaw"] == pytest.approx(0.5)
    r = reached_ratios(_case((1.0, 0.0, 0.0), (-0.2, 0.1, 0.3)))  # backwards under a forward command
    assert r["ratio_xy"] == pytest.approx(-0.2) and r["ratio_yaw"] is None
    assert reached_ratios(_case((0.0, 0.0, 0.0), (0.3, 0.0, 0.4))) == {"ratio_xy": None, "ratio_yaw": None}
    assert reached_ratios(_case((0.0, -0.5, 0.0), (0.0, 0.0, 0.0), fell=True)) == {"ratio_xy": 0.0, "ratio_yaw": None}


def _ycase(variant, command, cmd, ratio_yaw, from_rest_s=None, rise_s=None):
    return {"variant": variant, "command": command, "cmd": list(cmd), "ratio_yaw": ratio_yaw,
            "from_rest_s": from_rest_s, "rise_s": rise_s}


def test_yaw_and_step_summaries_pick_the_right_cases():
    """Yaw ratios over held yaw commands only (a step case, however low, and zero-yaw cases are left out)."""
    cases = [_ycase("nominal", "yaw_1.0", (0, 0, 1.0), 0.95), _ycase("nominal", "yaw_-1.0", (0, 0, -1.0), 1.02),
             _ycase("nominal", "vx_0.5", (0.5, 0, 0), None), _ycase("nominal", "step_yaw_1.0", (0, 0, 1.0), 0.1, 1.0, 0.42),
             _ycase("soft_feet", "yaw_1.0", (0, 0, 1.0), 0.97), _ycase("soft_feet", "vx_0.7_yaw_0.5", (0.7, 0, 0.5), 0.81),
             _ycase("soft_feet", "step_yaw_1.0", (0, 0, 1.0), 0.05, 1.0, 0.9),
             _ycase("kp_-25%", "step_yaw_1.0", (0, 0, 1.0), 0.0, 1.0, None)]
    assert yaw_summary(cases) == {"yaw_ratio_nominal_min": 0.95, "yaw_ratio_nominal_max": 1.02, "yaw_ratio_min": 0.81,
                                  "yaw_ratio_min_case": ("soft_feet", "vx_0.7_yaw_0.5")}
    assert step_summary(cases) == {"rise_s_nominal": {"step_yaw_1.0": 0.42}, "rise_s_max": 0.9,
                                   "rise_s_max_case": ("soft_feet", "step_yaw_1.0"),
                                   "rise_s_never": [("kp_-25%", "step_yaw_1.0")], "steps_n": 3}
    assert yaw_summary(cases[2:3]) == dict.fromkeys(
        ("yaw_ratio_nominal_min", "yaw_ratio_nominal_max", "yaw_ratio_min", "yaw_ratio_min_case"))


def test_rise_time_by_hand():
    """Step before control step 3 (dt 0.1 s, average over 3 samples centred): the raw velocity crosses 0.9 on a sway
    peak at sample 4, the average only at sample 5: (0.95 + 0.8 + 1.1) / 3 = 0.95; 5 + 1 - 3 = 3 steps = 0.3 s."""
    along = np.array([0.0, 0.0, 0.0, 0.2, 0.95, 0.8, 1.1, 1.0, 1.0])
    assert rise_time(along, 1.0, 3, 0.1, average_s=0.2) == pytest.approx(0.3)
    assert rise_time(along, 1.0, 3, 0.1, average_s=0.0) == pytest.approx(0.2)  # no average: the sway peak
    assert rise_time(along, 1.2, 3, 0.1, average_s=0.2) is None  # 0.9 x 1.2 = 1.08: never
    # the velocity along the command: a turn with the command's sign, a planar command projected on its direction
    trace = np.array([[0.3, 0.4, -0.5], [0.6, 0.8, -1.0]])
    along, target = along_command((0.0, 0.0, -2.0), trace)
    assert target == 2.0 and along.tolist() == [0.5, 1.0]
    along, target = along_command((0.6, 0.8, 1.0), trace)
    assert target == pytest.approx(1.0) and along == pytest.approx([0.5, 1.0])
    assert along_command((0.0, 0.0, 0.0), trace) is None


def test_probe_commands_held_or_stepped():
    assert probe_command(("vx", (1, 0, 0))) == ("vx", (1.0, 0.0, 0.0), None)
    assert probe_command(("step", (0, 0, 1), 0.5)) == ("step", (0.0, 0.0, 1.0), 0.5)
    for bad in [("vx", (1, 0)), ("step", (0, 0, 1), 0.0), ("step", (0, 0, 1), 1.0, 2.0), ("vx",), "vx"]:
        with pytest.raises(UserError, match="give \\(name, \\(vx, vy, yaw rate\\)\\) or"):
            probe_command(bad)


def test_a_step_from_rest_is_zero_until_its_step(tmp_path, go2_meta, monkeypatch):
    """A step case's env command is exactly zero for its from_rest_s (10 control steps of 0.02 s), then the command;
    a held case's is its command throughout; each is measured over its own last 10 steps (after settle)."""
    path = constant_policy(tmp_path / "stand.onnx", 0.0, go2_meta)
    seen, step = [], Go2VariantEnv.step

    def recording_step(self, actions):
        seen.append(self.commands.clone())
        return step(self, actions)

    monkeypatch.setattr(Go2VariantEnv, "step", recording_step)
    commands = [("vx_0.5", (0.5, 0.0, 0.0)), ("step_yaw_1.0", (0.0, 0.0, 1.0), 0.2)]
    r = evaluate(path, ["nominal"], commands, settle_s=0.1, measure_s=0.2, threads=1, out=lambda _: None)
    seen = torch.stack(seen)  # [steps, 2 envs, 3]
    assert len(seen) == 10 + 5 + 10  # the longest case: 10 from rest + 5 settle + 10 measured
    assert torch.all(seen[:, 0] == torch.tensor([0.5, 0.0, 0.0]))
    assert torch.all(seen[:10, 1] == 0.0) and torch.all(seen[10:, 1] == torch.tensor([0.0, 0.0, 1.0]))
    held, stepped = r["cases"]
    assert held["from_rest_s"] is None and stepped["from_rest_s"] == 0.2 and not held["fell"] and not stepped["fell"]
    # standing still: measured after the step the yaw error is the full command (0.5 if measured from step 5 on)
    assert stepped["err_yaw"] == pytest.approx(1.0, abs=0.03) and abs(stepped["ratio_yaw"]) < 0.03
    assert stepped["ratio_xy"] is None and stepped["rise_s"] is None and held["rise_s"] is None
    assert r["rise_s_never"] == [("nominal", "step_yaw_1.0")] and r["steps_n"] == 1


def test_the_tool_uses_the_files_settings(go2_meta):
    env = Go2VariantEnv.from_interface({**go2_meta, "action_scale": 0.3, "kd": [0.7] * 12}, 2, episode_s=3.0,
                                       threads=1)
    c = env.cfg_task
    assert (c.control.kp, c.control.kd, c.control.action_scale) == (KP, 0.7, 0.3)
    assert not c.obs.add_noise and not c.domain_rand.push_robots and not c.commands.heading_command
    models = env.assign_variants([by_name("nominal"), by_name("latency_20ms")], np.array([1, 0]))
    assert np.all(models[0].actuator_biasprm[:, 2] == -0.7) and env.sim.latency.tolist() == [4, 0]
    env.close()
    bad = {**go2_meta, "obs_layout": [dict(t) for t in go2_meta["obs_layout"]]}
    bad["obs_layout"][4]["input_start"] = 20  # joint_vel not where this task puts it
    with pytest.raises(ValueError, match="observation layout"):
        Go2VariantEnv.from_interface(bad, 1, episode_s=1.0, threads=1)


def test_refuses_files_without_a_go2_interface(tmp_path, go2_meta, capsys):
    bare = constant_policy(tmp_path / "bare.onnx", 0.0, None)
    with pytest.raises(UserError, match="has no rlcore interface"):
        evaluate(bare, out=lambda _: None)
    other = constant_policy(tmp_path / "other.onnx", 0.0, {"task": "pendulum", "version": "0.1.0"})
    with pytest.raises(UserError, match="task 'pendulum', which has no robustness grid; tasks with one: go2, go2_rough"):
        evaluate(other, out=lambda _: None)
    with pytest.raises(SystemExit) as exit_info:  # the command line: one error line, exit status 2
        main([f"policy={bare}"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "python -m rlcore.export" in err[0]
    with pytest.raises(SystemExit):
        main([f"policy={tmp_path / 'missing.onnx'}"])
    assert "no such file or directory" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # arguments are key=value, like every rlcore tool's
        main([str(bare)])
    assert f"arguments are key=value: write policy={bare}" in capsys.readouterr().err


@pytest.mark.parametrize("variants", ["variants=[nominal]", "variants=nominal"])
def test_command_line_on_a_run_directory(tmp_path, go2_meta, capsys, variants):
    (tmp_path / "exported").mkdir()
    path = constant_policy(tmp_path / "exported" / "policy.onnx", 0.0, go2_meta)
    assert read_onnx_interface(path)["kp"] == [KP] * 12
    main([f"policy={tmp_path}", variants, "settle_s=1", "measure_s=0.4", "threads=1", "table=summary"])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    match = re.fullmatch(r"robustness: nominal_err=(\S+) mean_err=(\S+) worst_err=(\S+) falls=0/13 policy=(.+)", last)
    assert match and match.group(4) == path
    # standing still under the 13 probe commands (the steps measured after their step): their mean planar speed
    # (0.5 + 1 + 0.5 + 1 + 0.5 + 0.5 + 0.7 + 0.5 + 1) / 13
    assert float(match.group(1)) == pytest.approx(6.2 / 13, abs=0.04) and match.group(1) == match.group(3)
    _ = mujoco  # imported for the skip above


def test_a_recurrent_policy_runs_with_its_state_fed_back(tmp_path):
    """The tool's closed loop of an exported GRU equals the same loop run by hand with the torch policy."""
    from rlcore.deployment import export_onnx
    from rlcore.models import RNNModel

    env = Go2Env(num_envs=1, sim={"threads": 1}, control={"kp": KP})
    torch.manual_seed(0)
    rnn = RNNModel(env.get_observations(), {"actor": ["policy"]}, "actor", 12, hidden_dims=[8], rnn_type="gru",
                   rnn_hidden_dim=8, distribution_cfg={"class_name": "GaussianDistribution", "init_std": 1.0}).eval()
    with torch.no_grad():
        for p in rnn.parameters():
            p.add_(0.3 * torch.randn_like(p))
    module = rnn.as_onnx()
    path = export_onnx(module, tmp_path / "gru.onnx", metadata=policy_metadata(module, rnn, env, "go2"))
    env.close()
    r = evaluate(path, [by_name("nominal")], COMMANDS[:1], settle_s=0.2, measure_s=0.4, threads=1, out=lambda _: None)

    probe = Go2VariantEnv.from_interface(read_onnx_interface(path), 1, episode_s=10.0, threads=1)
    probe.assign_variants([by_name("nominal")], np.array([0]))
    probe.commands[:] = torch.tensor([[0.5, 0.0, 0.0]])
    obs, vel, actions = probe.get_observations(), [], []
    rnn.reset()
    with torch.inference_mode():
        for step in range(30):  # 10 settle + 20 measured control steps
            actions.append(rnn(obs))
            obs, _, dones, _ = probe.step(actions[-1])
            assert not dones.any()
            if step >= 10:
                vel.append([*probe.base_lin_vel[0, :2].tolist(), float(probe.base_ang_vel[0, 2])])
    probe.close()
    assert torch.stack(actions).std(dim=0).max() > 0.05  # the actions change over the loop
    np.testing.assert_allclose(r["cases"][0]["vel"], np.mean(vel, axis=0), rtol=0, atol=1e-4)
    assert not r["cases"][0]["fell"]
