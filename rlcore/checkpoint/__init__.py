"""A run on disk: checkpoint files (:mod:`~rlcore.checkpoint.io`: atomic writes, code-free loads, RNG states) and
the run directory they live in (:mod:`~rlcore.checkpoint.run_files`: finding checkpoints, the config that made
them, rebuilding task and policy for ``play`` and ``export``). What a checkpoint holds for an exact resume is the
runner's :mod:`rlcore.runners.run_state`."""
