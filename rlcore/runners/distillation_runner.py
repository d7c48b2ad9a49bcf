"""DistillationRunner: the on-policy loop with a Distillation algorithm and a teacher loaded first."""

from __future__ import annotations

from rlcore.algorithms.distillation import is_ppo_checkpoint
from rlcore.errors import ConfigError
from rlcore.runners.on_policy_runner import OnPolicyRunner


class DistillationRunner(OnPolicyRunner):
    """Trains a student from a frozen teacher.

    Load the teacher before ``learn``: ``runner.load(ppo_checkpoint)`` puts the PPO actor's weights into
    the teacher (a distillation checkpoint resumes student, teacher and optimiser instead). The teacher's
    observation groups must be the checkpoint's actor groups, by name and in order: groups of equal sizes
    in another order would load without a shape error and feed the teacher the wrong inputs.
    """

    default_algorithm = "Distillation"

    def _check_ready(self) -> None:
        if not getattr(self.alg, "teacher_loaded", False):
            raise ConfigError(
                "Distillation needs a trained teacher: call runner.load(<PPO checkpoint>) before learn() "
                "(command line: algorithm=distillation teacher=<path to model_<it>.pt>)."
            )

    def _loaded_weights_only(self, ckpt: dict) -> None:
        """A PPO teacher was loaded: the env continues the curricula where the teacher's run left them (its saved
        ``env_state``; envs with ``continue_curriculum``, e.g. Go2's domain randomisation), so the student learns on
        the robots the teacher ended on rather than on the mild start of a fresh curriculum."""
        state = ckpt.get("env_state")
        continue_curriculum = getattr(self.env, "continue_curriculum", None)
        if not is_ppo_checkpoint(ckpt) or not isinstance(state, dict) or not callable(continue_curriculum):
            return
        continued = continue_curriculum(state)
        progress = getattr(self.env, "randomization_progress", None)
        if continued and self.is_main and callable(progress):
            print(f"[rlcore] the env continues the teacher's curriculum (randomization progress {progress():.2f})")

    def _check_compatible(self, ckpt: dict, path: str) -> None:
        super()._check_compatible(ckpt, path)
        is_ppo = is_ppo_checkpoint(ckpt)
        saved = checkpoint_obs_groups(ckpt).get("actor" if is_ppo else "teacher")
        own = (self.cfg.get("obs_groups") or {}).get("teacher")
        if saved is None or own is None:  # e.g. a checkpoint written by rsl_rl: nothing to compare
            return
        if list(saved) != list(own):
            source = "its PPO actor" if is_ppo else "its teacher"
            raise ConfigError(f"Checkpoint '{path}': {source} was trained on observation groups {list(saved)}, but "
                             f"obs_groups['teacher'] is {list(own)}; set obs_groups['teacher'] to {list(saved)}.")


def checkpoint_obs_groups(ckpt: dict) -> dict:
    """The resolved ``obs_groups`` a checkpoint was written with (``{}`` when it does not say)."""
    groups = ckpt.get("obs_groups")
    if not isinstance(groups, dict):
        groups = (ckpt.get("train_cfg") or {}).get("obs_groups")
    return groups if isinstance(groups, dict) else {}
