"""Which MuJoCo settings keep the Go2 stable over the domain-randomisation range, and what each costs.

For every candidate (integrator, friction cone, solver iterations, physics step) it builds the task's simulator
(:class:`rlcore_tasks.go2.sim.Go2Sim`, ``conf/task/go2.yaml``'s gains) whose variant pool holds the corners of the
randomisation range (joint damping 3 with frictionloss 0.4 and the lightest armature; the softest condim-6 feet
with heavy legs and payload; weak and strong PD gains; 20 ms latency) plus draws from the default ranges, one
variant per env in turn, and runs two probes:

- ``random``: random PD targets (actions ~ N(0, 1), i.e. joint targets 0.25 rad std around the standing pose,
  redrawn every control step), the harshest thing a fresh policy does;
- ``stand``: the standing pose held from a drop at the spawn height (a robot that should just stand).

Per probe: the fraction of env steps the simulator flagged unstable (non-finite or exploding state, or a
MuJoCo reset; the env is then respawned), MuJoCo's own warnings (``mj warn``: "Nan, Inf or huge value in QACC",
after which MuJoCo resets the env), and for ``stand`` the fraction of robots not standing at the end (base below
0.2 m: a weak, heavy corner variant may sag; that is physics, not a failure). ``steps/s`` is the raw control-step rate of ``Go2Sim.step`` during the random probe.

Run (from the repository root)::

    python bench/physics_settings.py                  # all candidates, 256 envs, 4 s per probe, 2 pool draws
    python bench/physics_settings.py --envs 128 --seconds 2 --only euler_it4 implicitfast_it4

Last line: ``physics_settings: best=<name> unstable=<fraction> steps_per_s=<rate>`` (best = the fastest
candidate with no unstable step and no MuJoCo warning in either probe over all draws, among those that keep the
task's contact model, within 5 % of it counting as a tie won by fewer solver iterations; the task's default is
marked). Fractions and steps/s are means over the draws.
"""

from __future__ import annotations

import argparse
import time

from _common import ROOT

