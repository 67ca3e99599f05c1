"""Fixes of moto 5.2.5 emulator bugs that would otherwise make correct code look wrong.

* moto's DynamoDB backend is not thread-safe: concurrent ``UpdateItem ... ADD`` or
  ``TransactWriteItems`` on one item (Distributed Map children, or a threaded ``moto server``
  answering concurrent consumers) lose increments: 100 concurrent transactions counted 97 in a run
  here. Real DynamoDB applies each write atomically. ``serialized_dynamodb_writes()`` makes every
  write operation of the backend take one lock, which is what atomicity per item means for a
  counter (it serializes more than DynamoDB does, which only costs local speed). Reads
  (GetItem, which BatchGetItem uses per key, Query, Scan) take the same lock: moto applies an
  UpdateItem attribute by attribute and a cancelled transaction is undone after the fact, so an
  unlocked read could see half a write; DynamoDB's reads only ever return committed items.
* moto's ``TransactWriteItems`` deep-copies every table it touches before each transaction, to
  roll back on failure: O(table size) per transaction, O(N²) for a batch of N children (1,000
  Map items took 52 s here). Under the same lock, the backup is made of the touched items only
  and restored the same way on failure: the same all-or-nothing outcome.
* The Distributed Map worker (``DistributedItemProcessorWorker._eval_pool``) recurses once per
  item it processes, so a worker that takes more than ~1,000 items (10,000 items at
  MaxConcurrency 10) dies with RecursionError. ``iterative_map_workers()`` runs the same steps in
  a loop.
"""

from __future__ import annotations

import copy
import functools
import json
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import moto.dynamodb.models as dynamodb_models
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.dynamodb.models.table import Table

WRITE_METHODS = ("put_item", "update_item", "delete_item", "transact_write_items", "batch_write_item")
READ_METHODS = ("get_item", "query", "scan")
_LOCK = threading.RLock()
_DEPTH = [0]
_ORIGINALS = {name: getattr(DynamoDBBackend, name) for name in WRITE_METHODS + READ_METHODS}


class _CopyExceptTables:
    """Stands in for the ``copy`` module inside moto.dynamodb.models during a transaction."""

    copy = staticmethod(copy.copy)

    @staticmethod
    def deepcopy(obj: Any, memo: Any = None) -> Any:
        return obj if isinstance(obj, Table) else copy.deepcopy(obj, memo)


