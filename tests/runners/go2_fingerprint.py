"""A tiny ``task=go2`` training's fingerprint, to show that a refactor trains bit-identically (issue 41, item 5).

``record`` trains the default Go2 plan (tests/runners/resume_check.py ``go2_plan``: 12 envs, 8-step rollouts, seed 1)
for 3 iterations and saves each update's losses, each rollout's actions and per-env std factors, the std after each
update and the final actor, critic and optimiser state; ``compare`` says whether two records are bit-identical.
Run ``record`` from the root of each code version (``git archive <rev> | tar -x -C /tmp/base`` for an older one)::

    (cd /tmp/base && PYTHONPATH=. python /path/to/tests/runners/go2_fingerprint.py record /tmp/a.pt)
    python tests/runners/go2_fingerprint.py record /tmp/b.pt
    python tests/runners/go2_fingerprint.py compare /tmp/a.pt /tmp/b.pt

Extra arguments of ``record`` are config overrides, e.g. an exploration schedule that applies from iteration 1:
``'algorithm.exploration_cfg.std_max_schedule=[[1,0.5],[2,0.3]]' algorithm.exploration_cfg.low_noise_start=1``.
"""

from __future__ import annotations

import os
import sys

import torch

KEYS = ("losses", "actions", "noise_scale", "std", "actor", "critic", "optimizer")


def record(path: str, overrides: list[str]) -> None:
    sys.path.insert(0, os.path.join(os.getcwd(), "tests", "runners"))
    from resume_check import go2_plan, make_runner

    runner = make_runner(go2_plan("ppo", None, extra=("seed=1", *overrides)), None)
    alg, out = runner.alg, {key: [] for key in KEYS[:4]}
    update = alg.update

    def recorded_update():
        st = alg.storage
        out["actions"].append(st.actions.clone())
        out["noise_scale"].append(None if st.noise_scale is None else st.noise_scale.clone())
        losses = update()
        out["losses"].append(losses)
        out["std"].append(alg.actor.output_std.detach().clone())
        return losses

    alg.update = recorded_update
    runner.learn(3, init_at_random_ep_len=True)
    out.update(actor=alg.actor.state_dict(), critic=alg.critic.state_dict(), optimizer=alg.optimizer.state_dict())
    torch.save(out, path)
    for it, losses in enumerate(out["losses"]):
        print(it, {k: float(v) for k, v in losses.items()})


def differences(a, b, path: str) -> list[str]:
    """Where two nested records differ (tensors bit for bit)."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        same = (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == b.dtype
                and a.shape == b.shape and torch.equal(a, b))
        return [] if same else [path]
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return [f"{path}: keys {sorted(map(str, set(a) ^ set(b)))}"]
        return [d for k in a for d in differences(a[k], b[k], f"{path}.{k}")]
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [path]


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "record":
        record(argv[1], argv[2:])
        return 0
    if len(argv) == 3 and argv[0] == "compare":
        a, b = (torch.load(p, weights_only=True) for p in argv[1:])
        diffs = [d for key in KEYS for d in differences(a[key], b[key], key)]
        print("bit-identical" if not diffs else "differ: " + ", ".join(diffs[:10]), f"({', '.join(KEYS)})")
        return 1 if diffs else 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
