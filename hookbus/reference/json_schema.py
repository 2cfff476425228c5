"""The config as JSON Schema, for editors that complete and check YAML recipes."""

from __future__ import annotations

from typing import Any

from hookbus.config import Config

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def config_json_schema() -> dict[str, Any]:
    """pydantic's JSON Schema of :class:`hookbus.engine.config.Config`, with its dialect named.

    Sections reject unknown keys (``additionalProperties: false``), so an editor using
    it flags a typo as the CLI would; every key carries its description and default.
    """
    schema = Config.model_json_schema()
    return {"$schema": SCHEMA_DIALECT, **schema}
