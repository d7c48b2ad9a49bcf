"""What a training run writes while it runs: the console progress and metric bookkeeping
(:mod:`~rlcore.logging.logger`), the TensorBoard and wandb writers (:mod:`~rlcore.logging.log_writer`,
:mod:`~rlcore.logging.wandb_log_writer`) and the MP4 clips (:mod:`~rlcore.logging.video`).

Named for its concern; it does not shadow the standard library's ``logging`` (imports are absolute).
"""
