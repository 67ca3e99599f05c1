"""Map-workflow input and manifest validation (pure)."""

import pytest

from fanout_common.errors import InvalidInput
from fanout_common.manifest import InvalidManifest, check_items, parse_manifest, validate_map_input


def v(event, name="exec-1"):
    return validate_map_input(event, execution_name=name, max_inline_items=5)


def test_inline_items_and_default_batch_id():
    assert v({"items": [{"a": 1}]}) == {"batchId": "exec-1", "items": [{"a": 1}]}


def test_manifest_format_from_key_or_explicit():
    out = v({"batchId": "b", "manifest": {"bucket": "my-bucket", "key": "x/items.CSV"}})
    assert out["manifest"] == {"bucket": "my-bucket", "key": "x/items.CSV", "format": "CSV"}
    out = v({"batchId": "b", "manifest": {"bucket": "my-bucket", "key": "x/items", "format": "JSON"}})
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
    ],
)
def test_bad_input_names_the_field(event, message):
    with pytest.raises(InvalidInput) as err:
        v(event)
    assert message in str(err.value)


def test_json_and_csv_manifests_parse():
    assert parse_manifest(b'[{"a": 1}, 2]', "JSON", "m") == [{"a": 1}, 2]
    assert parse_manifest(b"\xef\xbb\xbfa,b\n1,2\n\n3,4\n", "CSV", "m") == [{"a": "1", "b": "2"}, {"a": "3", "b": "4"}]


@pytest.mark.parametrize(
    "body, fmt, message",
    [
        (b"\xff\xfe", "JSON", "not UTF-8 text"),
        (b"[1,", "JSON", "not valid JSON (Expecting value at line 1 column 4)"),
        (b"", "CSV", "needs a header row"),
        (b"a,a\n1,2\n", "CSV", "empty or repeated column names"),
    ],
)
def test_malformed_manifests_are_named(body, fmt, message):
    with pytest.raises(InvalidManifest) as err:
        parse_manifest(body, fmt, "manifest s3://b/k")
    assert str(err.value).startswith("manifest s3://b/k: ") and message in str(err.value)


def test_item_checks():
    assert check_items([{"a": 1}] * 3, max_item_bytes=100, where="items") == 3
    with pytest.raises(InvalidManifest, match="the batch is empty"):
        check_items([], max_item_bytes=100, where="items")
    with pytest.raises(InvalidInput, match=r"items\[1\]: item is 108 bytes, more than 100"):
        check_items([{}, {"blob": "x" * 97}], max_item_bytes=100, where="items")
