"""Stack: the Parallel fan-out workflow of one environment."""

from __future__ import annotations

from constructs import Construct

from stacks.config import EnvironmentConfig
from stacks.constructs.functions import KitFunction
from stacks.workflow_stack import WorkflowStack
from statemachines.parallel_workflow import TaskBinding, build_parallel_workflow


class ParallelWorkflowStack(WorkflowStack):
    """Child task Lambdas run in a Parallel state; exhausted tasks go to the DLQ; the final status
    is written only when every task succeeded."""

    workflow = "parallel"

    def __init__(self, scope: Construct, construct_id: str, *, cfg: EnvironmentConfig, **kwargs) -> None:
        super().__init__(scope, construct_id, cfg=cfg, dlq_id="TaskDeadLetterQueue", **kwargs)
        self.validate_input = KitFunction(
            self,
            "ValidateInput",
            cfg=cfg,
            handler="validate_input.handler",
            description="Validates a batch's execution input; names every bad field",
            service="ValidateInput",
            environment={"TASK_NAMES": ",".join(cfg.task_names)},
            timeout_seconds=10,
        ).function
        self.task_functions = {
            spec.name: KitFunction(
                self,
                f"Task{spec.name}",
                cfg=cfg,
                handler=spec.handler,
                description=spec.description,
                service=spec.name,
            ).function
            for spec in cfg.tasks
        }
        definition = build_parallel_workflow(
            self.states_scope,
            cfg=cfg,
            bindings=[TaskBinding(spec, self.task_functions[spec.name]) for spec in cfg.tasks],
            validate_input=self.validate_input,
            update_final_status=self.update_final_status,
            dlq=self.dlq,
            status_table=self.status_table,
        )
        self.add_state_machine(
            definition,
            {"ValidateInput": self.validate_input, **self.task_functions, "UpdateFinalStatus": self.update_final_status},
            comment=f"Parallel fan-out of {len(cfg.tasks)} tasks ({cfg.name}); finalizes only if all succeed",
        )
