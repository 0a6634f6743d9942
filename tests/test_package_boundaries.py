"""Which package may import which, read from the source with ``ast`` (every import statement, function-local ones
included), so that a boundary holds whether or not a test happens to run the import.

* ``odin_ns`` is the product and never imports the lab, ``odin_bench``, which measures it.
* The runtime and what it builds on (``runtime``, ``sync``, ``comm``, ``kernels``, ``schedule``, ``colmap``) need
  plain torch, numpy and scipy only: nerfstudio and gsplat stay in the layer that adapts splatfacto to them. That
  holds through the ``odin_ns`` modules they import too. An import under ``if TYPE_CHECKING:`` is for type checkers
  and never runs, so it does not count there.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
PRODUCT = "odin_ns"
LAB = "odin_bench"
FRAMEWORK_FREE = ("runtime", "sync", "comm", "kernels", "schedule", "colmap")
"""Subpackages of odin_ns that import neither nerfstudio nor gsplat, directly or through odin_ns modules."""
FRAMEWORKS = ("nerfstudio", "gsplat")


def module_files(package: str) -> Dict[str, Path]:
    """Dotted module name -> source file, for every module of ``package`` (a package is its ``__init__``)."""
    modules = {}
    for path in sorted((REPO_ROOT / package).rglob("*.py")):
        parts = path.relative_to(REPO_ROOT).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


PRODUCT_MODULES = module_files(PRODUCT)


def imported_names(module: str, path: Path, runtime_only: bool) -> Iterator[Tuple[str, int]]:
    """(dotted name, line) of what each import statement of ``module`` names: ``import a.b`` gives ``a.b``,
    ``from a import b`` gives ``a`` and ``a.b`` (b may be a module), relative imports resolved. ``runtime_only``
    leaves out the imports under ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    skipped = set()
    if runtime_only:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                skipped.update(id(inner) for statement in node.body for inner in ast.walk(statement))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            yield base, node.lineno
            for alias in node.names:
                yield f"{base}.{alias.name}", node.lineno


def top_level(name: str) -> str:
    return name.split(".")[0]


@lru_cache(maxsize=None)
def product_imports(module: str) -> Tuple[Tuple[str, int], ...]:
    """What ``module`` imports at run time, as (name, line)."""
    return tuple(imported_names(module, PRODUCT_MODULES[module], runtime_only=True))


def loaded_product_modules(name: str) -> List[str]:
    """The odin_ns modules importing ``name`` loads: the module itself, if it is one, and its packages' ``__init__``."""
    parts = name.split(".")
    return [".".join(parts[:end]) for end in range(1, len(parts) + 1) if ".".join(parts[:end]) in PRODUCT_MODULES]


def framework_import_chain(module: str) -> Optional[List[str]]:
    """The chain of imports from ``module`` through odin_ns modules to nerfstudio or gsplat, each step as
    ``importer:line -> name``, or None when none is reached."""
    how: Dict[str, Optional[Tuple[str, str]]] = {}
    """Module reached -> (the module whose import reached it, the step), None for those importing ``module`` loads."""
    queue: List[str] = []

    def reach(loaded: str, step: Optional[Tuple[str, str]]) -> None:
        if loaded not in how:
            how[loaded] = step
            queue.append(loaded)

    for loaded in loaded_product_modules(module):
        reach(loaded, None)
    while queue:
        current = queue.pop(0)
        for name, line in product_imports(current):
            step = (current, f"{current}:{line} -> {name}")
            if top_level(name) in FRAMEWORKS:
                chain = [step[1]]
                while how[step[0]] is not None:
                    step = how[step[0]]
                    chain.insert(0, step[1])
                return chain
            for loaded in loaded_product_modules(name):
                reach(loaded, step)
    return None


def test_the_product_never_imports_the_lab():
    offending = [f"{path.relative_to(REPO_ROOT)}:{line} imports {name}"
                 for module, path in PRODUCT_MODULES.items()
                 for name, line in imported_names(module, path, runtime_only=False) if top_level(name) == LAB]
    assert not offending, "\n".join(offending)


@pytest.mark.parametrize("subpackage", FRAMEWORK_FREE)
def test_the_runtime_layers_import_neither_nerfstudio_nor_gsplat(subpackage: str):
    package = f"{PRODUCT}.{subpackage}"
    modules = [module for module in PRODUCT_MODULES if module == package or module.startswith(f"{package}.")]
    assert modules, f"no modules under {PRODUCT}/{subpackage}"
    chains = {module: framework_import_chain(module) for module in modules}
    offending = [f"{module}: {' / '.join(chain)}" for module, chain in chains.items() if chain is not None]
    assert not offending, "\n".join(offending)


def test_the_import_scan_sees_function_local_relative_and_type_checking_imports(tmp_path: Path):
    """The scan itself: a function-local import counts, a relative one is resolved, and one under ``if
    TYPE_CHECKING:`` counts only where every import statement does."""
    source = tmp_path / "example.py"
    source.write_text("from typing import TYPE_CHECKING\n"
                      "if TYPE_CHECKING:\n    import gsplat\n"
                      "def render():\n    from .sibling import helper\n    import nerfstudio.cameras\n")
    runtime = {name for name, _ in imported_names("odin_ns.pkg.example", source, runtime_only=True)}
    assert {"odin_ns.pkg.sibling", "odin_ns.pkg.sibling.helper", "nerfstudio.cameras"} <= runtime
    assert "gsplat" not in runtime
    assert "gsplat" in {name for name, _ in imported_names("odin_ns.pkg.example", source, runtime_only=False)}


def test_the_product_command_line_offers_the_users_commands_and_the_lab_its_own():
    from odin_bench.cli import subcommands as lab_commands
    from odin_ns.cli import subcommands as product_commands

    assert set(product_commands()) == {"demo-scene", "plan", "export"}
    assert set(lab_commands()) == {"bench", "bench-report", "bench-kernels", "bench-presized", "timeline",
                                   "host-waits", "memory-soak", "simulate", "prediction-reach", "step-ops",
                                   "time-to-quality", "time-to-quality-report"}
