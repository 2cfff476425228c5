"""The local folder that keeps remote shards' files: ``data.shards.cache_dir``.

A file is fetched with the streaming library's store download (for ``s3://``: boto3,
``S3_ENDPOINT_URL`` naming an S3-compatible store) the first time it is needed, and
kept. The folder keeps one URL's shards, as they are in the store: opening notes the URL
in ``hookbus_source.json`` and refuses a folder that keeps another URL's, and a kept
``index.json`` must equal the store's, re-read at each opening, so that a folder reused
for other shards, or shards rewritten in place, are one line rather than stale samples.
A shard is checked against its index entry before it is kept
(:func:`~hookbus.parts.data.shard_index.check_shard`), and the folder itself must be one
hookbus can write in: a file, a symbolic link loop or a read-only folder is one line
naming ``data.shards.cache_dir``; a full disk, one line and exit status 1.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from streaming.base.storage import CloudDownloader

from hookbus.engine.bounded_files import read_bounded
from hookbus.engine.errors import DataError, write_failure

SOURCE_FILE = "hookbus_source.json"
"""The file of the cache folder that names the URL whose files it keeps."""

INDEX_FILE = "index.json"
MAX_INDEX_BYTES = 64 << 20
"""Largest ``index.json`` read (about 500 bytes a shard: some 100,000 shards)."""
MAX_NOTE_BYTES = 64 << 10
"""Largest ``hookbus_source.json`` read (it names one URL)."""
WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM)
"""The errors of a download that are the cache folder's, not the store's."""

DOWNLOAD_TIMEOUT_S = 120.0
"""How long one try of a download waits for the store to send a byte (botocore tries
a request 3 times)."""


class ShardCache:
    """The files of the shards at URL ``remote``, kept in ``folder``."""

    def __init__(self, remote: str, folder: Path) -> None:
        self.remote = remote.rstrip("/")  # PREFIX/ names PREFIX's files, not PREFIX//'s
        self.folder = folder

    def open(self) -> None:
        """Claim ``folder`` for ``remote``, or refuse it (DataError) when it is no folder
        hookbus can write in (a file, a symbolic link loop, read-only), or keeps the files
        of another URL, or an ``index.json`` other than the store's."""
        self._check_folder()
        note, index = self.folder / SOURCE_FILE, self.folder / INDEX_FILE
        if not os.path.lexists(index):  # nothing kept: the folder is this URL's from now on
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
            if self._kept(fresh, "shard index", MAX_INDEX_BYTES) != self._kept(
                index, "shard index", MAX_INDEX_BYTES
            ):
                raise DataError(
                    f"{self.remote}: the shards changed since data.shards.cache_dir "
                    f"{self.folder} kept them (another {INDEX_FILE}): empty the folder"
                )
        finally:
            fresh.unlink()

    def _check_folder(self) -> None:
        """DataError unless ``folder`` is a folder, or nothing yet (then it is made)."""
        where = f"data.shards.cache_dir {self.folder}"
        try:
            status = os.stat(self.folder)
        except FileNotFoundError:
            status = None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise DataError(f"{where} is a symbolic link loop: give a folder") from None
            raise DataError(f"cannot read {where}: {exc.strerror or exc}") from None
        if status is not None and not stat.S_ISDIR(status.st_mode):
            kind = "a file" if stat.S_ISREG(status.st_mode) else "not a file or folder"
            raise DataError(f"{where} is {kind}, not a folder: give a folder")
        if status is None:
            try:
                self.folder.mkdir(parents=True)
            except OSError as exc:
                raise DataError(f"cannot make {where}: {exc.strerror or exc}") from None

    @staticmethod
    def _kept(path: Path, what: str, limit: int) -> bytes:
        """The bytes of the kept file ``path`` (a regular file within ``limit`` bytes)."""
        return read_bounded(path, f"data.shards.cache_dir's {what}", limit, error=DataError)

    @classmethod
    def _source(cls, note: Path) -> str | None:
        """The URL ``note`` names; None when there is none or it cannot be read."""
        try:
            source = json.loads(cls._kept(note, "note", MAX_NOTE_BYTES))["url"]
        except (DataError, ValueError, KeyError, TypeError):
            return None
        return source if isinstance(source, str) else None

    def fetch(self, name: str, check: Callable[..., None] | None = None) -> str:
        """The local path of the shard folder's file ``name``, downloaded if not kept;
        ``check(path, name=URL)`` runs on a download before it is kept (it raises to
        refuse it, naming the URL)."""
        local = self.folder / name
        if os.path.lexists(local):
            return str(local)
        fresh = self._download_aside(name)
        try:
            if check is not None:
                check(fresh, name=f"{self.remote}/{name}")
            os.replace(fresh, local)
        except OSError as exc:
            raise self._write_error(exc) from None
        finally:
            fresh.unlink(missing_ok=True)
        return str(local)

    def _download(self, name: str, local: Path) -> None:
        """Download the store's ``name`` to ``local`` (boto3 writes a file aside and renames
        it: a file there is whole)."""
        url = f"{self.remote}/{name}"
        try:
            CloudDownloader.direct_download(url, str(local), DOWNLOAD_TIMEOUT_S)
        except OSError as exc:
            if exc.errno in WRITE_ERRNOS:
                raise self._write_error(exc) from None
            raise DataError(f"cannot fetch {url}: {exc}") from None
        except Exception as exc:  # any store's error: missing, denied, offline
            raise DataError(f"cannot fetch {url}: {exc}") from None

    def _write_error(self, exc: OSError) -> Exception:
        """A full disk is the machine's (exit 1); a folder hookbus may not write in, the
        user's (exit 2)."""
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return write_failure(self.folder, exc, "free space, then run the same command again")
        return DataError(
            f"cannot write in data.shards.cache_dir {self.folder}: {exc.strerror or exc}: "
            "give a folder hookbus can write in"
        )

    def _download_aside(self, name: str) -> Path:
        """The store's ``name`` downloaded to a new file of ``folder``, which the caller
        removes (a name of its own: ranks sharing the folder may open it at once)."""
        try:
            handle, path = tempfile.mkstemp(dir=self.folder, prefix=f".{name}.")
            os.close(handle)
            os.unlink(path)  # the download writes only where no file is
        except OSError as exc:
            raise self._write_error(exc) from None
        self._download(name, Path(path))
        return Path(path)

    def _write_atomically(self, path: Path, text: str) -> None:
        try:
            handle, temporary = tempfile.mkstemp(dir=self.folder, prefix=f".{path.name}.")
        except OSError as exc:
            raise self._write_error(exc) from None
        try:
            with os.fdopen(handle, "w") as file:
                file.write(text)
            os.replace(temporary, path)
        except OSError as exc:
            os.unlink(temporary)
            raise self._write_error(exc) from None
