"""Builds the CDK app of one environment: used by app.py (the cdk CLI), the tests and the local
engine, so all three synthesize exactly the same templates."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import App, Environment, Tags, Validations
from cdk_nag import AwsSolutionsChecks


from stacks.completion_ledger_stack import CompletionLedgerStack
from stacks.config import EnvironmentConfig, load_environment, read_cdk_context, stack_names
from stacks.map_workflow_stack import MapWorkflowStack
from stacks.parallel_workflow_stack import ParallelWorkflowStack


# workflow -> (stack, what it is); the names come from stacks.config.stack_names
STACKS: dict[str, tuple[type, str]] = {
    "parallel": (ParallelWorkflowStack, "Parallel workflow"),
    "map": (MapWorkflowStack, "Distributed Map workflow"),
    "ledger": (CompletionLedgerStack, "completion ledger for SQS/Kinesis consumers"),
}


def build_app(
    env_name: str | None = None, *, outdir: str | None = None, context: Mapping[str, Any] | None = None
) -> tuple[App, EnvironmentConfig, dict[str, Any]]:
    """Returns (app, config, stacks by workflow name). ``env_name`` None reads ``-c env=NAME``."""
    base_context = dict(context or read_cdk_context())
    # No CDKMetadata resource (as cdk.json's versionReporting: false does for the CLI), so the
    # templates are the same whether synthesized by `cdk synth`, the tests or the local engine.
    kwargs: dict[str, Any] = {"context": base_context, "analytics_reporting": False}
    if outdir:
        kwargs["outdir"] = outdir
    app = App(**kwargs)
    name = env_name or app.node.try_get_context("env")
    cfg = load_environment(base_context, name)
    env = Environment(account=cfg.account, region=cfg.region)
    names = stack_names(cfg)
    stacks = {
        workflow: stack_class(
            app,
            names[workflow],
            cfg=cfg,
            env=env,
            description=f"Fan-out/fan-in kit: {what} ({cfg.name})",
        )
        for workflow, (stack_class, what) in STACKS.items()
    }
    for stack in stacks.values():
        Tags.of(stack).add("project", "fanout-kit")
        Tags.of(stack).add("environment", cfg.name)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))
    return app, cfg, stacks
