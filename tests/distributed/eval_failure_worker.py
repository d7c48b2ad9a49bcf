"""torchrun worker of ``test_rank_failure.py``: rank 0's evaluation raises (an injected bug) in a run with
``runner.stop_at``; every rank writes the error it ended with to ``<outdir>/rank<r>.txt``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runners"))
from runner_helpers import base_cfg, make_env

from rlcore.runners import OnPolicyRunner
from rlcore.runners.evaluation import Evaluation


def failing_run(self, policy, act, total_steps, *args, **kwargs):
    if total_steps > 1:  # the evaluations, not the start-of-training check
        raise RuntimeError("injected evaluation bug")
    return original(self, policy, act, total_steps, *args, **kwargs)


original = Evaluation._run


def main(outdir: str) -> None:
    rank = int(os.environ["RANK"])
    Evaluation._run = failing_run
    cfg = base_cfg(stop_at="return < -1e12", eval_interval=1)
    runner = OnPolicyRunner(make_env(num_envs=8, seed=rank), cfg, log_dir=None,
                            eval_env=make_env(num_envs=4, seed=99) if rank == 0 else None)
    try:
        runner.learn(5)
        message = "finished"
    except Exception as err:
        message = f"{type(err).__name__}: {err}"
    Path(outdir, f"rank{rank}.txt").write_text(message)
    sys.exit(1 if message != "finished" else 0)


if __name__ == "__main__":
    main(sys.argv[1])
