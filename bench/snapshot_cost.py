"""What the iteration-boundary snapshot costs a Go2 training run (issue 52: Ctrl-C saves the last completed
iteration, so the runner copies its state at every boundary).

Builds the default ``task=go2`` runner (1024 envs), trains ``--iterations`` iterations to time one, then times
``runner._snapshot(obs)`` (a copy of the algorithm's and the rank's state plus the next observation) ``--repeats``
times in the same process. Last line: ``snapshot_cost: snapshot_ms=<ms> iteration_s=<s> overhead=<percent>%``.

    python bench/snapshot_cost.py
"""

from __future__ import annotations

import argparse
import os
import time

from _common import go2_training


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    from rlcore.runners.on_policy_runner import OnPolicyRunner

    _, train_cfg, _, env = go2_training(seed=1, overrides=[], threads=args.threads)
    runner = OnPolicyRunner(env, train_cfg, log_dir=None, device="cpu")
    runner.learn(1)  # the warm-up and a first iteration: the timed ones below are steady
    start = time.perf_counter()
    runner.learn(args.iterations)
    iteration_s = (time.perf_counter() - start) / args.iterations
    obs = runner._resume_obs
    start = time.perf_counter()
    for _ in range(args.repeats):
        runner._snapshot(obs)
    snapshot_s = (time.perf_counter() - start) / args.repeats
    print(f"snapshot_cost: snapshot_ms={1e3 * snapshot_s:.1f} iteration_s={iteration_s:.2f} "
          f"overhead={100 * snapshot_s / iteration_s:.2f}%")


if __name__ == "__main__":
    main()
