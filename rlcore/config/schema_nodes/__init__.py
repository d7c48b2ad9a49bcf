"""Importing this package registers the typed configs' defaults with Hydra (``/schema/...`` nodes).

``conf/config.yaml`` lists it in ``hydra.searchpath`` (``pkg://rlcore.config.schema_nodes``), so Hydra imports it
while it composes ``conf/``, before it reads the ``- /schema/...`` entries of the files that extend the nodes:
the tree composes in any Hydra program (``rlcore.train``, ``hydra.compose`` in a script or a test) without an
import of rlcore first. The package holds no config files of its own.
"""

from rlcore.config.schema import store_defaults

store_defaults()
