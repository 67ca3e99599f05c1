"""``fanout results BATCH_ID``: a batch's outcomes item by item (Map), task by task (Parallel) or
child by child (ledger), from a deployed stack (``--env ENV``, or ``--app PATH [--stack NAME]``
for a stack of your own app) or from what ``fanout run`` / ``fanout ledger`` saved locally
(``--local``). Read-only: GetItem, GetExecutionHistory, GetObject, Query (and DescribeStacks).
The command line over the Python API of ``fanout_kit.ops.results``: flags in, lines out."""

from __future__ import annotations

import sys
from typing import Any

from fanout_kit.shared.errors import CliError
from fanout_kit.ops.aws import Aws, OpsError, clear_errors, deployment_of, environment, find_deployment
from fanout_kit.ops.results import (
    WORKFLOWS,
    AwsSource,
    BatchResults,
    ResultsError,
    batch_folder,
    open_batch,
    open_local_batch,
    target_of,
    write_outcomes,
)


def _check_flags(args: Any) -> None:
    if args.local:
        extra = [flag for flag, value in (("--env", args.env), ("--app", args.app), ("--stack", args.stack),
                                          ("--endpoint-url", args.endpoint_url), ("--region", args.region)) if value]
        if extra:
            raise ResultsError(f"--local reads the batches fanout run / fanout ledger saved here: drop {', '.join(extra)}")
    if args.stack and not args.app:
        raise ResultsError(f"--stack {args.stack}: needs --app PATH (a stack of your own CDK app)")
    if args.app and args.env:
        raise ResultsError("--app and --env: pass one (--app for a stack of your own app, --env for this kit's app)")


def _deployed_stack_outputs(aws: Aws, stack: str, app: str) -> dict[str, str]:
    from botocore.exceptions import ClientError

    try:
        stacks = aws.client("cloudformation").describe_stacks(StackName=stack)["Stacks"]
    except ClientError as exc:
        error = exc.response.get("Error", {})
        if error.get("Code") == "ValidationError" and "does not exist" in error.get("Message", ""):
            raise OpsError(
                f"--app {app}: stack {stack} is not deployed in {aws.region}: deploy it (npx cdk deploy {stack}) "
                "or pass --region"
            ) from None
        raise
    return {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}


def find_batch(args: Any) -> tuple[BatchResults, str]:
    """(the batch, the command that lists it again) from the flags."""
    _check_flags(args)
    if args.local:
        return open_local_batch(args.batch_id, args.workflow), f"fanout results {args.batch_id} --local"
    try:
        with clear_errors(args.region, args.endpoint_url):  # (an unreachable AWS is a CliError here too)
            return _find_deployed(args)
    except CliError as exc:
        if not (batch_folder(args.batch_id) / "record.json").is_file():
            raise
        raise type(exc)(f"{exc} (a batch {args.batch_id} was run locally here: fanout results "
                        f"{args.batch_id} --local)", exc.code) from None


def _find_deployed(args: Any) -> tuple[BatchResults, str]:
    if args.app:
        from fanout_kit.local.app_source import load_app

        app, found = load_app(args.app, stack=args.stack, kind=args.workflow)
        aws = Aws(args.region or app.region, args.endpoint_url)
        deployment = deployment_of(None, found.kind, aws.region,
                                   _deployed_stack_outputs(aws, found.stack, args.app), stack_name=found.stack)
        targets = [target_of(deployment)]
        where = f"stack {found.stack} ({aws.region})"
        again = f"fanout results {args.batch_id} --app {args.app}" + (f" --stack {args.stack}" if args.stack else "")
    else:
        cfg = environment(args.env or "dev")
        aws = Aws(args.region or cfg.region, args.endpoint_url)
        workflows = [args.workflow] if args.workflow else list(WORKFLOWS)
        deployments = [d for w in workflows if (d := find_deployment(aws, cfg, w, missing_ok=not args.workflow))]
        if not deployments:
            raise OpsError(f"no workflow stack of {cfg.name} is deployed in {aws.region}: run npx cdk deploy -c env={cfg.name}")
        targets = [target_of(d) for d in deployments]
        where = f"{cfg.name} ({aws.region})"
        again = f"fanout results {args.batch_id} --env {cfg.name}"
    return open_batch(AwsSource(aws.client), targets, args.batch_id, where=where), again


def cmd_results(args: Any, out: Any) -> int:
    batch, _again = find_batch(args)
    record = batch.record
    data = sys.stdout
    notes = sys.stderr if args.format != "table" else data
    status = record.get("status")
    if args.format == "table":
        data.write(f"batch {batch.batch_id} ({batch.workflow}): {status}; results: {batch.location or 'none'}\n")
    for note in batch.notes:
        notes.write(f"note: {note}\n")
    shown, failed = write_outcomes(batch.outcomes(failed_only=args.failed), args.format, data)
    if args.format == "table":
        unit = {"parallel": "task(s)", "map": "item(s)", "ledger": "child(ren)"}[batch.workflow]
        data.write(f"{shown:,} {unit}{' that did not succeed' if args.failed else ''}; {failed:,} failed\n")
    data.flush()
    return 0
