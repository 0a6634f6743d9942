"""``odin-bench``: the lab's command line (benchmarks, the scaling simulator, profile and host analysis).

Each subcommand is a dataclass with a ``main()`` method, defined next to the code it drives; this module only
names them. The user's commands (demo scene, plan, export) are ``odin-ns``'s.
"""

from __future__ import annotations

from typing import Dict, Type

import tyro


def subcommands() -> Dict[str, Type]:
    """Subcommand name -> command dataclass."""
    from odin_bench.bench import BenchCommand, BenchReportCommand
    from odin_bench.host_waits import HostWaitsCommand
    from odin_bench.kernels_bench import KernelsBenchCommand
    from odin_bench.memory_soak import MemorySoakCommand
    from odin_bench.prediction_reach import PredictionReachCommand
    from odin_bench.presized_bench import PresizedBenchCommand
    from odin_bench.scaling.command import SimulateCommand
    from odin_bench.step_ops import StepOpsCommand
    from odin_bench.time_to_quality import TimeToQualityCommand, TimeToQualityReportCommand
    from odin_bench.timeline import TimelineCommand

    return {"bench": BenchCommand, "bench-report": BenchReportCommand, "bench-kernels": KernelsBenchCommand,
            "bench-presized": PresizedBenchCommand, "timeline": TimelineCommand, "host-waits": HostWaitsCommand,
            "memory-soak": MemorySoakCommand, "simulate": SimulateCommand, "prediction-reach": PredictionReachCommand,
            "step-ops": StepOpsCommand, "time-to-quality": TimeToQualityCommand,
            "time-to-quality-report": TimeToQualityReportCommand}


def entrypoint() -> None:
    """Parse the command line and run the chosen subcommand."""
    command = tyro.extras.subcommand_cli_from_dict(subcommands())
    command.main()


if __name__ == "__main__":
    entrypoint()
