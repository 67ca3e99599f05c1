"""The kit's layering, checked on the source: no import cycle, imports run one way, and every
module is loaded under exactly one name.

Layers, bottom up: fanout_runtime (the contract of the users' functions, standard library only) <
fanout_kit.shared (what the patterns share: the shared constructs, rules and handlers) <
fanout_kit.patterns (each pattern: its construct, its definition, its handlers; a pattern does not
import another) < fanout_kit (the package's own modules: the lazy exports) < fanout_kit.local and
fanout_kit.ops (the local engine; the operations on a deployed stack) < fanout_kit.cli and
fanout_kit.pytest_plugin (the command line; the tests' fixture). Nothing of the kit imports this
repository's app (stacks/, app.py, lambdas/), and the app imports only the kit's constructs layers.
The ops and the local engine return results and print nothing: the command line prints.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAMBDAS = ROOT / "lambdas"
# The layers: a module's layer is the longest prefix of its name listed here ("app" otherwise:
# this repository's app, stacks/ and lambdas/)
LAYERS = ("fanout_runtime", "fanout_kit.shared", "fanout_kit.patterns", "fanout_kit", "fanout_kit.local",
          "fanout_kit.ops", "fanout_kit.cli", "fanout_kit.pytest_plugin", "fanout_kit.__main__")
KIT = {"fanout_kit.shared", "fanout_kit.patterns", "fanout_kit"}
TOOLS = {"fanout_kit.local", "fanout_kit.ops", "fanout_kit.cli", "fanout_kit.pytest_plugin", "fanout_kit.__main__"}
# layer -> layers it must never import (at module level or inside a function)
FORBIDDEN = {
    "fanout_runtime": KIT | TOOLS | {"app"},
    "fanout_kit.shared": {"fanout_kit.patterns", "fanout_kit"} | TOOLS | {"app"},
    "fanout_kit.patterns": {"fanout_kit"} | TOOLS | {"app"},
    "fanout_kit": TOOLS | {"app"},
    "fanout_kit.local": {"fanout_kit.cli", "fanout_kit.pytest_plugin", "fanout_kit.__main__", "app"},
    "fanout_kit.ops": {"fanout_kit.cli", "fanout_kit.pytest_plugin", "fanout_kit.__main__", "app"},
    "fanout_kit.cli": {"app"},
    "fanout_kit.pytest_plugin": {"fanout_kit.__main__", "app"},
    "app": TOOLS,
}


def source_modules() -> dict[str, Path]:
    """Module name (as imported: this folder and lambdas/ are the import roots) -> file."""
    found: dict[str, Path] = {}
    for folder, root in ((ROOT / "fanout_kit", ROOT), (ROOT / "fanout_runtime", ROOT), (ROOT / "stacks", ROOT),
                         (LAMBDAS, LAMBDAS)):
        for path in sorted(folder.rglob("*.py")):
            found[".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")] = path
    found["app"] = ROOT / "app.py"
    return found


def imports(path: Path, module: str, top_level_only: bool) -> Iterator[str]:
    """Names of the modules ``module`` imports (relative imports resolved); with
    ``top_level_only``, only the statements that run at import time (not in functions, not under
    ``if TYPE_CHECKING``)."""
    tree = ast.parse(path.read_text())
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def walk(nodes: list[ast.stmt]) -> Iterator[ast.stmt]:
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and top_level_only:
                continue
            if isinstance(node, ast.If) and top_level_only and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            yield node
            for field in ("body", "orelse", "finalbody", "handlers"):
                children = getattr(node, field, None)
                if isinstance(children, list):
                    yield from walk([c for c in children if isinstance(c, ast.AST)])

    for node in walk(tree.body):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def graph(top_level_only: bool) -> dict[str, set[str]]:
    modules = source_modules()
    return {
        name: {dep for dep in imports(path, name, top_level_only) if dep in modules and dep != name}
        for name, path in modules.items()
    }


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in edges[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in edges:
        if node not in index:
            visit(node)
    return found


def layer(module: str) -> str:
    for name in sorted(LAYERS, key=len, reverse=True):
        if module == name or module.startswith(name + "."):
            return name
    return "app"


def pattern(module: str) -> str | None:
    """The pattern ``module`` belongs to (fanout_kit.patterns.<pattern>...), if any."""
    parts = module.split(".")
    return parts[2] if parts[:2] == ["fanout_kit", "patterns"] and len(parts) > 2 else None


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_among_the_kits_modules():
    edges = graph(top_level_only=True)
    assert len(edges) > 60  # every module of the layers and the handlers was read
    assert cycles(edges) == []


def test_each_layer_imports_only_the_layers_below_it():
    wrong = sorted(
        f"{module} imports {dep}"
        for module, deps in graph(top_level_only=False).items()
        for dep in deps
        if layer(dep) in FORBIDDEN.get(layer(module), set())
        or (pattern(module) and pattern(dep) and pattern(module) != pattern(dep))
    )
    assert wrong == []


def test_the_layer_check_sees_a_wrong_import():
    """The rules above can fail: an import of the command line from the ops, of another pattern
    from a pattern and of this app from the kit are each refused."""
    assert "fanout_kit.cli" in FORBIDDEN[layer("fanout_kit.ops.dlq")]
    assert layer("stacks.app_builder") in FORBIDDEN[layer("fanout_kit.local.engine")]
    assert pattern("fanout_kit.patterns.parallel.construct") != pattern("fanout_kit.patterns.distributed_map.manifest")
    assert layer("fanout_kit.patterns.parallel.construct") == "fanout_kit.patterns"


def test_every_module_is_loaded_under_one_name(tmp_path):
    """The CDK app, the command line and every handler loaded in one interpreter: no file is
    a module twice (e.g. a kit handler by its Handler's top-level name next to its module in the
    kit)."""
    from fanout_kit.shared.assets import KIT_HANDLERS

    handlers = ", ".join(repr(name) for name in [*KIT_HANDLERS.values(), "tasks.handler", "map_item_worker"])
    routed = ", ".join(repr(f"{name}.handler") for name in KIT_HANDLERS)
    program = f"""
