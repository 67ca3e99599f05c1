"""Lambda code assets that hold what their handlers import, and nothing else.

A function's asset is a staged directory laid out as Lambda's ``/var/task``: the handler's module
at the top, and every module of the kit it imports, transitively (``fanout_kit/__init__.py``,
``fanout_kit/_version.py``, the ``fanout_kit.shared`` and pattern modules it uses,
``fanout_runtime``), each at its import path. The closure is read from the source (``import``
statements, not executing anything); the standard library, boto3 (in the Lambda Python runtime)
and Powertools (its layer) are not copied. The directory's name is its content's hash, so the
asset hash is stable and parallel synths share it (the layer's asset is built the same way,
``fanout_kit.shared.layer``).

The kit's handlers live next to the construct that deploys them (``fanout_kit/patterns/<pattern>/
handlers/``, ``fanout_kit/shared/handlers/``); in the asset each is the top-level module its
function's ``Handler`` names (``prepare_map_batch.handler``), as Lambda imports it from
``/var/task``. ``fanout_kit/__init__.py`` and the packages' ``__init__`` files import nothing
eagerly, so ``import fanout_kit.shared.x`` in Lambda loads only files of the asset.
"""

from __future__ import annotations

import ast
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from functools import cache
from pathlib import Path

import fanout_runtime

_PACKAGE = Path(__file__).resolve().parents[1]  # fanout_kit/
# Where the kit's own import packages live (this repository, or site-packages)
KIT_ROOTS = {"fanout_kit": _PACKAGE.parent, "fanout_runtime": Path(fanout_runtime.__file__).resolve().parent.parent}
# The kit's handler modules: the module name its function's Handler names -> where it lives.
KIT_HANDLERS = {
    "forward_failed_items": "fanout_kit.patterns.distributed_map.handlers.forward_failed_items",
    "ledger_dlq_recorder": "fanout_kit.patterns.completion_ledger.handlers.ledger_dlq_recorder",
    "ledger_kinesis_consumer": "fanout_kit.patterns.completion_ledger.handlers.ledger_kinesis_consumer",
    "ledger_kinesis_failure_recorder": "fanout_kit.patterns.completion_ledger.handlers.ledger_kinesis_failure_recorder",
    "ledger_sqs_consumer": "fanout_kit.patterns.completion_ledger.handlers.ledger_sqs_consumer",
    "ledger_sweeper": "fanout_kit.patterns.completion_ledger.handlers.ledger_sweeper",
    "prepare_map_batch": "fanout_kit.patterns.distributed_map.handlers.prepare_map_batch",
    "record_execution_failure": "fanout_kit.shared.handlers.record_execution_failure",
    "retry_failed_items": "fanout_kit.patterns.distributed_map.handlers.retry_failed_items",
    "update_final_status": "fanout_kit.shared.handlers.update_final_status",
    "validate_input": "fanout_kit.patterns.parallel.handlers.validate_input",
}


def kit_handler_file(handler_module: str) -> Path:
    """The source file of the kit's handler module ``handler_module`` (a key of KIT_HANDLERS)."""
    return KIT_ROOTS["fanout_kit"].joinpath(*KIT_HANDLERS[handler_module].split(".")).with_suffix(".py")


def _imports(tree: ast.Module, module: str, is_package: bool) -> Iterator[str]:
    """The module names an ``import`` statement of ``tree`` may load (relative ones resolved), in
    functions too; not under ``if TYPE_CHECKING:`` (never run)."""
    package = module if is_package else module.rpartition(".")[0]

    def walk(nodes: Iterable[ast.AST]) -> Iterator[ast.AST]:
        for node in nodes:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                yield from walk(node.orelse)
                continue
            yield node
            yield from walk(ast.iter_child_nodes(node))

    for node in walk(tree.body):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names if alias.name != "*")


def _find(name: str, roots: Mapping[str, Path]) -> tuple[str, Path] | None:
    """(path in the asset, source file) of module ``name`` if it is one of ``roots``' modules."""
    root = roots.get(name.split(".")[0])
    if root is None:
        return None
    parts = name.split(".")
    for relative in (Path(*parts).with_suffix(".py"), Path(*parts, "__init__.py")):
        if (root / relative).is_file():
            return relative.as_posix(), root / relative
    return None


