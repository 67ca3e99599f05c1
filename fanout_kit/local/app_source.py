"""Any CDK app as the local engine's input: ``fanout run INPUT --app PATH [--stack NAME]``.

PATH is a CDK app directory (its ``cdk.json``) or a synthesized cloud assembly (a folder with
``manifest.json``, what ``cdk synth`` writes to ``cdk.out``). An app directory is synthesized
the way the CDK CLI runs an app (``cdk synth`` without the Node CLI): its ``cdk.json`` "app"
command in a shell, in the app directory, with ``CDK_OUTDIR`` (where to write the assembly) and
``CDK_CONTEXT_JSON`` (cdk.json's ``context`` and ``cdk.context.json``, as the CLI passes them);
nothing else of the caller's settings reaches the templates.

The workflows are found from the assembly: each construct of the kit records the node metadata
entry ``fanout-kit:workflow`` (``fanout_kit/shared/discovery.py``) with its kind and its outputs' values
as CloudFormation intrinsics, resolved by the engine like the template's own Outputs. One
workflow of the asked kind in one stack is chosen, or one clear line names the choices.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fanout_kit.shared.errors import CliError
from fanout_kit.local.template import EXTERNAL_APP, SynthesizedApp
from fanout_kit.shared.discovery import WORKFLOW_METADATA

DEFAULT_REGION = "us-east-1"  # an environment-agnostic stack with no AWS_REGION set
SYNTH_TIMEOUT_SECONDS = 600


@dataclass(frozen=True)
class FoundWorkflow:
    stack: str  # stack name
    path: str  # construct path, e.g. /SignupFanOut/Signup
    kind: str  # parallel, map or ledger
    outputs: dict[str, Any]  # output name -> value (intrinsics)
    logical_ids: frozenset[str] = frozenset()  # of the resources under the construct


class AppSourceError(CliError):
    """A problem with --app / --stack / --workflow: one line, exit code 2."""


def add_app_options(parser: Any) -> None:
    """--app and --stack of fanout run / ledger / iam-report."""
    parser.add_argument(
        "--app", metavar="PATH",
        help="your own CDK app: its folder (with cdk.json; synthesized by its app command) or a "
        "synthesized cloud assembly (cdk.out); the workflow is found in its stacks (default: this "
        "repository's app and cdk.json's --env)",
    )
    parser.add_argument("--stack", metavar="NAME", help="with --app: the stack holding the workflow, when several do")


def read_cdk_json(app_dir: Path) -> dict[str, Any]:
    path = app_dir / "cdk.json"
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise AppSourceError(f"--app {app_dir}: cannot read cdk.json ({exc.strerror or exc})") from None
    except json.JSONDecodeError as exc:
        raise AppSourceError(f"--app {app_dir}: cdk.json is not valid JSON: {exc.msg} (line {exc.lineno})") from None
    if not isinstance(data, dict) or not isinstance(data.get("app"), str) or not data["app"].strip():
        raise AppSourceError(f'--app {app_dir}: cdk.json has no "app" command (e.g. "app": "python3 app.py")')
    return data


def app_context(app_dir: Path, cdk_json: Mapping[str, Any]) -> dict[str, Any]:
    """The context the CDK CLI gives the app: cdk.context.json, then cdk.json's context."""
    context: dict[str, Any] = {}
    cached = app_dir / "cdk.context.json"
    if cached.is_file():
        try:
            context.update(json.loads(cached.read_text()))
        except json.JSONDecodeError as exc:
            raise AppSourceError(f"--app {app_dir}: cdk.context.json is not valid JSON: {exc.msg}") from None
    context.update(cdk_json.get("context") or {})
    return context