def _transact_with_item_backups(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
    backups = []
    for entry in transact_items:
        op_type, op = next(iter(entry.items()))
        table = self.tables.get(op.get("TableName")) if isinstance(op, dict) else None
        if table is None:
            continue
        source = op.get("Item" if op_type == "Put" else "Key") or {}
        try:
            hash_value = DynamoType(source[table.hash_key_attr])
            range_value = DynamoType(source[table.range_key_attr]) if table.has_range_key else None
        except KeyError:
            continue  # moto's own validation rejects the operation
        backups.append((table, hash_value, range_value, copy.deepcopy(table.get_item(hash_value, range_value))))
    dynamodb_models.copy = _CopyExceptTables
    try:
        return _ORIGINALS["transact_write_items"](self, transact_items)
    except Exception:
        for table, hash_value, range_value, old in reversed(backups):
            if range_value is None:
                if old is None:
                    table.items.pop(hash_value, None)
                else:
                    table.items[hash_value] = old
            elif old is None:
                table.items[hash_value].pop(range_value, None)
            else:
                table.items[hash_value][range_value] = old
        raise
    finally:
        dynamodb_models.copy = copy


def _locked(method):
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        with _LOCK:
            return method(*args, **kwargs)

    return wrapper


@contextmanager
def serialized_dynamodb_writes() -> Iterator[None]:
    """While active (re-entrant), moto's DynamoDB write operations (and reads) run one at a time."""
    with _LOCK:
        if _DEPTH[0] == 0:
            for name, original in _ORIGINALS.items():
                if name == "transact_write_items":
                    original = _transact_with_item_backups
                setattr(DynamoDBBackend, name, _locked(original))
        _DEPTH[0] += 1
    try:
        yield
    finally:
        with _LOCK:
            _DEPTH[0] -= 1
            if _DEPTH[0] == 0:
                for name, original in _ORIGINALS.items():
                    setattr(DynamoDBBackend, name, original)


@contextmanager
def cached_interpreter_clients() -> Iterator[None]:
    """moto's interpreter builds a new boto3 client (and TLS context) for every task it runs;
    reuse one per (region, service) while active. boto3 clients are thread-safe. Speed only."""
    import sys

    from moto.stepfunctions.parser.asl.utils import boto_client

    original = boto_client.boto_client_for
    cache: dict[tuple[str, str, bool], Any] = {}
    lock = threading.Lock()

    def cached(region: str, service: str, state_credentials: Any = None):
        key = (region, service, boto_client.botocore_stubber.enabled)
        with lock:
            if key not in cache:
                cache[key] = original(region=region, service=service, state_credentials=state_credentials)
            return cache[key]

    patched = [
        module
        for name, module in list(sys.modules.items())
        if name.startswith("moto.stepfunctions.parser") and getattr(module, "boto_client_for", None) is original
    ]
    for module in patched:
        module.boto_client_for = cached
    try:
        yield
    finally:
        for module in patched:
            module.boto_client_for = original


def _iterative_eval_pool(self, job, worker_frame) -> None:
    """moto 5.2.5's DistributedItemProcessorWorker._eval_pool, as a loop instead of recursion."""
    while True:
        if job is None:
            self._env.delete_frame(worker_frame)
            return
        job_frame = worker_frame.open_inner_frame()
        self._eval_job(env=job_frame, job=job)
        worker_frame.delete_frame(job_frame)
        if isinstance(job.job_output, Exception) or self.stopped():
            self._env.delete_frame(worker_frame)
            self._job_pool.close_job(job)
            return
        next_job = self._job_pool.next_job()
        if next_job is None:
            self._env.delete_frame(worker_frame)
            self._job_pool.close_job(job)
            return
        self._job_pool.close_job(job)
        job = next_job


@contextmanager
def iterative_map_workers() -> Iterator[None]:
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.itemprocessor import (
        distributed_item_processor_worker as module,
    )

    worker = module.DistributedItemProcessorWorker
    original = worker._eval_pool
    worker._eval_pool = _iterative_eval_pool
    try:
        yield
    finally:
        worker._eval_pool = original


# --------------------------------------------------------------------------- JSONPath parsing
@contextmanager
def cached_json_paths() -> Iterator[None]:
    """moto 5.2.5 parses every JSONPath anew each time it evaluates one (jsonpath_ng builds a
    parser per call): with an ItemSelector, twice per item, 45% of a 4,000-item map run here.
    Parsed paths are immutable, so one parse per distinct path serves. Speed only."""
    from moto.stepfunctions.parser.asl.component.common.path import result_path
    from moto.stepfunctions.parser.asl.utils import json_path

    modules = (json_path, result_path)
    originals = [m.parse for m in modules]
    for module, original in zip(modules, originals):
        module.parse = functools.lru_cache(maxsize=4096)(original)
    try:
        yield
    finally:
        for module, original in zip(modules, originals):
            module.parse = original


# --------------------------------------------------------------------------- AWS SDK integration
def _sdk_operation(task: Any) -> Any:
    import botocore.session

    service = task._get_boto_service_name()
    action = task.resource.api_action
    model = botocore.session.get_session().get_service_model(service)
    return model.operation_model(action[0].upper() + action[1:])


def _normalise_sdk_parameters(self, parameters, boto_service_name=None, service_action_name=None) -> None:
    self._to_boto_request(parameters, _sdk_operation(self).input_shape)


def _normalise_sdk_response(self, response, boto_service_name=None, service_action_name=None) -> None:
    self._from_boto_response(response, _sdk_operation(self).output_shape)


@contextmanager
def aws_sdk_integration_casing() -> Iterator[None]:
    """moto 5.2.5's ``arn:aws:states:::aws-sdk:*`` tasks pass the state's parameters to boto3 as
    written, so ``sfn:describeMapRun`` with ``MapRunArn`` fails (boto3 wants ``mapRunArn``), and
    return boto3's casing. AWS documents that SDK-integration parameters and results are
    PascalCase "even if the native service API is in camelCase"; this maps both ways through the
    service's botocore model (moto's own helpers, which its other integrations use)."""
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_aws_sdk import (
        StateTaskServiceAwsSdk,
    )

    saved = (StateTaskServiceAwsSdk._normalise_parameters, StateTaskServiceAwsSdk._normalise_response)
    StateTaskServiceAwsSdk._normalise_parameters = _normalise_sdk_parameters
    StateTaskServiceAwsSdk._normalise_response = _normalise_sdk_response
    try:
        yield
    finally:
        StateTaskServiceAwsSdk._normalise_parameters, StateTaskServiceAwsSdk._normalise_response = saved


# ----------------------------------------------------------------- Distributed Map children
class ItemBatch(list):
    """A child's share of the map's items: ``[(index, item), ...]`` (what ItemBatcher groups)."""


@dataclass
class ChildRecord:
    """One child execution of a map run, as the ResultWriter reports it."""

    arn: str
    name: str
    input: Any
    start: str
    status: str = "RUNNING"
    stop: str = ""
    output: Any = None
    error: str | None = None
    cause: str | None = None
    items: int = 1

    def result(self, state_machine_arn: str) -> dict[str, Any]:
        """The entry Step Functions writes to the result files (SUCCEEDED_n.json / FAILED_n.json)."""
        entry: dict[str, Any] = {
            "ExecutionArn": self.arn,
            "Input": json.dumps(self.input, separators=(",", ":")),
            "InputDetails": {"Included": True},
            "Name": self.name,
            "StartDate": self.start,
            "StateMachineArn": state_machine_arn,
            "Status": self.status,
            "StopDate": self.stop,
        }
        if self.status == "SUCCEEDED":
            entry["Output"] = json.dumps(self.output, separators=(",", ":"))
            entry["OutputDetails"] = {"Included": True}
        else:
            entry["Error"] = self.error or ""
            entry["Cause"] = self.cause or ""
        return entry


@dataclass
class MapChildren:
    """The local Distributed Map rules, per Map state name: batch sizes (ItemBatcher) and which
    children run as EXPRESS (with their duration limit); plus hooks the engine uses to clock a
    child (``on_start(child_arn, env)`` / ``on_end(child_arn) -> "TIMED_OUT" | None``)."""

    batch_sizes: dict[str, int] = field(default_factory=dict)
    express: set[str] = field(default_factory=set)
    max_workers: int = 8  # worker threads per map run, whatever MaxConcurrency says
    on_start: Any = None
    on_end: Any = None
    on_child_end: Any = None  # (ChildRecord, express: bool): every child once it ended (metering)


_CHILDREN_LOCK = threading.Lock()
_RESULTS_PER_FILE = 1000  # AWS splits result files by size; locally by count, to keep files small


def _now() -> str:
    import datetime

    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


def _batched_map_run(rules: MapChildren, original: Any):
    """moto 5.2.5's DistributedIterationComponent._map_run, with ItemBatcher's grouping and at
    most ``rules.max_workers`` worker threads (moto starts MaxConcurrency threads: 500 threads
    contend for one interpreter lock and run slower than a few; MaxConcurrency is an upper bound
    on AWS too, so fewer at once changes no outcome)."""
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.job import JobPool
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.max_concurrency import (
        DEFAULT_MAX_CONCURRENCY_VALUE,
    )

    def _map_run(self, env, eval_input) -> None:
        items = env.stack.pop()
        size = rules.batch_sizes.get(eval_input.state_name)
        if size:
            items = [ItemBatch(enumerate_from(items, start, size)) for start in range(0, len(items), size)]
        job_pool = JobPool(job_program=self._get_iteration_program(), job_inputs=items)
        concurrency = eval_input.map_run_record.max_concurrency
        workers = len(items) if concurrency == DEFAULT_MAX_CONCURRENCY_VALUE else concurrency
        for _ in range(max(1, min(workers, rules.max_workers, len(items)))):
            self._launch_worker(env=env, eval_input=eval_input, job_pool=job_pool)
        job_pool.await_jobs()
        worker_exception = job_pool.get_worker_exception()
        if worker_exception is not None:
            raise worker_exception
        env.stack.append([closed.job_output for closed in job_pool.get_closed_jobs()])

    return _map_run


def enumerate_from(items: list[Any], start: int, size: int) -> list[tuple[int, Any]]:
    return [(start + i, item) for i, item in enumerate(items[start : start + size])]


def _child_eval_job(rules: MapChildren):
    from moto.stepfunctions.parser.asl.eval.program_state import ProgramError, ProgramStopped, ProgramTimedOut
    from moto.stepfunctions.parser.asl.eval.states import ItemData, MapData

    def _eval_job(self, env, job) -> None:
        """moto 5.2.5's DistributedItemProcessorWorker._eval_job, with: ItemBatcher (a batch job's
        input is ``{"Items": [...selected items], "BatchInput": {...}}``), item counts in items
        (a child of N items counts N), each child its own ``$$.Execution`` (own ARN and name),
        its result recorded for the ResultWriter, and the engine's clock for EXPRESS children."""
        record = self._map_run_record
        batch = job.job_input if isinstance(job.job_input, ItemBatch) else None
        n = len(batch) if batch is not None else 1
        execution = dict(env.states.context_object.context_object_data["Execution"])
        child_name = str(uuid.uuid4())
        child_arn = record.map_run_arn.replace(":mapRun:", ":execution:").rsplit(":", 1)[0] + f":{child_name}"
        execution.update(Id=child_arn, Name=child_name, StartTime=_now())
        items = record.item_counter
        items.total.count(n)
        items.running.count(n)
        record.execution_counter.total.count()
        record.execution_counter.running.count()
        child = ChildRecord(arn=child_arn, name=child_name, input=None, start=execution["StartTime"], items=n)
        timed_out = None
        clocked = rules.on_start is not None and self._work_name in rules.express
        try:
            if batch is None:
                env.states.context_object.context_object_data["Map"] = MapData(
                    Item=ItemData(Index=job.job_index, Value=job.job_input)
                )
                env.states.reset(job.job_input)
                env.stack.append(env.states.get_input())
                self._eval_input(env_frame=env)
            else:
                selected = []
                for index, value in batch:
                    env.states.context_object.context_object_data["Map"] = MapData(
                        Item=ItemData(Index=index, Value=value)
                    )
                    env.states.reset(value)
                    env.stack.append(env.states.get_input())
                    self._eval_input(env_frame=env)
                    selected.append(env.states.get_input())
                    env.stack.clear()
                merged = {"Items": [s["Items"][0] for s in selected], "BatchInput": selected[0]["BatchInput"]}
                env.states.reset(merged)
            child.input = env.states.get_input()
            # (the ItemSelector and BatchInput saw the parent's $$.Execution; the child has its own)
            env.states.context_object.context_object_data["Execution"] = execution
            if clocked:
                rules.on_start(child_arn, env)
            job.job_program.eval(env)
            if clocked:
                timed_out, clocked = rules.on_end(child_arn), False
            state = env.program_state()
            if timed_out or isinstance(state, ProgramTimedOut):
                child.status, child.error = "TIMED_OUT", "States.Timeout"
                child.cause = timed_out or "the child execution timed out"
            elif isinstance(state, ProgramError):
                child.status = "FAILED"
                child.error, child.cause = state.error.get("error"), state.error.get("cause")
            elif isinstance(state, ProgramStopped):
                child.status, child.error, child.cause = "ABORTED", state.error, state.cause
            else:
                child.status, child.output = "SUCCEEDED", env.states.get_input()
        except Exception as exc:  # noqa: BLE001 - as moto does: the child failed
            child.status, child.error, child.cause = "FAILED", "States.Runtime", f"{type(exc).__name__}: {exc}"
        finally:
            if clocked:
                rules.on_end(child_arn)  # (the child failed before its clock was read)
            child.stop = _now()
            counter_name = {"SUCCEEDED": "succeeded", "FAILED": "failed", "TIMED_OUT": "timed_out", "ABORTED": "aborted"}[
                child.status if child.status != "RUNNING" else "FAILED"
            ]
            getattr(items, counter_name).count(n)
            items.running.count(-n)
            getattr(record.execution_counter, counter_name).count()
            record.execution_counter.running.offset(-1)
            if child.status == "SUCCEEDED":
                items.results_written.count(n)
                record.execution_counter.results_written.count()
            with _CHILDREN_LOCK:
                record.__dict__.setdefault("local_children", []).append(child)
            if rules.on_child_end is not None:
                rules.on_child_end(child, self._work_name in rules.express)
            job.job_output = child.output

    return _eval_job


def _write_results():
    """ResultWriter: moto writes a manifest listing no result files; write them as AWS does."""

    def _handle_put_object(env, resource_runtime_part, state_credentials) -> None:
        from moto.stepfunctions.parser.asl.utils.boto_client import boto_client_for

        parameters = env.stack.pop()
        env.stack.pop()  # the children's outputs: the files below carry them
        s3 = boto_client_for(service="s3", region=resource_runtime_part.region, state_credentials=state_credentials)
        record = env.map_run_record_pool_manager.get_all()[-1]
        run_id = record.map_run_arn.split(":")[-1]
        prefix = parameters.get("Prefix", "")
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        state_machine_arn = record.map_state_machine_arn
        files: dict[str, list[dict[str, Any]]] = {"FAILED": [], "PENDING": [], "SUCCEEDED": []}
        children = sorted(record.__dict__.get("local_children", []), key=lambda c: c.start)
        for group in ("SUCCEEDED", "FAILED"):
            entries = [
                c.result(state_machine_arn)
                for c in children
                if (c.status == "SUCCEEDED") == (group == "SUCCEEDED")
            ]
            for part, start in enumerate(range(0, len(entries), _RESULTS_PER_FILE)):
                key = f"{prefix}{run_id}/{group}_{part}.json"
                body = json.dumps(entries[start : start + _RESULTS_PER_FILE]).encode()
                s3.put_object(Bucket=parameters["Bucket"], Key=key, Body=body)
                files[group].append({"Key": key, "Size": len(body)})
        manifest = {"DestinationBucket": parameters["Bucket"], "MapRunArn": record.map_run_arn, "ResultFiles": files}
        key = f"{prefix}{run_id}/manifest.json"
        s3.put_object(Bucket=parameters["Bucket"], Key=key, Body=json.dumps(manifest, indent=2).encode())
        env.stack.append({"MapRunArn": record.map_run_arn, "ResultWriterDetails": {"Bucket": parameters["Bucket"], "Key": key}})

    return staticmethod(_handle_put_object)


@contextmanager
def distributed_map_children(rules: MapChildren) -> Iterator[None]:
    """While active, moto 5.2.5's Distributed Map runs its children as AWS does in the ways the kit
    relies on (each seen missing when run):

    * ItemBatcher: moto cannot parse it, so ``adapt.py`` removes it and names the batch size here;
      the items are grouped into children of that size, each child's input being
      ``{"Items": [each item through the ItemSelector], "BatchInput": {...}}``.
    * Item counts (DescribeMapRun ``itemCounts``) count items: a failed child of N items adds N
      to ``failed`` (the API reference, MapRunItemCounts: "the total number of items processed in
      child workflow executions that have failed"); a child stopped for time adds to ``timedOut``. moto counted one per child and
      only the outcomes it saw (a child's Program timeout was counted nowhere).
    * Each child has its own ``$$.Execution.Id`` and name (moto gave every child the parent's).
    * ResultWriter writes the result files (``SUCCEEDED_n.json``, ``FAILED_n.json``: each child's
      ExecutionArn, Input, Status, Error, Cause, ...) and lists them in its manifest; moto wrote
      a manifest listing none.
    """
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration import (
        distributed_iteration_component as iteration_module,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.itemprocessor import (
        distributed_item_processor_worker as worker_module,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.result_writer.resource_eval import (
        resource_eval_s3 as s3_module,
    )

    component = iteration_module.DistributedIterationComponent
    worker = worker_module.DistributedItemProcessorWorker
    writer = s3_module.ResourceEvalS3
    saved = (component._map_run, worker._eval_job, writer.__dict__["_handle_put_object"])
    component._map_run = _batched_map_run(rules, saved[0])
    worker._eval_job = _child_eval_job(rules)
    writer._handle_put_object = _write_results()
    try:
        yield
    finally:
        component._map_run, worker._eval_job = saved[0], saved[1]
        writer._handle_put_object = saved[2]
