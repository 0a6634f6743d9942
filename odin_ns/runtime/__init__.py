"""When units run: the Odin executor (overlap window, publication, validation), shadow views and per-unit records."""

from odin_ns.runtime.executor import DrainingBarrier, OdinRuntime, RuntimeConfig, StaleUnitError

__all__ = ["DrainingBarrier", "OdinRuntime", "RuntimeConfig", "StaleUnitError"]
