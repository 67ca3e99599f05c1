"""The list prices the kit's cost figures use: ``fanout estimate``, the measured cost every local run
prints, the cost table of docs/cost.md and ``benchmarks/cost_benchmark.py`` all read them from here.

Pure data (no boto3, no network): AWS public on-demand list prices for one region, with the day they
were checked and the page each comes from. They are not your bill: no free tier, no Savings Plans,
no volume tiers beyond the first (each price below is its service's first tier), no taxes.

How each figure was checked (offline: this project's sessions have no network; the prices were
compared with the stored copies of the pages the ``search`` tool holds):

* Step Functions Standard, $0.025 per 1,000 state transitions in us-east-1: the AWS pricing page's
  own table ("US East (N. Virginia) $0.0250"), and its rules the kit's estimate relies on: "each
  retry will be charged as an additional state transition"; a Distributed Map is charged "one state
  transition for each child workflow execution" it starts (Step Functions developer guide,
  concepts-transitions).
* Express: the pricing page's rules (a request per started execution; duration rounded up to the
  next 100 ms, memory billed in 64-MB chunks) are from the AWS page; the two figures ($1.00 per
  million requests, $0.00001667 per GB-second for the first 1,000 GB-hours a month) only from
  third-party summaries of it: NOT verified against AWS's own page offline.
* Lambda: $0.20 per million requests (AWS page, as transcribed by third parties); $0.0000166667 per
  GB-second x86_64 and $0.0000133334 arm64 (first 6 billion GB-seconds a month) from a third-party
  transcription (artillery's price table): NOT verified against AWS's own page offline.
* DynamoDB on-demand: $0.625 per million write request units and $0.125 per million read request
  units (the prices since AWS halved on-demand in November 2024) from third-party pages: NOT
  verified against AWS's own page offline (older copies show $1.25 / $0.25).
* SQS standard queues $0.40 per million requests (each 64 KB of payload is one request), S3
  Standard $0.005 per 1,000 PUT/COPY/POST/LIST and $0.0004 per 1,000 GET requests, CloudWatch Logs
  $0.50 per GB ingested, X-Ray $5.00 per million traces recorded, EventBridge: events AWS services
  publish to the default bus are free ($1.00 per million custom events): third-party pages only,
  NOT verified against AWS's own pages offline.

Change a figure here and every cost the kit prints, the docs' cost table (regenerate it with
``python -m tools.cost_table --write``) and the tests follow.
"""

from __future__ import annotations

from dataclasses import dataclass

REGION = "us-east-1"
CHECKED = "2026-12-04"  # the day these figures were compared with the pages below


@dataclass(frozen=True)
class Price:
    usd: float  # per one ``unit``
    unit: str
    source: str  # the page the price is from
    verified: bool  # True: read on AWS's own page (offline copy); False: third-party copies only


SFN = "https://aws.amazon.com/step-functions/pricing/"
LAMBDA = "https://aws.amazon.com/lambda/pricing/"
DYNAMODB = "https://aws.amazon.com/dynamodb/pricing/on-demand/"
SQS = "https://aws.amazon.com/sqs/pricing/"
S3 = "https://aws.amazon.com/s3/pricing/"
EVENTBRIDGE = "https://aws.amazon.com/eventbridge/pricing/"
CLOUDWATCH = "https://aws.amazon.com/cloudwatch/pricing/"
XRAY = "https://aws.amazon.com/xray/pricing/"

PRICES: dict[str, Price] = {
    "sfn_standard_transition": Price(0.025 / 1000, "state transition", SFN, True),
    "sfn_express_request": Price(1.00 / 1e6, "Express execution (request)", SFN, False),
    "sfn_express_gb_second": Price(0.00001667, "Express GB-second", SFN, False),
    "lambda_request": Price(0.20 / 1e6, "Lambda invocation", LAMBDA, False),
    "lambda_gb_second_x86_64": Price(0.0000166667, "Lambda GB-second (x86_64)", LAMBDA, False),
    "lambda_gb_second_arm64": Price(0.0000133334, "Lambda GB-second (arm64)", LAMBDA, False),
    "dynamodb_write_request_unit": Price(0.625 / 1e6, "DynamoDB write request unit", DYNAMODB, False),
    "dynamodb_read_request_unit": Price(0.125 / 1e6, "DynamoDB read request unit", DYNAMODB, False),
    "sqs_request": Price(0.40 / 1e6, "SQS request (64 KB chunk)", SQS, False),
    "s3_put_request": Price(0.005 / 1000, "S3 PUT/COPY/POST/LIST request", S3, False),
    "s3_get_request": Price(0.0004 / 1000, "S3 GET request", S3, False),
    "eventbridge_aws_service_event": Price(0.0, "EventBridge AWS service event (default bus)", EVENTBRIDGE, False),
    "eventbridge_custom_event": Price(1.00 / 1e6, "EventBridge custom event", EVENTBRIDGE, False),
    "cloudwatch_logs_gb_ingested": Price(0.50, "CloudWatch Logs GB ingested", CLOUDWATCH, False),
    "xray_trace_recorded": Price(5.00 / 1e6, "X-Ray trace recorded", XRAY, False),
}


def price(name: str) -> float:
    return PRICES[name].usd


def lambda_gb_second(architecture: str) -> float:
    """The GB-second price of a function's architecture (``x86_64`` or ``arm64``)."""
    return price("lambda_gb_second_arm64" if architecture == "arm64" else "lambda_gb_second_x86_64")
