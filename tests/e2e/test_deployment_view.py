"""The local engine's deployed view: after deploying a synthesized stack it resolves the template's
Outputs into the same ``fanout_kit.ops.aws.Deployment`` the ops CLI builds from DescribeStacks, and every
output names a resource the engine really created (the one the handlers are configured with)."""

from __future__ import annotations

import pytest

from fanout_kit.local.engine import LocalEngine
from fanout_kit.ops.aws import REQUIRED_OUTPUTS, Deployment


@pytest.mark.parametrize("workflow", ["parallel", "map", "ledger"])
def test_the_engine_resolves_every_output_of_the_template_to_a_local_resource(dev_app, workflow):
    template = dev_app.template(workflow)
    with LocalEngine(dev_app, workflows=(workflow,), sleep_retries=False, record_calls=False) as engine:
        d = engine.deployment(workflow)
        assert isinstance(d, Deployment)
        assert (d.env.name, d.workflow, d.stack_name, d.region) == (
            "dev", workflow, dev_app.workflow_stacks[workflow], dev_app.region)
        assert sorted(d.outputs) == sorted(template["Outputs"])
        assert all(isinstance(v, str) and v for v in d.outputs.values())
        # the status table the ops CLI reads is the one UpdateFinalStatus writes
        assert d.status_table == engine.stacks[workflow].setting("STATUS_TABLE_NAME")
        engine.dynamodb.describe_table(TableName=d.status_table)
        assert set(REQUIRED_OUTPUTS[workflow]) <= set(d.outputs)
        if workflow != "ledger":
            described = engine.sfn.describe_state_machine(stateMachineArn=d.state_machine_arn)
            assert described["stateMachineArn"] in engine.stacks[workflow].state_machines.values()
            engine.sqs.get_queue_attributes(QueueUrl=d.queue_url, AttributeNames=["QueueArn"])
        if workflow == "map":
            assert d.batch_bucket == engine.stacks[workflow].setting("BATCH_BUCKET_NAME")
            engine.client("s3").head_bucket(Bucket=d.batch_bucket)
        if workflow == "ledger":
            assert d.ledger_table == engine.stacks[workflow].setting("LEDGER_TABLE_NAME")
            engine.dynamodb.describe_table(TableName=d.ledger_table)
            engine.sqs.get_queue_attributes(QueueUrl=d.output("ChildQueueUrl"), AttributeNames=["QueueArn"])
            stream = engine.client("kinesis").describe_stream(StreamARN=d.output("ChildStreamArn"))
            assert stream["StreamDescription"]["StreamARN"] == d.output("ChildStreamArn")
        # the engine's lookups are the deployment's
        if workflow != "ledger":
            assert (engine.state_machine_arn(workflow), engine.queue_url(workflow), engine.table_name(workflow)) == (
                d.state_machine_arn, d.queue_url, d.status_table)

