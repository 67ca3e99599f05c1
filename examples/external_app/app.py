#!/usr/bin/env python3
"""A CDK app of its own that uses the fan-out kit as a library: `pip install -r requirements.txt`,
then `cdk synth` / `cdk deploy`. Its one Lambda function (functions/signup.py) runs three tasks."""

from pathlib import Path

from aws_cdk import App, Duration, Stack
from aws_cdk import aws_lambda as lambda_

from fanout_kit import AlarmThresholds, FanOutTask, ParallelFanOut, ResourceSettings, RetrySettings

app = App()
stack = Stack(app, "SignupFanOut")
signup = lambda_.Function(
    stack,
    "SignupStep",
    runtime=lambda_.Runtime.PYTHON_3_13,
    handler="signup.handler",
    code=lambda_.Code.from_asset(str(Path(__file__).parent / "functions")),
    timeout=Duration.seconds(15),
)
fanout = ParallelFanOut(
    stack,
    "Signup",
    tasks=[
        FanOutTask("VerifyEmail", signup),
        FanOutTask("CreateProfile", signup, retryable=RetrySettings(
            interval_seconds=1, max_attempts=2, backoff_rate=2.0, max_delay_seconds=4)),
        FanOutTask("SendWelcome", signup),
    ],
    alarms=AlarmThresholds(lambda_errors=5),
    settings=ResourceSettings(environment_name="demo", retain_data=False, log_retention_days=7),
)
fanout.add_outputs()
app.synth()
