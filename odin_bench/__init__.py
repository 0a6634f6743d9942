"""odin-bench: the lab around odin-ns: benchmarks, the scaling simulator and profile analysis.

It measures the product and never ships inside it: ``odin_bench`` imports ``odin_ns``, never the other way round
(tests/test_package_boundaries.py checks it).
"""
