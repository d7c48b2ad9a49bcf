"""Configuration: the typed configs and their checks, the one table of config names, resolution of names to
classes, the generated reference, and the command line's composition of ``conf/``.

- :mod:`~rlcore.config.schema`: a typed dataclass with a docstring per setting (the one home of every default);
- :mod:`~rlcore.config.registry`: names a config may use (``class_name: PPO``, ``extension=[rnd]``) -> what they build;
- :mod:`~rlcore.config.check`: a config checked against the schema before anything is built (one line per error);
- :mod:`~rlcore.config.resolve`: ``resolve_callable``, ``resolve_obs_groups`` and the other resolutions;
- :mod:`~rlcore.config.doc`: ``docs/config.md``, generated from the schema (``python -m rlcore.config.doc``);
- :mod:`~rlcore.config.cli`: where ``conf/`` is, composing it, ``key=value`` arguments, one-line user errors;
- :mod:`~rlcore.config.schema_nodes`: the typed configs registered as Hydra nodes.
"""
