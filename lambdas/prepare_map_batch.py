"""PrepareBatch: first state of the Map workflow. Validates the input and the manifest, writes
inline items to the batch data bucket as a JSON manifest, and registers the batch (its total) in
the completion ledger. Any problem fails the execution with InvalidInput / InvalidManifest before
anything is registered."""

import functools
import json
import os

import boto3
from aws_lambda_powertools import Logger, Tracer

from fanout_common.ledger import Ledger, TotalMismatch
from fanout_common.errors import InvalidInput
from fanout_common.manifest import InvalidManifest, check_items, parse_manifest, validate_map_input

logger = Logger()
tracer = Tracer()


@functools.cache
def _clients():
    return boto3.client("s3"), boto3.client("dynamodb")


@tracer.capture_lambda_handler
@logger.inject_lambda_context
def handler(event, context):
    bucket = os.environ["BATCH_BUCKET_NAME"]
    batch = validate_map_input(
        event.get("input"),
        execution_name=event.get("executionName"),
        max_inline_items=int(os.environ["MAX_INLINE_ITEMS"]),
    )
    batch_id = batch["batchId"]
    logger.append_keys(batch_id=batch_id)
    s3, dynamodb = _clients()
    max_item_bytes = int(os.environ["MAX_ITEM_BYTES"])
    if "items" in batch:
        total = check_items(batch["items"], max_item_bytes=max_item_bytes, where="items")
        key = f"manifests/{batch_id}/{event.get('executionName') or 'inline'}.json"
        s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(batch["items"]).encode(),
                      ContentType="application/json")
        manifest = {"bucket": bucket, "key": key, "format": "JSON"}
    else:
        manifest = batch["manifest"]
        where = f"manifest s3://{manifest['bucket']}/{manifest['key']}"
        if manifest["bucket"] != bucket:
            raise InvalidInput(
                f"manifest.bucket: the workflow reads manifests from its batch data bucket only; "
                f"upload to s3://{bucket}/manifests/ (got {manifest['bucket']})"
            )
        try:
            body = s3.get_object(Bucket=bucket, Key=manifest["key"])["Body"].read()
        except s3.exceptions.NoSuchKey:
            raise InvalidManifest(f"{where}: no such object; upload it first") from None
        items = parse_manifest(body, manifest["format"], where)
        total = check_items(items, max_item_bytes=max_item_bytes, where=where)
    try:
        Ledger(dynamodb, os.environ["LEDGER_TABLE_NAME"]).register_batch(batch_id, total)
    except TotalMismatch as exc:
        raise InvalidInput(f"batchId: {exc}; use a new batchId for a different set of items") from None
    logger.info("batch registered", extra={"total": total, "manifest": manifest})
    return {"batchId": batch_id, "manifest": manifest, "total": total}
