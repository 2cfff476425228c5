"""SSL methods as declared units: the registry of method entries, and the rules it checks.

A method entry (:class:`MethodSpec`) states, as torch-free data, everything hookbus needs
to know about one SSL method: its loss (by registered name), the model parts that loss
reads, how many views of each image it takes, its config section and defaults, and the
hooks it adds to the default set, with how each is built from the config. The config's
validation (:func:`check_method`), ``default_hooks`` and the methods table of the docs
read the entries; the kernel itself names no method.

The entries hookbus ships are the modules of ``hookbus.methods``, imported by name in
their package (it lists them); each registers itself here, and the kernel reads them as
data without naming one. An entry is generic in the config it reads (``MethodSpec[C]``):
its hooks' parameters and its check take the whole config with the methods' sections
(``hookbus.parts.config.Config``), so a type checker sees the settings they read. A loss
that a user module registers
(``trainer.imports``) has no entry: it is held to the default rules (two views or more,
no method's model section) and adds no hooks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from hookbus.engine.registry import Registry

if TYPE_CHECKING:
    from hookbus.engine.config import Config, Section
    from hookbus.engine.methods.composition import Setting

C = TypeVar("C", bound="Config", contravariant=True)
"""The config an entry's functions read: the whole config with the methods' sections."""

SHARED_PARTS = {"predictor": "model.predictor.dims", "prototypes": "model.prototypes.count"}
"""The optional model parts that several methods read, each with the key that turns it on."""


@dataclass(frozen=True)
class Views:
    """How many views of each image a method reads: ``minimum`` to ``maximum`` (None: no
    limit) of ``data.num_views``, and whether small crops (``data.small_views``) may come
    too. ``reason`` completes the refusal: ``loss.name <name> <reason>``."""

    minimum: int = 2
    maximum: int | None = None
    small_views: bool = True
    reason: str = "compares views of each image"


@dataclass(frozen=True)
class MethodHook(Generic[C]):
    """One hook of a method: the registered hook ``name``
    (``hookbus.engine.bus.hook_registry``), built as ``hook_class(**params(cfg))``, only
    when ``when(cfg)`` (None: always). ``role`` says what it is for the method, in the
    methods table (``key encoder``)."""

    name: str
    params: Callable[[C], dict[str, Any]] = field(default=lambda cfg: {})
    when: Callable[[C], bool] | None = None
    role: str = ""


@dataclass(frozen=True)
class ModelSection:
    """A model part only this method builds, configured at ``model.<key>`` by
    ``section``; any other method refuses a changed key there. ``part`` names it in
    messages (``the <title> decoder``)."""

    key: str
    part: str
    section: type[Section]


@dataclass(frozen=True)
class MethodSpec(Generic[C]):
    """One SSL method, declared once.

    ``name`` is its ``loss.name`` and the name of its registered loss; ``title`` its name
    in the docs. ``parts`` are the model parts its loss reads and needs: of
    :data:`SHARED_PARTS`, or the ``part`` of its ``model_section``. ``section`` holds its
    settings under ``loss.<name>`` (with their defaults; the whole config declares it).
    ``check`` states what else a
    config of the method must satisfy (raising ValueError), after the shared rules.
    ``reads`` names the other methods whose sections (``loss.<other>``) its loss and hooks
    read too, shared with their owner. With ``exclusive_section`` a changed key of its own
    section is refused under any ``loss.name`` that does not read it (itself, or a method
    that lists it in ``reads``). ``order`` is its place in the config reference, the docs
    and ``loss.name``'s description; ``default`` marks the method of a config that names
    none (one entry).

    ``model`` names, as ``"package.module:function"``, the builder of the method's own
    model in place of the SSL model (backbone, head, predictor, prototypes), called as
    ``function(cfg, backbone, name)`` with the built backbone and its name for messages.
    It is imported only when a model is built, so an entry stays torch-free. None: the
    SSL model.

    ``compose`` states how the method's settings follow from the backbone, the images and
    the machine (:class:`hookbus.engine.methods.composition.Setting`): it returns the method's
    part of a composed recipe (``model``, ``loss`` and, where the method needs them,
    ``data`` views, batch and ``optimizer`` keys) as a nested mapping, or raises
    ValueError for a backbone the method cannot train. ``aliases`` are the names that
    ``--method`` takes beside ``name`` and ``title`` (a common name, when the loss's
    differs). None: the method cannot be composed, only trained from a recipe.
    """

    name: str
    title: str
    parts: tuple[str, ...] = ()
    views: Views = Views()
    hooks: tuple[MethodHook[C], ...] = ()
    section: type[Section] | None = None
    model_section: ModelSection | None = None
    check: Callable[[C], None] | None = None
    reads: tuple[str, ...] = ()
    exclusive_section: bool = False
    order: int = 1000
    default: bool = False
    model: str | None = None
    compose: Callable[[Setting], dict[str, Any]] | None = None
    aliases: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.model is not None:
            module, _, function = self.model.partition(":")
            if not module or not function.isidentifier():
                raise ValueError(
                    f"method {self.name!r}: model must be 'package.module:function', got "
                    f"{self.model!r}"
                )
        own = {self.model_section.part} if self.model_section else set()
        unknown = sorted(set(self.parts) - set(SHARED_PARTS) - own)
        if unknown:
            raise ValueError(
                f"method {self.name!r}: unknown model parts {', '.join(unknown)} (known: "
                f"{', '.join([*SHARED_PARTS, *own])})"
            )


METHODS: Registry[MethodSpec[Any]] = Registry("method")
"""The SSL methods by ``loss.name``; the entries of ``hookbus.methods`` register
themselves when that package is imported (:func:`hookbus.config.validate_config` does)."""

S = TypeVar("S", bound=MethodSpec[Any])


def register_method(spec: S) -> S:
    """Register ``spec`` under its name and return it; a name registered twice is refused."""
    METHODS.register(spec.name)(spec)
    return spec


def methods_in_order() -> list[MethodSpec[Any]]:
    """The registered methods by their ``order``, then name."""
    return sorted((METHODS.get(name) for name in METHODS.names()), key=lambda s: s.order)


def method_of(name: str) -> MethodSpec[Any] | None:
    """The method whose ``loss.name`` is ``name``, or None (a loss without an entry).
    RuntimeError when no entry is registered at all: the config was validated without
    hookbus's methods (``hookbus.methods``, which :func:`hookbus.config.validate_config`
    imports), and every method's rules would be skipped."""
    if not METHODS.names():
        raise RuntimeError(
            "no SSL method entry is registered: validate configs with "
            "hookbus.config.validate_config (it imports hookbus.methods)"
        )
    return METHODS.get(name) if name in METHODS else None


