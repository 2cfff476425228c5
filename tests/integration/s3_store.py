"""The S3 store of the remote-shard tests: the bucket, the credentials boto3 reads, and
uploading a folder as a user does. The server itself (moto's, on a loopback port) and
the uploaded bucket are conftest.py's ``endpoint`` and ``bucket`` fixtures."""

from __future__ import annotations

from pathlib import Path

BUCKET = "photos"
URL = f"s3://{BUCKET}/train"
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "hookbus-test",
    "AWS_SECRET_ACCESS_KEY": "hookbus-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}
"""Credentials for the test server (moto accepts any): the variables boto3 reads."""


def upload(endpoint: str, folder: Path, prefix: str) -> None:
    """Upload the files of ``folder`` under ``s3://photos/PREFIX/``, as a user does."""
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint)
    for path in sorted(folder.iterdir()):
        client.upload_file(str(path), BUCKET, f"{prefix}/{path.name}")
