"""Code shared by every Lambda of the kit (bundled with each function's asset).

Two layers. Pure modules (``errors``, ``final_status``, ``ledger``, ``manifest``, ``map_results``,
``metric_names``, ``validation``; ``ledger_producer`` imports boto3 only inside its send functions)
import only the standard library and each other at import time: the CDK app
imports them at synth (error names, status rules, metric names), where boto3 and Powertools must
not be loaded (tests/test_layering.py). Runtime modules (``observability``: the one Logger, Tracer
and Metrics; ``ledger_runtime``) import boto3 and Powertools, which the Lambda
runtime and the Powertools layer provide; only handlers (and the local engine) import them.
No third-party imports besides those two.
"""
