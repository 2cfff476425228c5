"""YAML that cannot hurt: safe loading with bounds on size, aliases and nesting, and
duplicate keys refused.

``yaml.safe_load`` builds no objects from tags, but it expands aliases without limit (a
few hundred bytes of nested aliases, "billion laughs", expand to gigabytes), recurses
once per nesting level, and keeps the last of two equal keys without a word. Here the
document is composed into PyYAML's node graph first (aliases stay shared there, so
composing is cheap), the graph is walked within a budget, and only then is it built.
"""

from __future__ import annotations

from typing import Any

import yaml

from hookbus.engine.errors import ConfigError

MAX_BYTES = 1 << 20
"""Longest config text accepted (1 MiB; recipes are a few kilobytes)."""
MAX_NODES = 100_000
"""Most values a document may hold once its aliases are expanded."""
MAX_DEPTH = 64
"""Deepest nesting of mappings and lists."""


def load_yaml(text: str, where: str) -> Any:
    """The value of the YAML document ``text``; ``where`` names it in errors.

    Raises :class:`ConfigError` for invalid YAML, a text over :data:`MAX_BYTES`, aliases
    that expand beyond :data:`MAX_NODES` values, nesting deeper than :data:`MAX_DEPTH`,
    or a key given twice in one mapping (with both line numbers).
    """
    if len(text.encode("utf-8", errors="replace")) > MAX_BYTES:
        raise ConfigError(f"{where}: the YAML text is over {MAX_BYTES // 1024} KiB")
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except RecursionError:
        raise ConfigError(f"{where}: YAML nested deeper than {MAX_DEPTH} levels") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"invalid YAML in {where}: {yaml_problem(exc)}") from None
    if node is None:
        return None
    _check_graph(node, where)
    try:
        return yaml.SafeLoader(text).construct_document(node)
    except yaml.YAMLError as exc:
        raise ConfigError(f"invalid YAML in {where}: {yaml_problem(exc)}") from None


def _check_graph(root: yaml.Node, where: str) -> None:
    """Walk the node graph, aliases expanded, within the budget; refuse duplicate keys."""
    stack: list[tuple[yaml.Node, int]] = [(root, 1)]
    seen = 0
    checked: set[int] = set()
    while stack:
        node, depth = stack.pop()
        seen += 1
        if seen > MAX_NODES:
            raise ConfigError(
                f"{where}: the YAML expands to over {MAX_NODES} values (aliases of aliases?)"
            )
        if depth > MAX_DEPTH:
            raise ConfigError(f"{where}: YAML nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, yaml.MappingNode):
            if id(node) not in checked:
                checked.add(id(node))
                _refuse_duplicate_keys(node, where)
            for key, value in node.value:
                stack.append((key, depth + 1))
                stack.append((value, depth + 1))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, depth + 1) for item in node.value)


def _refuse_duplicate_keys(node: yaml.MappingNode, where: str) -> None:
    first_line: dict[str, int] = {}
    for key, _ in node.value:
        if not isinstance(key, yaml.ScalarNode) or key.value == "<<":
            continue
        line = key.start_mark.line + 1
        if key.value in first_line:
            raise ConfigError(
                f"{where}: key {key.value!r} is given twice in one mapping (lines "
                f"{first_line[key.value]} and {line}); keep one"
            )
        first_line[key.value] = line


def yaml_problem(exc: yaml.YAMLError) -> str:
    """PyYAML's complaint in one short line, with its line and column."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if mark is not None:
        return f"{problem} at line {mark.line + 1}, column {mark.column + 1}"
    return str(problem)[:200]
