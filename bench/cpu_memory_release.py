"""Whether ``runner.keep_cpu_memory`` outlives the runner (issue 40, defect 2).

Builds two pendulum runners (``keep_cpu_memory`` true, then false), trains each for one iteration and closes it,
then frees a 300 MB numpy array and a loop of 100-400 MB arrays, as user code after training would. Prints the
resident memory above the size before the arrays (``/proc/self/statm``; Linux only). While a runner trains, freed
blocks stay mapped (the learner's speed); after it, nothing should stay. Before issue 40 the first runner's setting
stayed for the rest of the process: about 300 MB and 400 MB stayed resident.

Last line: ``cpu_memory_release: after_300MB_freed_MB=<MB> after_loop_MB=<MB>``.

    python bench/cpu_memory_release.py
"""

from __future__ import annotations

import contextlib
import io
import os

import _common  # noqa: F401  (first: OMP_WAIT_POLICY before numpy and torch load, the repository on sys.path)
import numpy as np


def resident_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def freed(mb: int, base: float) -> float:
    """Resident MB above ``base`` after an ``mb`` MB array is allocated, written and freed."""
    a = np.ones(mb * 1_000_000 // 8)
    del a
    return resident_mb() - base


def main() -> None:
    from rlcore.env.task import make_task
    from rlcore.runners import OnPolicyRunner

    for keep in (True, False):
        cfg = {"num_steps_per_env": 8, "save_interval": 1000, "logger": "none", "keep_cpu_memory": keep,
               "obs_groups": {"actor": ["policy"], "critic": ["critic"]},
               "actor": {"class_name": "MLPModel", "hidden_dims": [16, 16],
                         "distribution_cfg": {"class_name": "GaussianDistribution"}},
               "critic": {"class_name": "MLPModel", "hidden_dims": [16, 16]},
               "algorithm": {"class_name": "PPO", "num_mini_batches": 2, "num_learning_epochs": 1}}
        runner = OnPolicyRunner(make_task("pendulum", num_envs=16, seed=0), cfg, None)
        with contextlib.redirect_stdout(io.StringIO()):
            runner.learn(1)
        runner.close()
    base = resident_mb()
    one = freed(300, base)
    for mb in (100, 200, 300, 400, 300, 200, 100):
        loop = freed(mb, base)
    print(f"cpu_memory_release: after_300MB_freed_MB={one:.1f} after_loop_MB={loop:.1f}")


if __name__ == "__main__":
    main()
