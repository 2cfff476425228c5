"""The SSL methods' part of the config: their entries, loaded once, and the sections they add
to ``loss`` and ``model``."""

from __future__ import annotations

from typing import Any

from pydantic import Field, create_model

from hookbus.engine.methods.entries import MethodSpec, load_methods
from hookbus.engine.section import Section

METHOD_ENTRIES = load_methods()
"""The SSL methods (``hookbus.methods``), whose sections join ``loss`` and ``model``."""

CLASSIFIER_LOSS = "cross_entropy"
"""The loss of the two evaluation protocols (linear evaluation, fine-tuning): not an SSL
method, it trains a classifier on one view of each image."""


def method_section_class(name: str) -> type[Section]:
    """The section class called ``name`` of a method entry; AttributeError
    when no entry has one."""
    for spec in METHOD_ENTRIES:
        own = spec.model_section
        for section in (spec.section, own.section if own else None):
            if section is not None and section.__name__ == name:
                return section
    raise AttributeError(f"module 'hookbus.engine.config' has no attribute {name!r}")


def loss_names(methods: list[MethodSpec]) -> str:
    """The ``loss.name`` values, for its description: each method's name, with its title
    where the name does not spell it, then the classifier's."""
    names = []
    for spec in methods:
        spelled = spec.name.replace("_", "") in spec.title.lower().replace(" ", "")
        names.append(spec.name if spelled else f"{spec.name} ({spec.title})")
    return ", ".join([*names, f"{CLASSIFIER_LOSS} (linear eval, fine-tuning)"])


def method_loss_sections(base: type[Section], methods: list[MethodSpec]) -> type[Section]:
    """``base`` with the methods' settings: each method's ``loss_fields``, then its
    ``section`` as ``loss.<name>``, in the methods' order."""
    fields: dict[str, Any] = {}
    for spec in methods:
        fields |= spec.loss_fields
    for spec in methods:
        if spec.section is not None:
            fields[spec.name] = (spec.section, Field(default_factory=spec.section))
    return create_model("MethodLosses", __base__=base, __module__=__name__, **fields)


def method_model_sections(base: type[Section], methods: list[MethodSpec]) -> type[Section]:
    """``base`` with the model sections of the methods that have one (``model.<key>``)."""
    fields: dict[str, Any] = {
        own.key: (own.section, Field(default_factory=own.section, description=own.description))
        for spec in methods
        if (own := spec.model_section) is not None
    }
    return create_model("MethodModels", __base__=base, __module__=__name__, **fields)
