"""Print a transcript of an operator's session with the ops CLI (not a test):

    start -> watch (one task dead-lettered, batch FAILED) -> dlq list -> dlq redrive -> watch
    (SUCCEEDED) -> dlq list (empty)

against a moto server on loopback that stands in for AWS: the synthesized dev Parallel workflow
deployed into it, the real handlers serving its Lambda invokes, a CloudFormation stack of the real
name carrying the outputs. Each command is the real CLI (``fanout_kit.cli.main.main``) run in this process.

    .venv/bin/python tests/ops/transcript.py
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
os.chdir(ROOT)
for key, value in {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "eu-west-1",
    "AWS_EC2_METADATA_DISABLED": "true",
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_LOG_LEVEL": "ERROR",  # the handlers run in this process: keep their logs out
    "POWERTOOLS_METRICS_DISABLED": "true",
}.items():
    os.environ[key] = value
os.environ.pop("AWS_PROFILE", None)

# Lines the in-process handlers print (EMF metrics, JSON logs) are not the CLI's output.
HANDLER_LINE = re.compile(r'^\{"(_aws|level)"')


def run(argv: list[str], shown: list[str]) -> tuple[int, str]:
    from fanout_kit.cli.main import main

    print("$ python -m fanout_kit " + " ".join(shown))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    text = "".join(
        line for line in (out.getvalue() + err.getvalue()).splitlines(True) if not HANDLER_LINE.match(line)
    )
    print(text.rstrip("\n"))
    print(f"[exit {code}]\n")
    return code, text


def main() -> int:
    from fanout_kit.local.template import synthesize
    from fanout_kit.shared.jsii_node import use_venv_node
    from tests.ops.harness import deployed, moto_server

    use_venv_node()
    print("(synthesizing the dev app with the same builder as cdk synth...)", file=sys.stderr)
    app = synthesize("dev")
    workdir = Path(tempfile.mkdtemp(prefix="fanout-transcript-"))
    batch = json.loads((ROOT / "examples" / "batch.json").read_text())
    batch["tasks"]["NotifyCustomer"]["simulateFailure"] = {"mode": "permanent"}
    batch_file = workdir / "batch.json"
    tasks = ",\n".join(f'    "{name}": {json.dumps(payload)}' for name, payload in batch["tasks"].items())
    batch_file.write_text(f'{{\n  "batchId": "{batch["batchId"]}",\n  "tasks": {{\n{tasks}\n  }}\n}}\n')
    assert json.loads(batch_file.read_text()) == batch

    with moto_server() as endpoint, deployed(app, endpoint, "parallel") as engine:
        print(
            f"# AWS here is a moto server on {endpoint}: the synthesized dev stack {app.workflow_stacks['parallel']}"
        )
        print("# deployed into it, the real handlers behind its Lambda functions. Retry waits are not slept.")
        print(f"$ export AWS_ENDPOINT_URL={endpoint}\n")
        print("$ cat batch.json")
        print(batch_file.read_text())

        code, text = run(["start", "--env", "dev", str(batch_file)], ["start", "--env", "dev", "batch.json"])
        arn = re.search(r"execution: (\S+)", text).group(1)
        run(["watch", arn, "--interval", "0.1"], ["watch", arn])
        run(["dlq", "list", "--env", "dev"], ["dlq", "list", "--env", "dev"])

        print("# ... the cause is fixed (here: the handlers' fault switch is turned off; the redrive")
        print("# re-sends the task's original input, switch included) ...\n")
        import fanout_runtime.faults as faults

        faults.raise_simulated_failure = lambda payload, name, attempt: None
        redrive = ["dlq", "redrive", "--env", "dev", "--batch", batch["batchId"]]
        code, text = run(redrive, redrive)
        redrive_arn = re.search(
            r"(?:started redrive execution|reusing the redrive execution started earlier) (\S+)", text
        ).group(1)
        final_code, _ = run(["watch", redrive_arn, "--interval", "0.1"], ["watch", redrive_arn])
        run(["dlq", "list", "--env", "dev"], ["dlq", "list", "--env", "dev"])
        record = engine.status_record(batch["batchId"])
        left = engine.dlq_messages()
    ok = final_code == 0 and record and record["status"] == "SUCCEEDED" and not left
    print(
        f"# checked on the emulator: final status {record and record['status']}, DLQ messages left: {len(left)}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