def module_closure(handler_modules: Iterable[str], handlers_dir: Path, roots: Mapping[str, Path] = KIT_ROOTS) -> dict[str, Path]:
    """Path in the asset -> source file: the handler modules (in ``handlers_dir``) and every module
    of ``roots`` (import name -> folder holding it) they import, with their parent packages."""
    handlers = list(handler_modules)
    search = {**roots, **{name.split(".")[0]: handlers_dir for name in handlers}}
    return _closure(handlers, search, required=handlers)


def _closure(pending: list[str], search: Mapping[str, Path], required: Iterable[str] = ()) -> dict[str, Path]:
    """Path in the asset -> source file of the modules ``pending`` names that ``search``'s roots
    hold, and of everything they import, with their parent packages (``required``: names that
    must be found)."""
    pending, handlers = list(pending), set(required)
    handlers_dir = ", ".join(sorted({str(search[name.split(".")[0]]) for name in handlers}))
    files: dict[str, Path] = {}
    seen: set[str] = set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        found = _find(name, search)
        if found is None:
            if name in handlers:
                raise FileNotFoundError(f"handler module {name!r} not found in {handlers_dir}")
            continue
        relative, source = found
        files[relative] = source
        parent = name.rpartition(".")[0]
        if parent:
            pending.append(parent)  # importing a.b.c runs a/__init__.py and a/b/__init__.py
        pending.extend(_imports(ast.parse(source.read_bytes(), str(source)), name, source.name == "__init__.py"))
    return dict(sorted(files.items()))


def staged_dir(prefix: str, files: Mapping[str, bytes]) -> Path:
    """A directory holding ``files`` (path in it -> content), built once per content: its name is
    the content's hash."""
    digest = hashlib.sha256(b"".join(name.encode() + b"\0" + body + b"\0" for name, body in sorted(files.items())))
    target = Path(tempfile.gettempdir()) / f"{prefix}-{digest.hexdigest()[:16]}"
    if not target.is_dir():
        staging = Path(tempfile.mkdtemp(prefix=f"{prefix}-"))
        for name, body in files.items():
            (staging / name).parent.mkdir(parents=True, exist_ok=True)
            (staging / name).write_bytes(body)
        try:
            os.rename(staging, target)
        except OSError:  # another process built it first: same content
            shutil.rmtree(staging, ignore_errors=True)
    return target


def code_asset_dir(handler_modules: Iterable[str], handlers_dir: Path, roots: Mapping[str, Path] = KIT_ROOTS,
                   prefix: str = "fanout-code") -> Path:
    """The staged code asset of functions running ``handler_modules`` (module_closure)."""
    closure = module_closure(handler_modules, handlers_dir, roots)
    return staged_dir(prefix, {name: source.read_bytes() for name, source in closure.items()})


def kit_handler_closure(handler_module: str) -> dict[str, Path]:
    """Path in the asset -> source file of the kit's function running ``handler_module`` (one of
    KIT_HANDLERS): its handler file at the top, under the name its Handler gives, and every module
    of the kit it imports (module_closure)."""
    if handler_module not in KIT_HANDLERS:
        raise ValueError(f"{handler_module!r} is not one of the kit's handlers ({', '.join(KIT_HANDLERS)}): "
                         "pass your function's own code asset (code=)")
    source = kit_handler_file(handler_module)
    tree = ast.parse(source.read_bytes(), str(source))
    imported = list(_imports(tree, KIT_HANDLERS[handler_module], is_package=False))
    return dict(sorted({f"{handler_module}.py": source, **_closure(imported, KIT_ROOTS)}.items()))


@cache
def kit_asset_dir(handler_module: str) -> Path:
    """The code asset of the kit's function running ``handler_module`` (one of KIT_HANDLERS)."""
    closure = kit_handler_closure(handler_module)
    return staged_dir("fanout-kit-code", {name: source.read_bytes() for name, source in closure.items()})
