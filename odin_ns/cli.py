"""``odin-ns``: the project's command line (demo scene, AOT plan, PLY export, benchmarks, profiler timelines).

Each subcommand is a dataclass with a ``main()`` method, defined next to the code it drives; this module only
names them.
"""

from __future__ import annotations

from typing import Dict, Type

import tyro


def subcommands() -> Dict[str, Type]:
    """Subcommand name -> command dataclass."""
    from odin_ns.benchmarks.bench import BenchCommand, BenchReportCommand
    from odin_ns.benchmarks.host_waits import HostWaitsCommand
    from odin_ns.benchmarks.kernels_bench import KernelsBenchCommand
    from odin_ns.benchmarks.memory_soak import MemorySoakCommand
    from odin_ns.benchmarks.prediction_reach import PredictionReachCommand
    from odin_ns.benchmarks.presized_bench import PresizedBenchCommand
    from odin_ns.benchmarks.step_ops import StepOpsCommand
    from odin_ns.benchmarks.timeline import TimelineCommand
    from odin_ns.data.datamanager import PlanCommand
    from odin_ns.data.demo_scene import DemoSceneCommand
    from odin_ns.export import ExportCommand
    from odin_ns.scaling.command import SimulateCommand

    return {"demo-scene": DemoSceneCommand, "plan": PlanCommand, "export": ExportCommand, "bench": BenchCommand,
            "bench-report": BenchReportCommand, "bench-kernels": KernelsBenchCommand,
            "bench-presized": PresizedBenchCommand, "timeline": TimelineCommand,
            "host-waits": HostWaitsCommand, "memory-soak": MemorySoakCommand, "simulate": SimulateCommand,
            "prediction-reach": PredictionReachCommand, "step-ops": StepOpsCommand}


def entrypoint() -> None:
    """Parse the command line and run the chosen subcommand."""
    command = tyro.extras.subcommand_cli_from_dict(subcommands())
    command.main()


if __name__ == "__main__":
    entrypoint()
