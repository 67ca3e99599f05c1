"""Map-workflow input and manifest validation (pure)."""

import pytest

from fanout_runtime.errors import InvalidInput
import json

from fanout_kit.patterns.distributed_map.manifest import (
    InvalidManifest,
    count_items,
    iter_csv_rows,
    iter_json_array,
    iter_manifest,
    parse_manifest,
    validate_map_input,
)


def v(event, name="exec-1"):
    return validate_map_input(event, execution_name=name, max_inline_items=5)


def test_inline_items_and_default_batch_id():
    assert v({"items": [{"a": 1}]}) == {"batchId": "exec-1", "items": [{"a": 1}], "redriveOf": None}


def test_manifest_format_from_key_or_explicit():
    out = v({"batchId": "b", "manifest": {"bucket": "my-bucket", "key": "manifests/items.CSV"}})
    assert out["manifest"] == {"bucket": "my-bucket", "key": "manifests/items.CSV", "format": "CSV"}
    out = v({"batchId": "b", "manifest": {"bucket": "my-bucket", "key": "manifests/items", "format": "JSON"}})
    assert out["manifest"]["format"] == "JSON"


@pytest.mark.parametrize(
    "event, message",
    [
        ("x", "execution input must be a JSON object"),
        ({}, "give exactly one"),
        ({"items": {}}, "items: must be an array"),
        ({"items": list(range(6))}, "6 inline items exceed 5; put them in an S3 manifest"),
        ({"items": [1], "extra": 1}, "extra: unknown field"),
        ({"manifest": {"bucket": "UPPER", "key": "k.json"}}, "manifest.bucket: must be an S3 bucket name"),
        ({"manifest": {"bucket": "ok-bucket", "key": "k.json", "fmt": "x"}}, "manifest.fmt: unknown field"),
        ({"items": [1], "batchId": ""}, "batchId: must be 1-80 characters"),
        ({"manifest": {"bucket": "ok-bucket", "key": "other/k.json"}}, "manifest.key: must be under manifests/"),
        ({"items": [1], "redriveOf": "nope"}, "redriveOf: must be the ARN of the failed execution"),
    ],
)
def test_bad_input_names_the_field(event, message):
    with pytest.raises(InvalidInput) as err:
        v(event)
    assert message in str(err.value)


def test_json_and_csv_manifests_parse():
    assert parse_manifest(b'[{"a": 1}, 2]', "JSON", "m") == [{"a": 1}, 2]
    assert parse_manifest(b"a,b\n1,2\n\n3,4\n", "CSV", "m") == [{"a": "1", "b": "2"}, {"a": "3", "b": "4"}]


@pytest.mark.parametrize("fmt, body", [("JSON", b'[{"a": 1}]'), ("CSV", b"a,b\n1,2\n")])
@pytest.mark.parametrize("chunk", [1, 2, 64])
def test_a_byte_order_mark_is_refused_naming_it(fmt, body, chunk):
    """PrepareBatch used to skip a UTF-8 BOM (utf-8-sig) that the ItemReader does not: the batch
    passed the check and then the whole map run failed. Both now agree: refused before any child
    runs, whatever the read size."""
    data = b"\xef\xbb\xbf" + body
    chunks = [data[i : i + chunk] for i in range(0, len(data), chunk)]
    with pytest.raises(InvalidManifest, match=r"^m: starts with a UTF-8 byte order mark \(bytes EF BB BF\).*without a BOM$"):
        list(iter_manifest(chunks, fmt, "m", max_item_bytes=1000))
    assert list(iter_manifest([body], fmt, "m", max_item_bytes=1000))  # the same file without it passes


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64])
def test_json_stream_is_the_same_whatever_the_chunk_boundaries(chunk):
    """Items are parsed one at a time from a byte stream: numbers, strings and escapes split
    across reads come out whole."""
    items = [{"n": 1234567890, "s": "é\\\"x" * 3, "f": -1.5e-3}, {"t": True, "z": None, "l": [1, [2]]}]
    body = json.dumps(items, indent=2).encode()
    chunks = [body[i : i + chunk] for i in range(0, len(body), chunk)]
    assert list(iter_json_array(chunks, "m", max_item_bytes=1000)) == items


@pytest.mark.parametrize(
    "body, fmt, message",
    [
        (b"\xff\xfe", "JSON", "not UTF-8 text"),
        (b"[1,", "JSON", "the JSON array ends early, after item 0"),
        (b'[{"a": 1} {"b": 2}]', "JSON", "expected ',' or ']' after item 0, got '{'"),
        (b'[{"a": 1}] trailing', "JSON", "unexpected data after the JSON array's closing ']'"),
        (b'{"a": 1}', "JSON", "must be one array of items"),
        (b'[{"a": tru}]', "JSON", "m[0]: not valid JSON"),
        (b"", "CSV", "needs a header row"),
        (b"a,a\n1,2\n", "CSV", "empty or repeated column names"),
        (b"a,b\n1,2\n3\n", "CSV", "CSV line 3 has 1 fields, the header has 2"),
    ],
)
def test_malformed_manifests_are_named(body, fmt, message):
    with pytest.raises(InvalidManifest) as err:
        parse_manifest(body, fmt, "m")
    assert str(err.value).startswith("m") and message in str(err.value)


