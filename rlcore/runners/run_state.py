"""Resumable run state: one home for everything a run carries across iterations, and one protocol to save it.

A checkpoint must let a run continue exactly: the next iterations' observations, rewards, actions and weights equal
the uninterrupted run's. What that takes falls in two kinds:

- **shared state**, equal on every rank: model weights, optimiser, learning rate, normaliser statistics (merged
  across ranks after each update), extension state, the iteration and the best evaluation so far. It is written
  once, under rsl_rl 5.x's keys (``actor_state_dict``, ``optimizer_state_dict``, ``iter``, ...), by the
  algorithm's ``save()`` and the runner.
- **rank state**, each rank's own: its generators, its env (episodes, curricula, robot pool, sensors), the
  observation its next rollout starts from, the models' recurrent memory, the episode bookkeeping of its logger and
  the algorithm's per-env counters (Distillation's steps since reset). Every stateful component declares it:

  ===============  ==============================================  ==============================
  component        saves with                                      restores with
  ===============  ==============================================  ==============================
  env              ``env.state_dict()`` (optional in the VecEnv    ``env.load_state_dict(state)``
                   contract: an env without it restarts its
                   episodes on resume)
  algorithm        ``alg.rank_state_dict()``                        ``alg.load_rank_state_dict()``
  logger           ``logger.state_dict()``                          ``logger.load_state_dict()``
  generators       :func:`~rlcore.checkpoint.io.get_rng_states`   ``set_rng_states``
  ===============  ==============================================  ==============================

The algorithm's rank state holds each extension's own (``Extension.rank_state_dict``: RND's reward normaliser keeps
a running discounted return per env). State that describes the env's episodes - the recurrent memory, the
algorithm's per-env counters, the logger's running returns and lengths - is restored only together with the env's
state: an env without ``load_state_dict`` starts fresh episodes on resume, and that state starts afresh with it.

The checkpoint holds rank 0's rank state at the top level (the keys of :data:`RANK_STATE_KEYS`, so a one-process
checkpoint reads as before) and, written by a distributed run, every other rank's in ``other_ranks`` (a list, rank
1 first), gathered to rank 0 when the checkpoint is written. A resume on the same number of ranks restores every
rank's own state. A rank the checkpoint has no state for (a run resumed on more ranks than it was written with, or
a checkpoint written by an interrupt, when the other ranks could not be asked) keeps its own freshly seeded
generators and env, and continues rank 0's curricula (``env.continue_curriculum``, where the env has it).

A counter added to any of these components must be saved by its component: ``tests/runners/test_resume_equality.py``
walks every attribute of a PPO and a Distillation run (1 and 2 ranks) and fails on any that a resume does not
reproduce.
"""

from __future__ import annotations

import torch.distributed as dist

RANK_STATE_KEYS = ("rng_states", "env_state", "last_observations", "hidden_states", "algorithm_state",
                   "logger_state")
"""The keys of one rank's state; rank 0's sit at the checkpoint's top level, the others' in ``other_ranks``."""


def gather_rank_states(state: dict, rank: int, world_size: int) -> list[dict] | None:
    """Collect every rank's ``state`` on rank 0 (a collective: every rank calls it at the same point).

    Returns the states of ranks ``1..world_size - 1`` on rank 0, None on the others (and with one rank).
    """
    if world_size <= 1 or not (dist.is_available() and dist.is_initialized()):
        return None
    out = [None] * world_size if rank == 0 else None
    dist.gather_object(state, out, dst=0)
    return out[1:] if rank == 0 else None


def rank_state_of(ckpt: dict, rank: int) -> dict | None:
    """Rank ``rank``'s state in a checkpoint (None when the checkpoint holds none for that rank)."""
    if rank == 0:
        return {k: ckpt[k] for k in RANK_STATE_KEYS if k in ckpt}
    others = ckpt.get("other_ranks") or []
    return others[rank - 1] if rank - 1 < len(others) and isinstance(others[rank - 1], dict) else None
