"""``PostSigner`` makes botocore's SigV4 signature, for every endpoint form and credential the wire meets."""

from __future__ import annotations

import datetime

import botocore.auth
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import ReadOnlyCredentials
from botocore.exceptions import NoCredentialsError

from nimbus_core.adapters.sigv4 import PostSigner

DAY_ONE = datetime.datetime(2026, 11, 23, 23, 59, 59)  # naive UTC, as botocore's clock
DAY_TWO = DAY_ONE + datetime.timedelta(seconds=2)
BODY = '{"TableName":"users","Key":{"pk":{"S":"ünï ✓"}}}'.encode()
HEADERS = {
    "X-Amz-Target": "DynamoDB_20120810.GetItem",
    "Content-Type": "application/x-amz-json-1.0",
    "User-Agent": "nimbus/1 botocore/1",  # never signed
    "X-Amzn-Trace-Id": "Root=1-abc;  Parent=def",  # never signed (Lambda's recursion header)
    "X-Odd-Spacing": "  several   spaces  inside ",
}
URLS = [
    "https://dynamodb.us-east-1.amazonaws.com/",
    "https://dynamodb.us-east-1.amazonaws.com:443/",
    "https://dynamodb-fips.us-gov-west-1.amazonaws.com/",
    "http://127.0.0.1:4566/",
    "http://localhost:80/",
    "https://ddb.example:8443/base/",
    "http://[::1]:8000/",
]
PERMANENT = ReadOnlyCredentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", None)
TEMPORARY = ReadOnlyCredentials("ASIAEXAMPLE", "other/secret+key", "IQoJb3JpZ2luX2VjE" * 20)


def _botocore_headers(
    url: str, credentials: ReadOnlyCredentials, now: datetime.datetime, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda *_, **__: now)
    request = AWSRequest(method="POST", url=url, data=BODY, headers=dict(HEADERS))
    SigV4Auth(credentials, "dynamodb", "us-east-1").add_auth(request)
    return dict(request.headers.items())


@pytest.mark.parametrize("url", URLS)
@pytest.mark.parametrize("credentials", [PERMANENT, TEMPORARY], ids=["permanent", "temporary"])
def test_the_signature_is_botocores(
    url: str, credentials: ReadOnlyCredentials, monkeypatch: pytest.MonkeyPatch
) -> None:
    headers = dict(HEADERS)
    PostSigner(url, "dynamodb", "us-east-1").sign(headers, BODY, credentials, DAY_ONE)
    assert headers == _botocore_headers(url, credentials, DAY_ONE, monkeypatch)


def test_the_kept_signing_key_follows_the_date_and_the_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    url = URLS[0]
    signer = PostSigner(url, "dynamodb", "us-east-1")
    for credentials, now in [
        (PERMANENT, DAY_ONE),
        (PERMANENT, DAY_TWO),
        (TEMPORARY, DAY_TWO),
        (PERMANENT, DAY_TWO),
    ]:
        headers = dict(HEADERS)
        signer.sign(headers, BODY, credentials, now)
        assert (
            headers["Authorization"] == _botocore_headers(url, credentials, now, monkeypatch)["Authorization"]
        )


def test_a_signature_covers_the_body() -> None:
    signer = PostSigner(URLS[0], "dynamodb", "us-east-1")
    signed = [dict(HEADERS), dict(HEADERS)]
    signer.sign(signed[0], BODY, PERMANENT, DAY_ONE)
    signer.sign(signed[1], BODY + b" ", PERMANENT, DAY_ONE)
    assert signed[0]["Authorization"] != signed[1]["Authorization"]


def test_missing_credentials_are_botocores_error() -> None:
    with pytest.raises(NoCredentialsError):
        PostSigner(URLS[0], "dynamodb", "us-east-1").sign(
            {}, BODY, ReadOnlyCredentials("", "", None), DAY_ONE
        )