def test_an_oversized_item_is_refused_without_reading_it_whole():
    """A 10 MB item in a stream: refused by index once the unparsed text passes the bound, long
    before the item ends (memory stays bounded)."""
    read = []

    def chunks():
        yield b'[{"a": 1}, {"blob": "'
        for _ in range(10_000):
            read.append(1)
            yield b"x" * 1024
        yield b'"}]'

    with pytest.raises(InvalidManifest, match=r"m\[1\]: item is larger than 1000 bytes"):
        list(iter_json_array(chunks(), "m", max_item_bytes=1000))
    assert len(read) < 100


def test_item_checks():
    assert count_items(iter([{"a": 1}] * 3), max_item_bytes=100, where="items") == 3
    with pytest.raises(InvalidManifest, match="the batch is empty"):
        count_items(iter([]), max_item_bytes=100, where="items")
    with pytest.raises(InvalidManifest, match=r"items\[1\]: item is 108 bytes, more than 100"):
        count_items([{}, {"blob": "x" * 97}], max_item_bytes=100, where="items")
    with pytest.raises(InvalidManifest, match=r"items\[2\]: each item must be a JSON object, got null"):
        count_items([{}, {}, None], max_item_bytes=100, where="items")


def test_csv_rows_stream_line_by_line():
    rows = iter_csv_rows(iter([b"id,na", b"me\n1,", b'"a,b"\n2,c\n']), "m")
    assert list(rows) == [{"id": "1", "name": "a,b"}, {"id": "2", "name": "c"}]


def test_a_batch_over_the_item_limit_is_refused_naming_it():
    """PrepareBatch's memory and timeout are sized for MAX_MANIFEST_ITEMS; one more is refused as
    soon as it is read, naming the limit, instead of timing out (here with a limit of 3)."""
    items = iter([{"a": 1}] * 4)
    with pytest.raises(InvalidManifest, match=r"^m: more than 3 items, the most one batch may have .* at most 3 items$"):
        count_items(items, max_item_bytes=100, where="m", max_items=3)
    assert count_items(iter([{"a": 1}] * 3), max_item_bytes=100, where="m", max_items=3) == 3


def test_prepare_batch_refuses_a_manifest_over_the_size_limit_before_reading_it(monkeypatch):
    """The size comes with GetObject (ContentLength): a manifest over MAX_MANIFEST_BYTES is refused
    with its size and the limit, before a byte of it is parsed."""
    import boto3
    from moto import mock_aws

    from fanout_kit.patterns.distributed_map.handlers import prepare_map_batch
    from fanout_kit.local.moto_lambda import LambdaContext, LocalFunction

    with mock_aws():
        s3 = boto3.client("s3", region_name="eu-west-1")
        s3.create_bucket(Bucket="data", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
        # versioned, as the kit's bucket: PrepareBatch pins the version it counted
        s3.put_bucket_versioning(Bucket="data", VersioningConfiguration={"Status": "Enabled"})
        s3.put_object(Bucket="data", Key="manifests/big.json", Body=b'[{"a": 1}, {"a": 2}]')
        monkeypatch.setenv("BATCH_BUCKET_NAME", "data")
        monkeypatch.setenv("MAX_ITEM_BYTES", "8192")
        monkeypatch.setenv("MAX_INLINE_ITEMS", "1000")
        monkeypatch.setattr(prepare_map_batch, "MAX_MANIFEST_BYTES", 10)
        prepare_map_batch._s3.cache_clear()
        context = LambdaContext(LocalFunction("PrepareBatch", "prepare_map_batch.handler"), "eu-west-1", "123456789012")
        event = {"input": {"batchId": "b1", "manifest": {"bucket": "data", "key": "manifests/big.json"}}, "executionName": "e1"}
        try:
            with pytest.raises(InvalidManifest, match=r"manifests/big.json: 20 bytes, more than the 10 bytes .* split it"):
                prepare_map_batch.handler(event, context)
            monkeypatch.setattr(prepare_map_batch, "MAX_MANIFEST_BYTES", 20)
            assert prepare_map_batch.handler(event, context)["total"] == 2
        finally:
            prepare_map_batch._s3.cache_clear()
def test_an_input_over_the_map_cap_is_refused_in_one_line():
    from fanout_kit.shared.limits import MAP_INPUT_MAX_BYTES

    event = {"batchId": "big", "items": [{"blob": "x" * MAP_INPUT_MAX_BYTES}]}
    with pytest.raises(InvalidInput, match=f"^input: .* over the {MAP_INPUT_MAX_BYTES:,}-byte cap; .*S3 manifest"):
        v(event)
