"""How the default hook set is built: the table of optional hooks (each from its own
section where it needs no other) and a method's hooks from its entry (``method_hook``)."""

from __future__ import annotations

import pytest

from hookbus.config import Config, validate_config
from hookbus.engine.config import CudaCacheConfig, OnlineProbeConfig
from hookbus.hook_set import OPTIONAL_HOOKS, default_hooks, method_hook
from hookbus.hooks.cuda_cache import CudaCacheHook
from hookbus.hooks.methods.dino_centering import DinoCenteringHook
from hookbus.hooks.methods.freeze_prototypes import FreezePrototypesHook
from hookbus.hooks.methods.key_queue import KeyQueueHook
from hookbus.hooks.online_probe import OnlineProbeHook


def config(**sections: object) -> Config:
    return validate_config(dict(sections))


def test_each_row_is_turned_on_by_a_boolean_and_reads_an_existing_section() -> None:
    cfg = config()
    for row in OPTIONAL_HOOKS:
        value: object = cfg
        for part in row.on.split("."):
            value = getattr(value, part)
        assert isinstance(value, bool), row.on
        if row.reads:
            section: object = cfg
            for part in row.reads.split("."):
                section = getattr(section, part)
            assert row.on.startswith(row.reads + "."), row


def test_a_hook_that_needs_no_other_section_is_built_from_its_own() -> None:
    probe = OnlineProbeHook.from_section(
        OnlineProbeConfig(enabled=True, num_classes=3, lr=0.5, optimizer="sgd")
    )
    assert (probe.num_classes, probe.lr) == (3, 0.5)
    cache = CudaCacheHook.from_section(CudaCacheConfig(clear_cuda_cache=True, clear_freq=9))
    assert cache.clear_freq == 9
    with pytest.raises(ValueError, match="hooks.online_probe.num_classes is required"):
        OnlineProbeHook.from_section(OnlineProbeConfig())


def test_the_table_hands_each_row_its_section() -> None:
    cfg = config(
        model={"cuda_cache": {"clear_cuda_cache": True, "clear_freq": 4}},
        hooks={"online_probe": {"enabled": True, "num_classes": 5}},
    )
    built = {type(hook): hook for hook in default_hooks(cfg)}
    assert built[CudaCacheHook].clear_freq == 4
    assert built[OnlineProbeHook].num_classes == 5


@pytest.mark.parametrize(
    ("loss", "hook_name", "hook_class", "expected"),
    [
        ({"name": "moco", "moco": {"queue_size": 96}}, "key_queue", KeyQueueHook, {"size": 96}),
        (
            {"name": "swav", "swav": {"freeze_prototypes_iterations": 7}},
            "freeze_prototypes",
            FreezePrototypesHook,
            {"iterations": 7, "epochs": 0},
        ),
        (
            {"name": "dino", "dino": {"freeze_last_layer_epochs": 2}},
            "freeze_prototypes",
            FreezePrototypesHook,
            {"iterations": 0, "epochs": 2},
        ),
        (
            {"name": "dino", "dino": {"center_momentum": 0.8}},
            "dino_centering",
            DinoCenteringHook,
            {"center_momentum": 0.8},
        ),
    ],
)
def test_method_hook_builds_a_hook_as_the_method_entry_declares_it(
    loss: dict[str, object], hook_name: str, hook_class: type, expected: dict[str, object]
) -> None:
    model = {"prototypes": {"count": 8}} if loss["name"] in ("swav", "dino") else {}
    hook = method_hook(config(loss=loss, model=model), hook_name)
    assert isinstance(hook, hook_class)
    assert {key: getattr(hook, key) for key in expected} == expected


def test_method_hook_refuses_a_hook_the_method_does_not_have_or_has_turned_off() -> None:
    with pytest.raises(ValueError, match="loss.name nt_xent has no hook 'key_queue'"):
        method_hook(config(), "key_queue")
    off = config(
        loss={"name": "swav", "swav": {"queue_size": 0}}, model={"prototypes": {"count": 8}}
    )
    with pytest.raises(ValueError, match="hook 'swav_queue' is off for this config"):
        method_hook(off, "swav_queue")
