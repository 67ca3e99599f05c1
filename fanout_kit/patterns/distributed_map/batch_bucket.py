"""The S3 bucket of the Map workflow: item manifests in, ResultWriter output out."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_s3 as s3
from constructs import Construct

from fanout_kit.shared.settings import ResourceSettings
from fanout_kit.shared.functions import removal_policy

from fanout_kit.patterns.distributed_map.manifest import MANIFEST_PREFIX
from fanout_kit.patterns.distributed_map.result_files import RESULTS_PREFIX


class BatchDataBucket(Construct):
    """Encrypted (S3-managed), TLS only, no public access, versioned, server access logs to a
    sibling bucket; manifests and results expire after the environment's retention; emptied and
    deleted with the stack where the environment destroys its data."""

    def __init__(
        self, scope: Construct, construct_id: str, *, settings: ResourceSettings, retention_days: int
    ) -> None:
        super().__init__(scope, construct_id)
        days = Duration.days(retention_days)
        common = dict(
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            removal_policy=removal_policy(settings),
            # Where the environment destroys its data (dev), CDK's custom resource empties the
            # buckets (every object version) on stack deletion; otherwise CloudFormation cannot
            # delete a non-empty, versioned bucket and the stack deletion fails.
            auto_delete_objects=not settings.retain_data,
        )
        self.access_logs = s3.Bucket(
            self,
            "AccessLogs",
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(max(90, retention_days)))],
            **common,
        )
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            versioned=True,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix="batch-data/",
            lifecycle_rules=[
                s3.LifecycleRule(prefix=MANIFEST_PREFIX, expiration=days, noncurrent_version_expiration=Duration.days(1)),
                s3.LifecycleRule(prefix=RESULTS_PREFIX, expiration=days, noncurrent_version_expiration=Duration.days(1)),
                s3.LifecycleRule(abort_incomplete_multipart_upload_after=Duration.days(1)),
            ],
            **common,
        )
