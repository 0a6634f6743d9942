"""When units run: the orchestrator (``executor``) over the exchange, the overlap window, publication and the
optimizer protocol, each in its own module; shadow views, replica checks and the unit records beside them."""

from odin_ns.runtime.config import MODES, Mode, RuntimeConfig
from odin_ns.runtime.executor import OdinRuntime, StaleUnitError

__all__ = ["MODES", "Mode", "OdinRuntime", "RuntimeConfig", "StaleUnitError"]
