"""Trace-driven scaling model: measured unit logs replayed at world sizes not measured, over modelled links.

``links`` (alpha-beta collectives and link presets), ``measured`` (what the runs' logs say), ``windows`` (synthetic
overlap windows decided by the runtime's own admission code), ``replay`` (step time per mode), ``command``
(``odin-bench simulate``). docs/scaling.md describes the model and its assumptions. Nothing outside this package
imports it except ``odin_bench.cli``.
"""
