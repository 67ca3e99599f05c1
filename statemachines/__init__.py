"""Workflow definitions (built with CDK's Step Functions constructs) and their pure rules."""
