"""A run's nerfstudio ``config.yml`` read as plain data, for tools that inspect a run without rebuilding it.

nerfstudio writes the config with Python tags (``!!python/object:...``) and reads it back with ``yaml.Loader``, which
imports every class the file names and calls it. Reading it as plain data instead (paths as ``Path``, every other
object as the mapping of its fields) needs none of those classes to import cleanly and runs nothing a config file
names: what ``odin-ns export`` and ``odin-bench simulate`` need from a run directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


class _PlainLoader(yaml.SafeLoader):
    """yaml's safe loader, with nerfstudio's Python tags read as plain data."""


def _construct_path(loader: yaml.SafeLoader, _suffix: str, node: yaml.Node) -> Path:
    return Path(*loader.construct_sequence(node))


def _construct_plain(loader: yaml.SafeLoader, _suffix: str, node: yaml.Node):
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_scalar(node)


_PlainLoader.add_multi_constructor("tag:yaml.org,2002:python/object/apply:pathlib.", _construct_path)
_PlainLoader.add_multi_constructor("tag:yaml.org,2002:python/", _construct_plain)


def read_run_config(path: Path) -> Any:
    """The config file at ``path`` as plain data (a mapping for a nerfstudio run config); raises yaml.YAMLError,
    UnicodeDecodeError or OSError as reading it does."""
    return yaml.load(Path(path).read_text(), Loader=_PlainLoader)
