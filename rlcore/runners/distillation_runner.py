"""DistillationRunner: the on-policy loop with a Distillation algorithm and a teacher loaded first."""

from __future__ import annotations

from rlcore.runners.on_policy_runner import OnPolicyRunner


class DistillationRunner(OnPolicyRunner):
    """Trains a student from a frozen teacher.

    Load the teacher before ``learn``: ``runner.load(ppo_checkpoint)`` puts the PPO actor's weights into
    the teacher (a distillation checkpoint resumes student, teacher and optimiser instead).
    """

    default_algorithm = "Distillation"

    def _check_ready(self) -> None:
        if not getattr(self.alg, "teacher_loaded", False):
            raise ValueError(
                "Distillation needs a trained teacher: call runner.load(<PPO checkpoint>) before learn() "
                "(command line: algorithm=distillation teacher=<path to model_<it>.pt>)."
            )