def synth_app(app_dir: str | Path, outdir: str | Path, env: Mapping[str, str] | None = None) -> Path:
    """Run the app's ``cdk.json`` command with CDK_OUTDIR=outdir; returns the assembly folder."""
    app_dir = Path(app_dir).resolve()
    outdir = Path(outdir).resolve()
    cdk_json = read_cdk_json(app_dir)
    run_env = dict(os.environ if env is None else env)
    run_env.update({"CDK_OUTDIR": str(outdir), "CDK_CONTEXT_JSON": json.dumps(app_context(app_dir, cdk_json))})
    try:
        done = subprocess.run(
            cdk_json["app"], shell=True, cwd=app_dir, env=run_env, capture_output=True, text=True,
            timeout=SYNTH_TIMEOUT_SECONDS,
        )
    except subprocess.TimeoutExpired:
        raise AppSourceError(f"--app {app_dir}: synth ({cdk_json['app']}) ran over {SYNTH_TIMEOUT_SECONDS} s") from None
    if done.returncode != 0:
        last = [line for line in (done.stderr or done.stdout).strip().splitlines() if line.strip()][-1:] or ["?"]
        raise AppSourceError(
            f"--app {app_dir}: synth failed ({cdk_json['app']!r} exit {done.returncode}): {last[0].strip()}"
        )
    if not (outdir / "manifest.json").is_file():
        raise AppSourceError(f"--app {app_dir}: {cdk_json['app']!r} wrote no cloud assembly (does it call app.synth()?)")
    return outdir


def find_workflows(assembly: str | Path) -> tuple[list[FoundWorkflow], dict[str, dict[str, Any]], dict[str, str]]:
    """(the kit's workflows, templates by stack name, region by stack name) of a cloud assembly."""
    folder = Path(assembly)
    manifest = json.loads((folder / "manifest.json").read_text())
    found: list[FoundWorkflow] = []
    templates: dict[str, dict[str, Any]] = {}
    regions: dict[str, str] = {}
    for artifact_id, artifact in manifest.get("artifacts", {}).items():
        if artifact.get("type") != "aws:cloudformation:stack":
            continue
        props = artifact.get("properties", {})
        stack = props.get("stackName", artifact_id)
        templates[stack] = json.loads((folder / props["templateFile"]).read_text())
        region = (artifact.get("environment") or "").rsplit("/", 1)[-1]
        regions[stack] = region if region and region != "unknown-region" else ""
        metadata = dict(artifact.get("metadata") or {})
        if artifact.get("additionalMetadataFile"):  # newer CDK versions write it beside the template
            metadata.update(json.loads((folder / artifact["additionalMetadataFile"]).read_text()))
        logical_ids = {  # construct path -> logical id of its resource (CDK's aws:cdk:logicalId entries)
            path: entry["data"] for path, entries in metadata.items() for entry in entries
            if entry.get("type") == "aws:cdk:logicalId" and isinstance(entry.get("data"), str)
        }
        for path, entries in metadata.items():
            for entry in entries:
                if entry.get("type") == WORKFLOW_METADATA and isinstance(entry.get("data"), dict):
                    data = entry["data"]
                    under = frozenset(lid for p, lid in logical_ids.items() if p.startswith(path.rstrip("/") + "/"))
                    found.append(FoundWorkflow(stack, path, data.get("kind"), dict(data.get("outputs") or {}), under))
    return found, templates, regions


