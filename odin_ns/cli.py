"""``odin-ns``: the user's command line (demo scene, AOT plan, PLY export).

Each subcommand is a dataclass with a ``main()`` method, defined next to the code it drives; this module only
names them. Benchmarks and profile analysis are the lab's (``odin-bench``, package ``odin_bench``).
"""

from __future__ import annotations

from typing import Dict, Type

import tyro


def subcommands() -> Dict[str, Type]:
    """Subcommand name -> command dataclass."""
    from odin_ns.data.datamanager import PlanCommand
    from odin_ns.data.demo_scene import DemoSceneCommand
    from odin_ns.export import ExportCommand

    return {"demo-scene": DemoSceneCommand, "plan": PlanCommand, "export": ExportCommand}


def entrypoint() -> None:
    """Parse the command line and run the chosen subcommand."""
    command = tyro.extras.subcommand_cli_from_dict(subcommands())
    command.main()


if __name__ == "__main__":
    entrypoint()
