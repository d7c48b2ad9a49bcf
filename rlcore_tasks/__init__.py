"""rlcore's example tasks: the Unitree Go2 on MuJoCo (:mod:`rlcore_tasks.go2`) and classic control
(:mod:`rlcore_tasks.classic`).

A task package of its own kind: it imports ``rlcore`` (the env contract, the task protocol), rlcore never imports it.
Each task describes itself with a :class:`rlcore.env.task.TaskSpec` and is registered through the ``rlcore.tasks``
entry point in ``pyproject.toml``; a task of your own does the same in its own package.
"""
