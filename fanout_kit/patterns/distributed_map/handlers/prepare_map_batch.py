"""PrepareBatch: first state of the Map workflow. Validates the input; streams the manifest and
checks every item (a JSON object of at most MAX_ITEM_BYTES) in bounded memory; writes inline
items to the batch data bucket as a JSON manifest. Any problem fails the execution with
InvalidInput / InvalidManifest, naming the item's index, before any child runs.

It returns the manifest's ``versionId``: the version of the object whose bytes it read (or wrote).
The Distributed Map's ItemReader reads exactly that version, so a manifest replaced after it was
checked (and counted) cannot change the items the map run runs. The bucket must be versioned: an
object without a version id (an unversioned bucket, or the "null" version of one whose versioning
was suspended, which a new upload replaces) is refused with InvalidManifest."""

import functools
import json
import os
from collections.abc import Iterator
from typing import Any

import boto3
from aws_lambda_powertools.utilities.typing import LambdaContext

from fanout_runtime.errors import InvalidInput
from fanout_kit.patterns.distributed_map.manifest import (
    MAX_MANIFEST_BYTES,
    READ_CHUNK_BYTES,
    InvalidManifest,
    count_items,
    iter_manifest,
    too_large,
    validate_map_input,
)
from fanout_kit.shared.observability import logger, tracer


@functools.cache
def _s3() -> Any:
    return boto3.client("s3")


def _pinned_version(response: dict[str, Any], bucket: str, where: str) -> str:
    version = response.get("VersionId")
    if not version or version == "null":
        raise InvalidManifest(
            f"{where}: has no version id: the workflow pins the manifest it "
            f"checked by its version, so s3://{bucket} must have versioning enabled"
        )
    return version


def _manifest_chunks(bucket: str, key: str, where: str) -> tuple[str, Iterator[bytes]]:
    """(the version read, its bytes in chunks)."""
    s3 = _s3()
    try:
        response = s3.get_object(Bucket=bucket, Key=key)
    except s3.exceptions.NoSuchKey:
        # (S3 answers NoSuchKey, not AccessDenied, because the role may list manifests/.)
        raise InvalidManifest(f"{where}: not found; upload it first") from None
    size = response.get("ContentLength", 0)
    if size > MAX_MANIFEST_BYTES:
        response["Body"].close()
        raise too_large(where, size, MAX_MANIFEST_BYTES)
    version = _pinned_version(response, bucket, where)
    return version, response["Body"].iter_chunks(chunk_size=READ_CHUNK_BYTES)


@tracer.capture_lambda_handler
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    bucket = os.environ["BATCH_BUCKET_NAME"]
    batch = validate_map_input(
        event.get("input"),
        execution_name=event.get("executionName"),
        max_inline_items=int(os.environ["MAX_INLINE_ITEMS"]),
    )
    batch_id = batch["batchId"]
    logger.append_keys(batch_id=batch_id)
    max_item_bytes = int(os.environ["MAX_ITEM_BYTES"])
    if "items" in batch:
        total = count_items(batch["items"], max_item_bytes=max_item_bytes, where="items")
        key = f"manifests/{batch_id}/{event.get('executionName') or 'inline'}.json"
        written = _s3().put_object(Bucket=bucket, Key=key, Body=json.dumps(batch["items"]).encode(),
                                   ContentType="application/json")
        version = _pinned_version(written, bucket, f"manifest s3://{bucket}/{key}")
        manifest = {"bucket": bucket, "key": key, "format": "JSON", "versionId": version}
    else:
        manifest = batch["manifest"]
        where = f"manifest s3://{manifest['bucket']}/{manifest['key']}"
        if manifest["bucket"] != bucket:
            raise InvalidInput(
                f"manifest.bucket: the workflow reads manifests from its batch data bucket only; "
                f"upload to s3://{bucket}/manifests/ (got {manifest['bucket']})"
            )
        version, chunks = _manifest_chunks(bucket, manifest["key"], where)
        items = iter_manifest(chunks, manifest["format"], where, max_item_bytes=max_item_bytes)
        total = count_items(items, max_item_bytes=max_item_bytes, where=where)
        manifest = {**manifest, "versionId": version}
    logger.info("batch prepared", extra={"total": total, "manifest": manifest})
    return {"batchId": batch_id, "manifest": manifest, "total": total, "redriveOf": batch["redriveOf"]}
