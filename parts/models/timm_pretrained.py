"""timm's pretrained weights for a name with a tag (``timm:vit_small_patch14_dinov2.lvd142m``),
from the local cache or downloaded, and never a hang where there is no network.

hookbus downloads only when a user names a tag. The weights come from where timm's own
pretrained config says (the Hugging Face hub, ``hf_hub_id``, or a URL into torch's hub
cache) and are cached there, so the next run reads them from disk. A file already in the
cache is loaded from it without asking the network (timm's ``pretrained_cfg_overlay``
``file``). Otherwise the server must answer a HEAD request within :data:`PROBE_SECONDS`
(the name lookup included) before timm downloads; with ``HF_HUB_OFFLINE`` set, or no
answer, the run stops at once with one line saying how to point
``model.backbone.weights`` at a local file instead.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any
from urllib.error import HTTPError, URLError
from urllib.parse import urlparse
from urllib.request import Request, urlopen

from torch import nn

from hookbus.engine.config.model_names import TIMM_PREFIX, split_tag
from hookbus.engine.errors import ConfigError

PROBE_SECONDS = 5.0
"""How long the server of the weights has to answer (name lookup included)."""

HUB_FILES = ("model.safetensors", "pytorch_model.bin")
"""The files timm reads from a Hugging Face hub repository, in its order."""

OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
"""Environment variables that say the machine is offline (``1``, ``true``, ``yes``, ``on``)."""


def _set(variable: str) -> bool:
    return os.environ.get(variable, "").strip().lower() in ("1", "true", "yes", "on")


def cached_file(pretrained_cfg: Any) -> Path | None:
    """The weights of ``pretrained_cfg`` already in the local cache (the hub's, or
    torch's hub folder for a URL), or None."""
    hub_id = pretrained_cfg.hf_hub_id
    if hub_id:
        from huggingface_hub import try_to_load_from_cache

        names = (pretrained_cfg.hf_hub_filename,) if pretrained_cfg.hf_hub_filename else HUB_FILES
        for name in names:
            found = try_to_load_from_cache(hub_id, name)
            if isinstance(found, str):
                return Path(found)
        return None
    if pretrained_cfg.url:
        import torch.hub

        name = Path(urlparse(pretrained_cfg.url).path).name
        path = Path(torch.hub.get_dir()) / "checkpoints" / name
        return path if path.is_file() else None
    return None


def source_url(pretrained_cfg: Any) -> str:
    """Where the weights of ``pretrained_cfg`` download from: the hub's endpoint
    (``HF_ENDPOINT``) for a hub id, else the file's URL."""
    if pretrained_cfg.hf_hub_id:
        from huggingface_hub import constants

        return str(constants.ENDPOINT)
    return str(pretrained_cfg.url)


def reachable(url: str, seconds: float = PROBE_SECONDS) -> str | None:
    """None when the server of ``url`` answers a HEAD request (any HTTP status) within
    ``seconds``, name lookup included (in a daemon thread, since a lookup takes no
    timeout); else why not."""
    outcome: list[str | None] = []

    def ask() -> None:
        try:
            with urlopen(Request(url, method="HEAD"), timeout=seconds):
                outcome.append(None)
        except HTTPError:  # an answer, if not a welcome one: the server is there
            outcome.append(None)
        except (URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            outcome.append(str(reason) or type(exc).__name__)

    thread = threading.Thread(target=ask, name="hookbus-weights-probe", daemon=True)
    thread.start()
    thread.join(seconds + 1)
    if not outcome:
        return f"no answer within {seconds:g} s"
    return outcome[0]


def offline_message(model: str, why: str) -> str:
    """The one line for weights that cannot be had here."""
    base, _ = split_tag(model)
    return (
        f"{TIMM_PREFIX}{model}: timm's pretrained weights are not in the local cache and "
        f"cannot be downloaded ({why}); download them where there is a network "
        f"(timm.create_model({model!r}, pretrained=True) fills the cache, HF_HOME), or save "
        f"them to a file and set model.backbone.name={TIMM_PREFIX}{base} "
        "model.backbone.weights=PATH"
    )


def create_pretrained(timm: Any, model: str, **kwargs: Any) -> nn.Module:
    """``timm.create_model(model, pretrained=True, **kwargs)``, from the cached file when
    there is one; raises :class:`ConfigError` (one line) within seconds when the weights
    are neither cached nor downloadable (offline, host unreachable)."""
    pretrained_cfg = timm.models.get_pretrained_cfg(model)
    if pretrained_cfg is None:
        raise ConfigError(f"{TIMM_PREFIX}{model}: timm has no pretrained weights of that name")
    cached = cached_file(pretrained_cfg)
    if cached is not None:
        return timm.create_model(
            model, pretrained=True, pretrained_cfg_overlay={"file": str(cached)}, **kwargs
        )
    offline = [variable for variable in OFFLINE_VARIABLES if _set(variable)]
    if offline:
        raise ConfigError(offline_message(model, f"{offline[0]} is set"))
    url = source_url(pretrained_cfg)
    why = reachable(url)
    if why is not None:
        raise ConfigError(offline_message(model, f"{url}: {why}"))
    try:
        return timm.create_model(model, pretrained=True, **kwargs)
    except (OSError, RuntimeError, ValueError) as exc:  # the hub's errors are OSErrors
        problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(offline_message(model, problem)) from None
