"""WandbLogWriter: Weights & Biases as a LogWriter (``"logger": "wandb"`` or ``{"class_name": "WandbLogWriter"}``)."""

from __future__ import annotations

import os
import pathlib

from rlcore.logging.log_writer import LogWriter
from rlcore.logging.logger import plain_config


class WandbLogWriter(LogWriter):
    """Log scalars, configs, checkpoints and videos to a wandb run (honours ``WANDB_MODE``, e.g. ``offline``).

    Args:
        log_dir: the run directory (wandb keeps its files under it; its name is the default run name).
        project_name: the wandb project.
        run_name: the wandb run name (default: the name of ``log_dir``).
        config: the train config to record at start (``store_config`` adds it later otherwise).

    The wandb entity is taken from ``WANDB_USERNAME`` when set (wandb's default entity otherwise).
    """

    def __init__(self, log_dir: str, project_name: str = "rlcore", run_name: str | None = None,
                 config: dict | None = None) -> None:
        try:
            import wandb
        except ModuleNotFoundError:
            raise ModuleNotFoundError("logger=wandb needs the wandb package: pip install 'rlcore[wandb]'.") from None
        self._wandb = wandb
        self.run = wandb.init(project=project_name, entity=os.environ.get("WANDB_USERNAME") or None,
                              name=run_name or os.path.basename(os.path.normpath(log_dir)), dir=log_dir,
                              config=config or {}, mode=os.environ.get("WANDB_MODE", "online"), reinit=True)
        self._videos: set[str] = set()
        self._own_dir = pathlib.Path(log_dir, "wandb").resolve()  # wandb's copies of uploaded media live here

    def add_scalar(self, tag: str, scalar_value: float, global_step: int | None = None, walltime: float | None = None,
                   new_style: bool = False) -> None:
        """Log one scalar (``walltime`` and ``new_style``, TensorBoard's arguments, are ignored)."""
        self.run.log({tag: scalar_value}, step=global_step)

    def add_scalars_at(self, scalars: dict[str, float], global_step: int) -> None:
        """Several scalars of one iteration in a single wandb record."""
        self.run.log(dict(scalars), step=global_step)

    def store_config(self, env_cfg: dict | object, train_cfg: dict) -> None:
        env = env_cfg.to_dict() if hasattr(env_cfg, "to_dict") else env_cfg  # Isaac Lab configclass
        self.run.config.update({"train_cfg": plain_config(train_cfg), "env_cfg": plain_config(env)},
                               allow_val_change=True)

    def save_model(self, model_path: str, it: int) -> None:
        self._wandb.save(model_path, base_path=os.path.dirname(model_path), policy="now")

    def save_file(self, path: str) -> None:
        self._wandb.save(path, base_path=os.path.dirname(path), policy="now")

    def save_video(self, video: pathlib.Path, it: int) -> None:
        if self._own_dir in video.resolve().parents:  # wandb's own copy of a video uploaded before
            return
        if video.name not in self._videos:  # each file once
            self.run.log({"video": self._wandb.Video(str(video), format="mp4")}, step=it)
            self._videos.add(video.name)

    def stop(self) -> None:
        self.run.finish()


__all__ = ["WandbLogWriter"]
