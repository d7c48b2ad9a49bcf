"""One PPO mini-batch step, rlcore's against the bare-PyTorch floor's, alternated in one process on the same data.

``bench/learner.py`` compares whole updates, each library in its own process; this asks a narrower question:
is rlcore's *code* per mini-batch step (``PPO.compute_loss`` + ``PPO._optimizer_step``: observation groups,
normalisers, distribution, clipped losses, KL, per-model gradient clipping, Adam) slower than the floor's
(``bench/learner.py``'s ``floor_step_fn`` maths: fresh MLPs of the same sizes, closed-form Gaussian, clipped
losses, Adam), or is the gap between the processes something else (shuffling gathers, the normaliser update,
memory)? Both run in the same process, on the same mini-batches of a real rlcore rollout of the case (zero-cost
env), alternating step by step, so the machine's slow spells hit both alike.

Run (from the repository root)::

    python bench/learner_step_ab.py                    # case mlp (4096 envs), 3 rounds of the 4 mini-batches
    python bench/learner_step_ab.py --case mlp_1024 --rounds 5
    python bench/learner_step_ab.py --tiny --threads 1  # smoke run

Last line: ``learner_step_ab: case=<c> rlcore_step=<s> floor_step=<s> ratio=<rlcore/floor>`` (medians, seconds).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import time

from _common import CASES, EPISODE_LENGTH, NUM_ACTIONS, case_settings, default_threads, floor_loss, make_runner


def main(argv: list[str] | None = None) -> dict[str, float]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--case", default="mlp", choices=[c for c in CASES if CASES[c]["model"] == "mlp"])
    p.add_argument("--rounds", type=int, default=3, help="passes over the rollout's mini-batches")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--tiny", action="store_true", help="smoke run: envs / 256")
    args = p.parse_args(argv)
    import torch
    import torch.nn as nn

    # learner.py's settings of the case (its defaults; --tiny as there)
    bench_args = argparse.Namespace(tiny=args.tiny, iterations=None, threads=args.threads or default_threads(),
                                    device="cpu", episode_length=EPISODE_LENGTH, compile=False)
    torch.set_num_threads(bench_args.threads)
    case = case_settings(args.case, bench_args)
    runner = make_runner("rlcore", case, bench_args)
    alg = runner.alg
    with contextlib.redirect_stdout(io.StringIO()):
        runner.learn(1, init_at_random_ep_len=True)  # a real iteration: warm-up rollout, update
        update, alg.update = alg.update, dict  # the next rollout (returns computed) stays in the storage
        runner.learn(1)
    alg.update = update
    batches = list(alg.storage.mini_batch_generator(alg.num_mini_batches, 1))
    with torch.no_grad():  # the floor's inputs: the same observations, concatenated and normalised once
        inputs = [(alg.actor.get_latent(b.observations), alg.critic.get_latent(b.observations)) for b in batches]

    def mlp(n_in: int, n_out: int) -> nn.Sequential:
        layers, d = [], n_in
        for h in case["hidden_dims"]:
            layers += [nn.Linear(d, h), nn.ELU()]
            d = h
        return nn.Sequential(*layers, nn.Linear(d, n_out))

    actor, critic = mlp(inputs[0][0].shape[1], NUM_ACTIONS), mlp(inputs[0][1].shape[1], 1)
    std = nn.Parameter(torch.ones(NUM_ACTIONS))
    optimizer = torch.optim.Adam([*actor.parameters(), *critic.parameters(), std], lr=1e-3)

    def floor_step(i: int) -> None:
        b, (x_a, x_c) = batches[i], inputs[i]
        loss = floor_loss(actor(x_a), std, b.actions, b.old_actions_log_prob.squeeze(-1),
                          b.advantages.squeeze(-1), critic(x_c).squeeze(-1), b.values.squeeze(-1),
                          b.returns.squeeze(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    def rlcore_step(i: int) -> None:
        loss, _ = alg.compute_loss(batches[i])
        alg._optimizer_step(loss)

    times: dict[str, list[float]] = {"rlcore": [], "floor": []}
    for r in range(args.rounds + 1):  # round 0 warms both up
        for i in range(len(batches)):
            order = (("rlcore", rlcore_step), ("floor", floor_step))
            for name, step in order if (r + i) % 2 == 0 else order[::-1]:
                t = time.perf_counter()
                step(i)
                if r > 0:
                    times[name].append(time.perf_counter() - t)
    a, b = statistics.median(times["rlcore"]), statistics.median(times["floor"])
    print(f"{case['num_envs']} envs, mini-batch {batches[0].actions.shape[0]}, {len(times['rlcore'])} steps each, "
          f"threads {torch.get_num_threads()}: rlcore {a:.4f} s, floor {b:.4f} s per step (medians)")
    print(f"learner_step_ab: case={args.case} rlcore_step={a:.4g} floor_step={b:.4g} ratio={a / b:.3f}")
    return {"rlcore_step": a, "floor_step": b, "ratio": a / b}


if __name__ == "__main__":
    main()
