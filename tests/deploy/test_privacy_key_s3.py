"""Issue 26, one key per lake, on object storage: the key check is read from the footers of
`s3://` partitions (ranged reads), and a day or an erasure under another key is refused with
every object left as it was."""

from __future__ import annotations

import pytest

from tests.deploy._services import MotoS3
from tests.support.token_lake import DAY1, DAY2, POLICY, land
from warehouse.erasure import forget
from warehouse.lake import KEY_MARKER_FILE, Lake, LakeKeyConflict
from warehouse.privacy import PrivacyPolicy, phone_token

OTHER = PrivacyPolicy("token", b"another-key-of-the-same-team-0042")


def _objects(s3: MotoS3, bucket: str) -> dict[str, str]:
    listed = s3.client().list_objects_v2(Bucket=bucket).get("Contents", [])
    return {o["Key"]: o["ETag"] for o in listed}


def test_another_key_is_refused_on_an_s3_lake_and_no_object_changes(
    s3: MotoS3, new_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in s3.env().items():
        monkeypatch.setenv(name, value)
    lake = Lake(f"s3://{new_bucket}/lake")
    land(lake, DAY1)
    assert lake.key_check_of("raw_cdrs", f"date={DAY1}") == POLICY.key_check
    before = _objects(s3, new_bucket)
    assert any(k.endswith(".parquet") for k in before)

    with pytest.raises(LakeKeyConflict):
        land(lake, DAY2, OTHER)
    with pytest.raises(LakeKeyConflict):
        forget(lake, phone_token(OTHER.key, "+4915199988877"), OTHER.key_check)

    assert _objects(s3, new_bucket) == before
    land(lake, DAY2)  # the lake's own key lands
    assert Lake(f"s3://{new_bucket}/lake").key_check_of("raw_cdrs", f"date={DAY2}") == (
        POLICY.key_check
    )


def test_of_two_key_claims_on_an_s3_lake_the_first_holds(
    s3: MotoS3, new_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key claim on S3 (an object created by a conditional PUT): a second first landing,
    which read no claim before the first made one, is refused at its publish
    (`warehouse.lake.Lake.claim_key`), and the claimed key goes on."""
    for name, value in s3.env().items():
        monkeypatch.setenv(name, value)
    uri = f"s3://{new_bucket}/lake"
    first, second = Lake(uri), Lake(uri)
    assert first.key_claimed() is None
    assert second.key_claimed() is None  # both see an empty lake
    assert POLICY.key_check is not None
    assert OTHER.key_check is not None
    first.claim_key(POLICY.key_check)
    with pytest.raises(LakeKeyConflict, match=KEY_MARKER_FILE):
        second.claim_key(OTHER.key_check)
    second.claim_key(POLICY.key_check)  # the claimed key goes on
    assert Lake(uri).key_claimed() == POLICY.key_check
    assert f"lake/{KEY_MARKER_FILE}" in _objects(s3, new_bucket)