import importlib, os, sys, collections
import stacks.app_builder, fanout_kit.cli.main, fanout_kit.local.engine, fanout_kit
from fanout_kit.local.moto_lambda import kit_module
for name in ({handlers},):
    importlib.import_module(name)
for handler in ({routed},):  # as the local engine's Lambda router runs the kit's functions
    kit_module(handler)
by_file = collections.defaultdict(set)
for name, module in list(sys.modules.items()):
    path = getattr(module, "__file__", None)
    path = path and os.path.realpath(path)
    if path and "{ROOT}" in path and "site-packages" not in path:
        by_file[path].add(name)
print(sorted((f, sorted(n)) for f, n in by_file.items() if len(n) > 1))
print(len(by_file))
"""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{ROOT}:{LAMBDAS}", "AWS_DEFAULT_REGION": "eu-west-1",
           "POWERTOOLS_TRACE_DISABLED": "true", "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    duplicates, count = out.stdout.strip().splitlines()
    assert int(count) > 60
    assert duplicates == "[]"


# (module, function) of fanout_kit.local and fanout_kit.ops that may write to the terminal
TERMINAL_WRITERS = {
    # a producer script of its own (python -m fanout_kit.local.ledger_producer, in
    # docs/patterns/completion-ledger.md): prints what it registered and sent
    ("fanout_kit.local.ledger_producer", "main"),
    # the sandbox's subprocess: flushes the handler's stdout/stderr (the invocation's log) before answering
    ("fanout_kit.local.sandbox_runner", "main"),
}


def terminal_writes(source: str) -> list[tuple[str, int, str]]:
    """(enclosing top-level function or "", line, what) for each print() call, each call of a
    ``.print`` method (a console passed in), each use of sys.stdout / sys.stderr and each import of
    rich (a console) in ``source``."""
    found: list[tuple[str, int, str]] = []

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
            found.append((function, node.lineno, "print()"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "print":
            found.append((function, node.lineno, ".print() (a console's)"))
        elif (isinstance(node, ast.Attribute) and node.attr in ("stdout", "stderr")
              and isinstance(node.value, ast.Name) and node.value.id == "sys"):
            found.append((function, node.lineno, f"sys.{node.attr}"))
        elif isinstance(node, ast.ImportFrom) and node.module == "sys" and {
                a.name for a in node.names} & {"stdout", "stderr"}:
            found.append((function, node.lineno, "from sys import stdout/stderr"))
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                name == "rich" or name.startswith("rich.")
                for name in ([a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""])):
            found.append((function, node.lineno, "import rich"))
        for child in ast.iter_child_nodes(node):
            visit(child, child.name if not function and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                           ast.ClassDef)) else function)

    visit(ast.parse(source), "")
    return found


def test_the_ops_and_the_local_engine_print_nothing():
    """fanout_kit.ops returns results (or raises CliError), fanout_kit.local returns its outcomes:
    neither prints, writes to sys.stdout / sys.stderr or opens a rich console; fanout_kit.cli prints."""
    wrong = sorted(
        f"{module}:{line} {what}" + (f" (in {function})" if function else "")
        for module, path in source_modules().items()
        if layer(module) in ("fanout_kit.ops", "fanout_kit.local")
        for function, line, what in terminal_writes(path.read_text())
        if (module, function) not in TERMINAL_WRITERS
    )
    assert wrong == []


def test_the_print_check_sees_a_print():
    source = "import sys\nfrom rich.console import Console\ndef f(out):\n    print(1)\n    sys.stdout.write('x')\n    out.print(2)\n"
    assert [(f, w) for f, _, w in terminal_writes(source)] == [
        ("", "import rich"), ("f", "print()"), ("f", "sys.stdout"), ("f", ".print() (a console's)")]
    assert terminal_writes("def f(out):\n    out.write('x')\n") == []  # a stream passed in is the caller's