def default_method() -> MethodSpec[Any]:
    """The method of a config that names none: the one entry marked ``default``."""
    marked = [spec for spec in methods_in_order() if spec.default]
    if len(marked) != 1:
        names = ", ".join(spec.name for spec in marked) or "none"
        raise ValueError(f"exactly one method entry must be the default (marked: {names})")
    return marked[0]


def readers(part: str) -> list[str]:
    """The methods whose loss reads the model part ``part``, sorted."""
    return [name for name in METHODS.names() if part in METHODS.get(name).parts]


def section_readers(name: str) -> list[str]:
    """The methods that read the section ``loss.<name>`` of the method ``name``: itself and
    those that list it in their ``reads``, sorted."""
    return sorted(
        other for other in METHODS.names() if other == name or name in METHODS.get(other).reads
    )


def check_method(cfg: Config, spec: MethodSpec[Any] | None, views: Views | None = Views()) -> None:
    """Raise ValueError naming the key when ``cfg`` does not fit the method ``spec`` of its
    ``loss.name``: a part the method needs is not configured, a model section of another
    method is set, a key of an exclusive loss section it does not read is set, or the views
    are not the method's; then the method's own ``check``.
    A loss without an entry (None) is held to ``views`` (None: any number of views)."""
    name = cfg.loss.name
    for part in spec.parts if spec else ():
        key = SHARED_PARTS.get(part)
        if key and not config_value(cfg, key):
            plural = "" if part.endswith("s") else "a "
            raise ValueError(f"loss.name {name} needs {plural}{part}: set {key}")
    for other in methods_in_order():
        own = other.model_section
        if other is spec or own is None:
            continue
        changed = getattr(cfg.model, own.key).changed_keys()
        if changed:
            raise ValueError(
                f"model.{own.key}.{changed[0]}: the {other.title} {own.part} is built only for "
                f"loss.name {other.name}, not {name}; remove it"
            )
    for other in methods_in_order():
        if not other.exclusive_section or other.section is None:
            continue
        owners = section_readers(other.name)
        changed = getattr(cfg.loss, other.name).changed_keys()
        if changed and name not in owners:
            readers_text = " and ".join(
                [", ".join(owners[:-1]), owners[-1]] if owners[1:] else owners
            )
            raise ValueError(
                f"loss.{other.name}.{changed[0]} is read by loss.name {readers_text} "
                f"only, not {name}; remove it"
            )
    rule = spec.views if spec else views
    if rule is not None:
        check_views(cfg, rule)
    if spec and spec.check:
        spec.check(cfg)


def check_views(cfg: Config, views: Views) -> None:
    """Raise ValueError when ``data.num_views`` and ``data.small_views.count`` are not
    what ``views`` allows for ``loss.name``."""
    count, small = cfg.data.num_views, cfg.data.small_views.count
    name, reason = cfg.loss.name, views.reason
    if views.maximum == views.minimum and not views.small_views:
        if count != views.minimum or small:
            raise ValueError(
                f"loss.name {name} {reason}: set data.num_views={views.minimum} and "
                f"data.small_views.count=0 (got {count} and {small})"
            )
        return
    if count < views.minimum:
        raise ValueError(
            f"loss.name {name} {reason}: data.num_views must be at least {views.minimum} "
            f"(got {count})"
        )
    if views.maximum is not None and count > views.maximum:
        raise ValueError(
            f"loss.name {name} {reason}: data.num_views must be at most {views.maximum} "
            f"(got {count})"
        )
    if small and not views.small_views:
        raise ValueError(
            f"loss.name {name} {reason}: it takes no small views; set data.small_views.count=0 "
            f"(got {small})"
        )


def config_value(cfg: Config, key: str) -> Any:
    """The value (a section or a setting) of the dotted ``key`` of ``cfg``."""
    value: Any = cfg
    for part in key.split("."):
        value = getattr(value, part)
    return value
