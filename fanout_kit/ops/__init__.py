"""Operate a deployed environment (boto3): ``start``, ``watch``/``status``, ``dlq list``,
``dlq redrive``. Every resource is found from the CloudFormation stack outputs of the environment
chosen in cdk.json, never typed by hand. No aws_cdk import anywhere here (it is slow)."""