#: name -> sim settings (physics step dt with the same 20 ms control period).
CANDIDATES: dict[str, dict] = {
    "euler_it4": {"integrator": "euler", "cone": "pyramidal", "solver_iterations": 4},
    "euler_it6": {"integrator": "euler", "cone": "pyramidal", "solver_iterations": 6},
    "euler_it8": {"integrator": "euler", "cone": "pyramidal", "solver_iterations": 8},
    "euler_it10": {"integrator": "euler", "cone": "pyramidal", "solver_iterations": 10},
    "euler_it20": {"integrator": "euler", "cone": "pyramidal", "solver_iterations": 20},
    "euler_it50": {"integrator": "euler", "cone": "pyramidal", "solver_iterations": 50},
    # impratio 10 changes the contact model (softer friction, which lets standing feet creep: SimCfg.impratio), so
    # it is shown but not eligible as "best".
    "euler_it4_impratio10": {"integrator": "euler", "cone": "pyramidal", "solver_iterations": 4, "impratio": 10.0},
    "euler_it4_dt2.5ms": {"integrator": "euler", "cone": "pyramidal", "solver_iterations": 4, "dt": 0.0025,
                          "decimation": 8},
    "implicitfast_it4": {"integrator": "implicitfast", "cone": "pyramidal", "solver_iterations": 4},
    "implicitfast_it10": {"integrator": "implicitfast", "cone": "pyramidal", "solver_iterations": 10},
    "euler_elliptic_it10": {"integrator": "euler", "cone": "elliptic", "solver_iterations": 10},
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--envs", type=int, default=256)
    p.add_argument("--seconds", type=float, default=4.0, help="simulated seconds per probe")
    p.add_argument("--threads", type=int, default=None, help="MuJoCo threads (default: all cores)")
    p.add_argument("--only", nargs="*", default=None, help="candidate names to run (default: all)")
    p.add_argument("--seeds", type=int, default=2, help="independent draws of the variant pool and targets")
    return p.parse_args(argv)


def corner_variants() -> list:
    """The corners of the default randomisation range (rlcore_tasks/go2/config.py DomainRandCfg)."""
    from rlcore_tasks.go2.randomization import SOFT_SOLIMP, Variant

    return [
        Variant("damped_stiff", joint_damping=3.0, joint_frictionloss=0.4, joint_armature=0.005, foot_condim=6,
                leg_mass_scale=0.85, kp_scale=1.25, kd_scale=1.25, motor_strength=1.1, ground_friction=1.25),
        Variant("soft_heavy_late", joint_damping=3.0, joint_frictionloss=0.4, joint_armature=0.005,
                foot_solref=(0.03, 1.0), foot_solimp=SOFT_SOLIMP, foot_condim=6, leg_mass_scale=1.3,
                base_added_mass=3.0, base_com_offset=(0.05, 0.05, 0.01), kp_scale=1.25, kd_scale=1.25,
                motor_strength=1.1, latency_s=0.02, ground_friction=1.25),
        Variant("weak_undamped", joint_damping=0.0, joint_frictionloss=0.0, joint_armature=0.02,
                foot_solimp=SOFT_SOLIMP, leg_mass_scale=1.3, base_added_mass=3.0, kp_scale=0.75, kd_scale=0.75,
                motor_strength=0.9, latency_s=0.02, ground_friction=0.4),
    ]


def run_candidate(name: str, settings: dict, args, seed: int = 0) -> dict:
    import mujoco
    import numpy as np
    import torch
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from rlcore_tasks.go2.config import make_config
    from rlcore_tasks.go2.randomization import sample_variant
    from rlcore_tasks.go2.sim import Go2Sim
    from rlcore_tasks.go2.terrain import Terrain

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        task_cfg = OmegaConf.to_container(compose("config", overrides=["task=go2"]).task.env, resolve=True) or {}
    sim_cfg = {"threads": args.threads, **settings}
    cfg = make_config({**task_cfg, "sim": {**task_cfg.get("sim", {}), **sim_cfg}})
    n = args.envs
    rng = np.random.default_rng(seed)
    sim = Go2Sim(cfg, n, Terrain(cfg.terrain, n, torch.device("cpu"), torch.Generator()), rng)
    pool = corner_variants() + [sample_variant(cfg.domain_rand, rng, cfg.sim.dt, f"drawn_{i}") for i in range(13)]
    sim.set_physical_variants(pool)
    sim.set_variants(np.arange(n), np.arange(n) % len(pool))
    default = np.asarray(cfg.control.default_joint_pos)
    steps = int(round(args.seconds / (cfg.sim.dt * cfg.sim.decimation)))

    def spawn(ids: np.ndarray) -> None:
        sim.qpos[ids] = 0.0
        sim.qpos[ids, 2] = cfg.init.base_height
        sim.qpos[ids, 3] = 1.0
        sim.qpos[ids, 7:] = default
        sim.qvel[ids] = 0.0
        sim.set_variants(ids, sim.env_variant[ids])  # a fresh latency pipeline

    messages: list[str] = []
    mujoco.set_mju_user_warning(messages.append)  # MuJoCo's own warnings (bad QACC: it reset the env), counted

    out = {}
    for probe in ("random", "stand"):
        spawn(np.arange(n))
        messages.clear()
        gen = np.random.default_rng(1000 + seed)
        unstable, elapsed = 0, 0.0
        for _ in range(steps):
            noise = gen.standard_normal((n, 12)) if probe == "random" else 0.0
            targets = np.broadcast_to(default + cfg.control.action_scale * noise, (n, 12))
            t0 = time.perf_counter()
            sim.step(targets)
            elapsed += time.perf_counter() - t0
            bad = np.flatnonzero(sim.unstable.cpu().numpy())
            unstable += bad.size
            if bad.size:
                spawn(bad)
        out[f"{probe}_unstable"] = unstable / (n * steps)
        out[f"{probe}_warnings"] = len(messages)
        if probe == "random":
            out["steps_per_s"] = n * steps / elapsed
        else:
            out["not_standing"] = float(np.mean(sim.qpos[:, 2] < 0.2))
    sim.close()
    mujoco.set_mju_user_warning(None)
    return out


def main(argv: list[str] | None = None) -> str:
    args = parse_args(argv)
    import numpy as np

    from rlcore_tasks.go2.config import SimCfg

    names = args.only or list(CANDIDATES)
    unknown = [x for x in names if x not in CANDIDATES]
    if unknown:
        raise SystemExit(f"unknown candidates {unknown}; valid: {', '.join(CANDIDATES)}")
    default = SimCfg()
    print(f"{'candidate':<28} {'random: unstable':>16} {'mj warn':>8} {'stand: unstable':>16} {'mj warn':>8} "
          f"{'not standing':>12} {'steps/s':>9}", flush=True)
    rows = {}
    for name in names:
        runs = [run_candidate(name, CANDIDATES[name], args, seed) for seed in range(args.seeds)]
        r = {k: (sum(x[k] for x in runs) if k.endswith("_warnings") else float(np.mean([x[k] for x in runs])))
             for k in runs[0]}
        s = CANDIDATES[name]
        mark = " (default)" if (s["integrator"], s["cone"], s["solver_iterations"], s.get("dt", 0.005),
                                s.get("impratio", 100.0)) == (default.integrator, default.cone,
                                                              default.solver_iterations, default.dt,
                                                              default.impratio) else ""
        rows[name] = r
        print(f"{name + mark:<28} {r['random_unstable']:>16.5f} {r['random_warnings']:>8d} {r['stand_unstable']:>16.5f} "
              f"{r['stand_warnings']:>8d} {r['not_standing']:>12.3f} {r['steps_per_s']:>9.0f}", flush=True)
    stable = {k: r for k, r in rows.items() if r["random_unstable"] == 0 and r["stand_unstable"] == 0
              and r["random_warnings"] == 0 and r["stand_warnings"] == 0
              and CANDIDATES[k].get("impratio", default.impratio) == default.impratio}
    # Among the stable ones: within 5 % of the fastest counts as a tie (run-to-run noise), broken by fewer solver
    # iterations (the solver stops early once converged, so more iterations only cost where they are needed).
    fastest = max((r["steps_per_s"] for r in stable.values()), default=0.0)
    ties = [k for k, r in stable.items() if r["steps_per_s"] >= 0.95 * fastest]
    pick = min(ties, key=lambda k: (CANDIDATES[k]["solver_iterations"], -stable[k]["steps_per_s"])) if ties else min(
        rows, key=lambda k: rows[k]["random_unstable"] + rows[k]["stand_unstable"])
    line = (f"physics_settings: best={pick} unstable={rows[pick]['random_unstable'] + rows[pick]['stand_unstable']:.5f} "
            f"steps_per_s={rows[pick]['steps_per_s']:.0f}")
    print(line)
    return line


if __name__ == "__main__":
    main()
