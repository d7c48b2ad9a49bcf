"""The default ``task=go2`` PPO update against a bare-PyTorch floor of the same sizes, in one process, on real rollouts.

``bench/learner.py`` measures the learner at legged_gym's sizes on a zero-cost env; this asks the same question at
the sizes the Go2 task trains with (actor over ``policy`` and its history with a base-velocity estimator, critic
over ``policy`` and ``privileged``, 1024 envs x 24 steps, 4 epochs x 4 mini-batches), where the networks are small
and what surrounds the matrix products weighs more. A ``task=go2`` run (default config, no logger) collects real
rollouts; each iteration runs, on the same rollout and in alternating order, the floor (copies of the run's actor
head, estimator and critic networks; the inputs concatenated and normalised once, outside the timing; contiguous
mini-batches, no shuffle; Gaussian log-prob and entropy in closed form, clipped surrogate and value losses, the
estimator's squared error, backward, Adam) and rlcore's ``PPO.update`` (shuffle gathers, observation groups,
normalisers, distribution, KL and adaptive learning rate, per-model gradient clipping, Adam, normaliser update).
The floor does the same optimiser steps on the same batch sizes; it does not learn anything meaningful (its
copies start from the run's weights and drift), which does not change what a step costs.

Run (from the repository root)::

    python bench/go2_update.py                    # 2 warm-up + 8 measured iterations (~1 min on 2 cores)
    python bench/go2_update.py --profile          # then torch.profiler over one rlcore update, top 25 by self CPU
    python bench/go2_update.py --tiny --threads 1 # smoke run: 64 envs

Last line: ``go2_update: update=<s> floor=<s> ratio=<update/floor>`` (medians over the measured iterations).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import statistics
import time

from _common import floor_loss, go2_training


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--iterations", type=int, default=8, help="measured iterations (after --warmup)")
    p.add_argument("--warmup", type=int, default=2, help="iterations before measuring")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: all cores)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--profile", action="store_true", help="then profile one rlcore update (torch.profiler)")
    p.add_argument("--tiny", action="store_true", help="smoke run: 64 envs")
    p.add_argument("overrides", nargs="*", help="Hydra overrides of the task=go2 run")
    args = p.parse_args(argv)
    if args.iterations < 1 or args.warmup < 0:
        p.error("--iterations >= 1, --warmup >= 0")
    return args


class Floor:
    """The bare update of ``alg``'s sizes: copies of its networks, closed-form Gaussian, contiguous mini-batches."""

    def __init__(self, alg) -> None:
        import torch

        actor, critic = alg.actor, alg.critic
        if actor.is_recurrent or critic.is_recurrent or actor.estimator is None:
            raise SystemExit("error: go2_update needs the default feed-forward actor with its estimator")
        self.alg = alg
        self.head, self.estimator = copy.deepcopy(actor.mlp), copy.deepcopy(actor.estimator)
        self.critic = copy.deepcopy(critic.mlp)
        self.std = torch.ones(alg.storage.actions.shape[-1], requires_grad=True)
        params = [*self.head.parameters(), *self.estimator.parameters(), *self.critic.parameters(), self.std]
        self.optimizer = torch.optim.Adam(params, lr=alg.learning_rate)

    def inputs(self) -> dict:
        """The rollout in ``alg.storage`` flattened ``[B, ...]``: the models' normalised inputs and the targets."""
        import torch

        from rlcore.models.mlp_model import concat_groups

        s, actor, critic = self.alg.storage, self.alg.actor, self.alg.critic
        obs = s.observations.reshape(-1)
        with torch.no_grad():
            data = {"x_a": actor.get_latent(obs), "x_c": critic.get_latent(obs),
                    "target": concat_groups(obs, actor.estimator.target_groups)}
        per_step = {"actions": s.actions, "old_log_prob": s.actions_log_prob, "advantages": s.advantages,
                    "returns": s.returns, "old_values": s.values}  # [T, N, ...] -> [B]; [B, A] for actions
        return {**data, **{k: v.flatten(0, 1) if k == "actions" else v.flatten(0, 2) for k, v in per_step.items()}}

    def update(self, data: dict) -> None:
        import torch

        alg, n = self.alg, data["x_a"].shape[0]
        size = n // alg.num_mini_batches
        for _ in range(alg.num_learning_epochs):
            for i in range(alg.num_mini_batches):
                mb = {k: v[i * size:(i + 1) * size] for k, v in data.items()}
                estimate = self.estimator(mb["x_a"])
                mean = self.head(torch.cat([mb["x_a"], estimate.detach()], dim=-1))
                loss = floor_loss(mean, self.std, mb["actions"], mb["old_log_prob"], mb["advantages"],
                                  self.critic(mb["x_c"]).squeeze(-1), mb["old_values"], mb["returns"],
                                  alg.clip_param, alg.value_loss_coef, alg.entropy_coef)
                loss = loss + (estimate - mb["target"]).square().mean()
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                self.optimizer.step()


def main(argv: list[str] | None = None) -> dict[str, float]:
    import torch

    from rlcore.runners import OnPolicyRunner

    args = parse_args(argv)
    overrides = [*(["task.num_envs=64"] if args.tiny else []), *args.overrides]
    _, train_cfg, _, env = go2_training(args.seed, overrides, args.threads)
    runner = OnPolicyRunner(env, train_cfg, log_dir=None, device="cpu")
    alg, floor = runner.alg, None
    real_update = alg.update
    times: dict[str, list[float]] = {"update": [], "floor": []}

    def timed_update() -> dict[str, float]:
        nonlocal floor
        floor = floor or Floor(alg)
        data = floor.inputs()
        measured = timed_update.calls >= args.warmup
        order = ("floor", "update") if timed_update.calls % 2 == 0 else ("update", "floor")
        timed_update.calls += 1
        out = None
        for name in order:
            t = time.perf_counter()
            if name == "floor":
                floor.update(data)
            else:
                out = real_update()
            if measured:
                times[name].append(time.perf_counter() - t)
        return out

    timed_update.calls = 0
    alg.update = timed_update
    with contextlib.redirect_stdout(io.StringIO()):
        runner.learn(args.warmup + args.iterations, init_at_random_ep_len=True)
    u, f = statistics.median(times["update"]), statistics.median(times["floor"])
    batch = alg.storage.batch_size // alg.num_mini_batches
    print(f"task=go2, {env.num_envs} envs, {alg.num_learning_epochs} epochs x {alg.num_mini_batches} mini-batches of "
          f"{batch}, threads {torch.get_num_threads()}, {len(times['update'])} iterations: rlcore update {u:.3f} s, "
          f"floor {f:.3f} s (medians; alternating order)")
    if args.profile:
        from torch.profiler import profile

        tables = []

        def profiled_update() -> dict[str, float]:
            with profile() as prof:
                out = real_update()
            tables.append(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
            return out

        alg.update = profiled_update
        with contextlib.redirect_stdout(io.StringIO()):
            runner.learn(1)
        print(tables[0])
    print(f"go2_update: update={u:.4g} floor={f:.4g} ratio={u / f:.3f}")
    return {"update": u, "floor": f, "ratio": u / f}


if __name__ == "__main__":
    main()
