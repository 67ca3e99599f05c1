"""The ops CLI and the local engine see one deployment: the Deployment ``find_deployment`` reads
from the stack's outputs (DescribeStacks over HTTP) equals the one the engine resolved from the
synthesized template when it deployed the stack."""

from __future__ import annotations

from fanout_kit.ops.aws import Aws, environment, find_deployment


def test_find_deployment_reads_what_the_engine_resolved(deployment):
    engine = deployment.engine
    aws = Aws(engine.region, deployment.endpoint)
    found = find_deployment(aws, environment("dev"), "parallel")
    assert found == engine.deployment("parallel")
    assert "AlarmTopicArn" in found.outputs  # every output of the template, not only what the CLI reads


def test_find_deployment_of_the_map_workflow(map_deployment):
    engine = map_deployment.engine
    found = find_deployment(Aws(engine.region, map_deployment.endpoint), environment("dev"), "map")
    assert found == engine.deployment("map")
    assert found.batch_bucket == engine.bucket_name("map")
