"""Runners: rollout loop, logging, checkpoints, export."""

from rlcore.runners.distillation_runner import DistillationRunner
from rlcore.runners.on_policy_runner import OnPolicyRunner

__all__ = ["DistillationRunner", "OnPolicyRunner"]
