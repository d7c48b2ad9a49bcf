"""MuJoCo Warp backend against the rollout backend: how far one control step from the same state lands apart.

For each case it builds both backends of the Go2 task with the same config (randomisation off, one variant), puts
N robots in the same state, and repeats: copy the rollout backend's state into the Warp backend, give both the
same joint targets (the default pose plus Gaussian noise, std 0.1 rad), step one control step (4 physics steps),
and record each robot's largest |qpos| and |qvel| difference. Cases: a free fall (no contact: float32 against
float64 alone), the nominal robot standing and stepping on the plane, each variant of the robustness grid's
kinds (the solver's 10 iterations, and a converged 50), and the rough height field.

Run (from the repository root)::

    python bench/warp_parity.py               # 16 robots x 50 steps per case
    python bench/warp_parity.py --envs 8 --steps 20

Per case: median, 99th percentile and largest qpos difference, the largest qvel difference, and the share of
robot-steps whose qpos differs by more than 1e-4. Last line: ``warp_parity: nominal_median=<m> nominal_p99=<p>
air_max=<a> rough_median=<r>``.
"""

from __future__ import annotations

import argparse

from _common import ROOT  # noqa: F401  (first: the bench preamble, the repository on sys.path)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--envs", type=int, default=16)
    p.add_argument("--steps", type=int, default=50)
    return p.parse_args(argv)


def pair(n: int, terrain: str = "flat", iterations: int = 10):
    import numpy as np
    import torch

    from rlcore_tasks.go2.config import make_config, no_randomization
    from rlcore_tasks.go2.sim import Go2Sim
    from rlcore_tasks.go2.sim_warp import WarpSim
    from rlcore_tasks.go2.terrain import Terrain

    cfg = make_config({"sim": {"threads": 1, "solver_iterations": iterations},
                       "domain_rand": {**no_randomization(), "num_variants": 1},
                       "terrain": {"type": terrain, "num_levels": 2, "num_cols": 2, "tile_size": 4.0}})
    terrain_ = Terrain(cfg.terrain, n, torch.device("cpu"), torch.Generator().manual_seed(0))
    return Go2Sim(cfg, n, terrain_, np.random.default_rng(0)), WarpSim(cfg, n, terrain_, np.random.default_rng(0))


def measure(a, b, steps: int, height: float = 0.33, rough: bool = False, seed: int = 0) -> dict:
    """One-step differences from the rollout state, every step; ``height`` above the ground at the start."""
    import numpy as np
    import torch

    n = a.num_envs
    gen = torch.Generator().manual_seed(seed)
    pose = torch.tensor(a.cfg.control.default_joint_pos)
    qpos = torch.cat([torch.tensor([0.0, 0.0, height, 1.0, 0.0, 0.0, 0.0]), pose]).repeat(n, 1)
    if rough:
        qpos[:, :2] = torch.rand(n, 2, generator=gen) * 6.0 + 1.0
        qpos[:, 2] += a.heights(qpos[:, :2])
    for s in (a, b):
        s.reset(torch.arange(n), qpos, torch.zeros(n, 18))
    pos, vel = [], []
    for _ in range(steps):
        b.load_state_dict(a.state_dict())
        targets = pose + 0.1 * torch.randn(n, 12, generator=gen)
        a.step(targets), b.step(targets)
        pos.append(np.abs(a.qpos - b.qpos.double().numpy()).max(axis=1))
        vel.append(np.abs(a.qvel - b.qvel.double().numpy()).max(axis=1))
    pos, vel = np.concatenate(pos), np.concatenate(vel)
    return {"median": float(np.median(pos)), "p99": float(np.percentile(pos, 99)), "max": float(pos.max()),
            "qvel_max": float(vel.max()), "over_1e-4": float((pos > 1e-4).mean())}


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    from rlcore_tasks.go2.randomization import SOFT_SOLIMP, Variant

    n, steps = args.envs, args.steps
    results = {}

    def show(name: str, r: dict) -> None:
        results[name] = r
        print(f"[warp_parity] {name:<28} qpos median {r['median']:.1e} p99 {r['p99']:.1e} max {r['max']:.1e}  "
              f"qvel max {r['qvel_max']:.1e}  steps over 1e-4: {100 * r['over_1e-4']:.1f} %", flush=True)

    a, b = pair(n)
    show("free fall (no contact)", measure(a, b, steps, height=20.0))
    show("nominal, standing", measure(a, b, steps))
    variants = [Variant("damping_3", joint_damping=3.0), Variant("frictionloss_0.4", joint_frictionloss=0.4),
                Variant("soft_feet", foot_solimp=SOFT_SOLIMP), Variant("legs_+25%", leg_mass_scale=1.25),
                Variant("kp_+25%", kp_scale=1.25), Variant("base_+3kg", base_added_mass=3.0),
                Variant("ground_friction_0.4", ground_friction=0.4), Variant("latency_20ms", latency_s=0.02)]
    for iterations in (10, 50):
        a, b = pair(n, iterations=iterations)
        for v in variants:
            for s in (a, b):
                s.set_physical_variants([v])
            show(f"{v.name}, {iterations} iterations", measure(a, b, steps))
    a, b = pair(n, terrain="rough")
    show("rough height field", measure(a, b, steps, height=0.36, rough=True))
    print(f"warp_parity: nominal_median={results['nominal, standing']['median']:.1e} "
          f"nominal_p99={results['nominal, standing']['p99']:.1e} air_max={results['free fall (no contact)']['max']:.1e} "
          f"rough_median={results['rough height field']['median']:.1e}")
    return results


if __name__ == "__main__":
    main()