def choose(found: list[FoundWorkflow], stacks: list[str], *, stack: str | None, kind: str | None,
           where: str) -> FoundWorkflow:
    """The one workflow --stack / --workflow designate, or a one-line AppSourceError."""
    if stack is not None and stack not in stacks:
        raise AppSourceError(f"--stack {stack}: no such stack in {where} (stacks: {', '.join(sorted(stacks)) or 'none'})")
    candidates = [w for w in found if stack is None or w.stack == stack]
    if not candidates:
        raise AppSourceError(
            f"{where}: no workflow of the fan-out kit in {'stack ' + stack if stack else 'any stack'} "
            "(ParallelFanOut, DistributedMapFanOut or CompletionLedger, from fanout-kit 0.14 or later)"
        )
    if kind is not None:
        of_kind = [w for w in candidates if w.kind == kind]
        if not of_kind:
            have = ", ".join(sorted({f"{w.kind} ({w.stack})" for w in candidates}))
            raise AppSourceError(f"--workflow {kind}: {where} has no {kind} workflow{' in ' + stack if stack else ''}; it has: {have}")
        candidates = of_kind
    if len({w.stack for w in candidates}) > 1:
        listed = ", ".join(f"{w.stack} ({w.kind})" for w in candidates)
        raise AppSourceError(f"{where}: several stacks hold a workflow: {listed}; pass --stack NAME")
    if len(candidates) > 1:
        listed = ", ".join(f"{w.path} ({w.kind})" for w in candidates)
        raise AppSourceError(f"{where}: stack {candidates[0].stack} holds several workflows: {listed}; pass --workflow "
                             "parallel, map or ledger")
    return candidates[0]


def region_for(stack_region: str) -> str:
    return stack_region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or DEFAULT_REGION


def _assembly(path: str | Path, outdir: str | Path | None) -> Path:
    """The cloud assembly of the app at ``path`` (its folder, synthesized by its own app command into
    ``outdir`` or a temporary folder removed at exit; or an assembly already)."""
    folder = Path(path).resolve()  # the functions' code assets are found from it, from any folder
    if (folder / "manifest.json").is_file():
        return folder
    if (folder / "cdk.json").is_file():
        if outdir is None:
            import atexit

            outdir = tempfile.mkdtemp(prefix="fanout-synth-")
            atexit.register(shutil.rmtree, outdir, True)
        return Path(synth_app(folder, outdir))
    if not folder.is_dir():
        raise AppSourceError(f"--app {path}: no such directory")
    raise AppSourceError(
        f"--app {path}: neither a CDK app (cdk.json) nor a cloud assembly (manifest.json); pass your app's folder"
    )


def _app_for(assembly: Path, chosen: FoundWorkflow, templates: dict[str, dict[str, Any]],
             regions: dict[str, str]) -> SynthesizedApp:
    return SynthesizedApp(
        env_name=EXTERNAL_APP,
        outdir=Path(assembly),
        templates=templates,
        workflow_stacks={chosen.kind: chosen.stack},
        region=region_for(regions.get(chosen.stack, "")),
        workflow_outputs={chosen.kind: chosen.outputs},
        workflow_scopes={chosen.kind: chosen.logical_ids},
    )


def load_app(path: str | Path, *, stack: str | None = None, kind: str | None = None,
             outdir: str | Path | None = None) -> tuple[SynthesizedApp, FoundWorkflow]:
    """The app at ``path`` (CDK app directory or cloud assembly), synthesized if needed (into
    ``outdir``, or a temporary folder removed at exit), with the chosen workflow."""
    assembly = _assembly(path, outdir)
    found, templates, regions = find_workflows(assembly)
    chosen = choose(found, list(templates), stack=stack, kind=kind, where=f"--app {path}")
    return _app_for(assembly, chosen, templates, regions), chosen


def load_workflows(path: str | Path, *, stack: str | None = None,
                   outdir: str | Path | None = None) -> list[tuple[SynthesizedApp, FoundWorkflow]]:
    """Every workflow of the kit in one stack of the app at ``path`` (``--stack``, or the one stack
    that holds any), each with its engine view, in template order."""
    assembly = _assembly(path, outdir)
    found, templates, regions = find_workflows(assembly)
    candidates = [w for w in found if stack is None or w.stack == stack]
    if (stack is not None and stack not in templates) or len({w.stack for w in candidates}) != 1:
        choose(found, list(templates), stack=stack, kind=None, where=f"--app {path}")  # its one-line error
    target = candidates[0].stack
    return [(_app_for(assembly, w, templates, regions), w) for w in found if w.stack == target]
