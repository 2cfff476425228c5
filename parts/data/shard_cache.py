"""The local folder that keeps remote shards' files: ``data.shards.cache_dir``.

A file is fetched with the streaming library's store download (for ``s3://``: boto3,
``S3_ENDPOINT_URL`` naming an S3-compatible store) the first time it is needed, and
kept. The folder keeps one URL's shards, as they are in the store: opening notes the URL
in ``hookbus_source.json`` and refuses a folder that keeps another URL's, and a kept
``index.json`` must equal the store's, re-read at each opening, so that a folder reused
for other shards, or shards rewritten in place, are one line rather than stale samples.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from streaming.base.storage import CloudDownloader

from hookbus.engine.errors import DataError

SOURCE_FILE = "hookbus_source.json"
"""The file of the cache folder that names the URL whose files it keeps."""

INDEX_FILE = "index.json"

DOWNLOAD_TIMEOUT_S = 120.0
"""How long one try of a download waits for the store to send a byte (botocore tries
a request 3 times)."""


class ShardCache:
    """The files of the shards at URL ``remote``, kept in ``folder``."""

    def __init__(self, remote: str, folder: Path) -> None:
        self.remote = remote.rstrip("/")  # PREFIX/ names PREFIX's files, not PREFIX//'s
        self.folder = folder

    def open(self) -> None:
        """Claim ``folder`` for ``remote``, or refuse it (DataError) when it keeps the
        files of another URL, or an ``index.json`` other than the store's."""
        note, index = self.folder / SOURCE_FILE, self.folder / INDEX_FILE
        if not index.exists():  # nothing kept: the folder is this URL's from now on
            self._write_atomically(note, json.dumps({"url": self.remote}) + "\n")
            return
        source = self._source(note)
        if source != self.remote:
            kept = f"the shards of {source}" if source else f"an {INDEX_FILE} of unknown origin"
            raise DataError(
                f"data.shards.cache_dir {self.folder} keeps {kept}, not {self.remote}'s: "
                "give each URL its own folder"
            )
        fresh = self._download_aside(INDEX_FILE)
        try:
            if fresh.read_bytes() != index.read_bytes():
                raise DataError(
                    f"{self.remote}: the shards changed since data.shards.cache_dir "
                    f"{self.folder} kept them (another {INDEX_FILE}): empty the folder"
                )
        finally:
            fresh.unlink()

    @staticmethod
    def _source(note: Path) -> str | None:
        """The URL ``note`` names; None when there is none or it cannot be read."""
        try:
            source = json.loads(note.read_text())["url"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return source if isinstance(source, str) else None

    def fetch(self, name: str) -> str:
        """The local path of the shard folder's file ``name``, downloaded if not kept."""
        local = self.folder / name
        if not local.exists():
            self._download(name, local)
        return str(local)

    def _download(self, name: str, local: Path) -> None:
        """Download the store's ``name`` to ``local`` (boto3 writes a file aside and renames
        it: a file there is whole)."""
        url = f"{self.remote}/{name}"
        try:
            CloudDownloader.direct_download(url, str(local), DOWNLOAD_TIMEOUT_S)
        except Exception as exc:  # any store's error: missing, denied, offline
            raise DataError(f"cannot fetch {url}: {exc}") from None

    def _download_aside(self, name: str) -> Path:
        """The store's ``name`` downloaded to a new file of ``folder``, which the caller
        removes (a name of its own: ranks sharing the folder may open it at once)."""
        handle, path = tempfile.mkstemp(dir=self.folder, prefix=f".{name}.")
        os.close(handle)
        os.unlink(path)  # the download writes only where no file is
        self._download(name, Path(path))
        return Path(path)

    def _write_atomically(self, path: Path, text: str) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=self.folder, prefix=f".{path.name}.")
        with os.fdopen(handle, "w") as file:
            file.write(text)
        os.replace(temporary, path)
