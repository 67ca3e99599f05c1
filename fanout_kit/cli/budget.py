"""The payload budget of each synthesized workflow: every state's worst-case size against AWS's
262,144 bytes (``fanout_kit/shared/payload_budget.py``), from the caps in ``fanout_kit.shared.limits``.

    .venv/bin/python -m fanout_kit.cli.budget            # dev and prod: each workflow's largest states
    .venv/bin/python -m fanout_kit.cli.budget prod       # one environment

Exit code 0 if every state fits, 1 if one can exceed the limit (it is named).
"""

from __future__ import annotations

import sys
from typing import Any

from fanout_kit.local.template import SynthesizedApp, resources_of_type, state_machine_definitions
from fanout_kit.shared.limits import MAP_INPUT_MAX_BYTES, PARALLEL_INPUT_MAX_BYTES, STATE_PAYLOAD_LIMIT_BYTES
from fanout_kit.shared.payload_budget import Budget, Leaf, PayloadBudgetError, kit_function_outputs, payload_budget, report_lines

INPUT_CAPS = {"parallel": PARALLEL_INPUT_MAX_BYTES, "map": MAP_INPUT_MAX_BYTES}


def function_setting(template: dict[str, Any], name: str) -> str | None:
    """An environment variable of the template's functions (the first that has it)."""
    for res in resources_of_type(template, "AWS::Lambda::Function").values():
        variables = res["Properties"].get("Environment", {}).get("Variables", {})
        if name in variables:
            return variables[name]
    return None


def workflow_budget(app: SynthesizedApp, workflow: str) -> Budget:
    """The workflow's budget (``budget.sizes``); PayloadBudgetError if a state can be over."""
    template = app.template(workflow)
    (definition,) = state_machine_definitions(template, app.region).values()
    item_bytes = function_setting(template, "MAX_ITEM_BYTES")  # PrepareBatch refuses larger items
    cap = INPUT_CAPS[workflow]
    budget = Budget(
        execution_input=Leaf(cap),
        function_output=kit_function_outputs(input_cap=cap),
        map_item_bytes=int(item_bytes) if item_bytes else None,
    )
    return payload_budget(definition, budget)


def largest_cap(app: SynthesizedApp, workflow: str) -> int:
    """The largest input cap with which every state of the workflow still fits (bisection)."""
    template = app.template(workflow)
    (definition,) = state_machine_definitions(template, app.region).values()
    item_bytes = function_setting(template, "MAX_ITEM_BYTES")

    def fits(cap: int) -> bool:
        budget = Budget(Leaf(cap), kit_function_outputs(input_cap=cap), int(item_bytes) if item_bytes else None)
        try:
            payload_budget(definition, budget)
        except PayloadBudgetError:
            return False
        return True

    low, high = 0, STATE_PAYLOAD_LIMIT_BYTES
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if fits(middle) else (low, middle - 1)
    return low


def main(argv: list[str] | None = None) -> int:
    from fanout_kit.shared.jsii_node import use_venv_node

    use_venv_node()
    from fanout_kit.local.template import synthesize

    failed = False
    for env_name in (argv if argv is not None else sys.argv[1:]) or ["dev", "prod"]:
        app = synthesize(env_name)
        for workflow in INPUT_CAPS:
            print(f"{env_name} {workflow} (input cap {INPUT_CAPS[workflow]:,} bytes):")
            try:
                budget = workflow_budget(app, workflow)
            except PayloadBudgetError as exc:
                print(f"  OVER: {exc}")
                failed = True
                continue
            for line in report_lines(budget):
                print(f"  {line}")
            print(f"  largest input cap that fits: {largest_cap(app, workflow):,} bytes")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
