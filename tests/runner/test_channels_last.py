"""model.channels_last: the model and the train batches in NHWC memory format."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from ignite.engine import Engine

from hookbus import Hook, SSLTrainer, default_hooks
from hookbus.engine.errors import PreemptedError
from hookbus.steps import move_to_device
from tests.conftest import tiny_config
from tests.integration.test_preemption import SignalAt

NHWC = torch.channels_last


def test_move_to_device_lays_out_image_batches_channels_last() -> None:
    batch = {
        "views": [torch.randn(2, 3, 4, 4), torch.randn(2, 3, 2, 2)],
        "label": torch.tensor([0, 1]),
        "index": torch.zeros(2, 3, 4, 4, dtype=torch.long),  # not an image: integers
        "name": "kept",
    }
    moved = move_to_device(batch, torch.device("cpu"), channels_last=True)
    assert all(view.is_contiguous(memory_format=NHWC) for view in moved["views"])
    assert not any(view.is_contiguous() for view in moved["views"])
    assert moved["index"].is_contiguous() and moved["label"].tolist() == [0, 1]
    assert moved["name"] == "kept"
    for view, original in zip(moved["views"], batch["views"], strict=True):
        assert torch.equal(view, original)  # the same values, another layout
    plain = move_to_device(batch, torch.device("cpu"))
    assert all(view.is_contiguous() for view in plain["views"])


class Layouts(Hook):
    """Records, at each train forward, whether the image batches and the first
    convolution's kernel are channels-last."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[tuple[bool, bool]] = set()

    def on_forward(self, engine: Engine) -> None:
        state = engine.state
        if not state.train:
            return
        images = [t for t in _tensors(state.last_batch) if t.ndim == 4 and t.is_floating_point()]
        kernel = next(p for p in state.base_model.parameters() if p.ndim == 4)
        views = all(t.is_contiguous(memory_format=NHWC) and not t.is_contiguous() for t in images)
        self.seen.add((bool(images) and views, kernel.is_contiguous(memory_format=NHWC)))


def _tensors(batch: Any) -> list[torch.Tensor]:
    if isinstance(batch, torch.Tensor):
        return [batch]
    if isinstance(batch, dict):
        return [t for value in batch.values() for t in _tensors(value)]
    if isinstance(batch, list | tuple):
        return [t for value in batch for t in _tensors(value)]
    return []


def rgb_config(run_dir: Path, channels_last: bool) -> Any:
    """The tiny test config on 3-channel synthetic images (1-channel tensors are
    channels-last and contiguous at once, so they could not show the layout)."""
    return tiny_config(
        run_dir,
        data={
            "name": "synthetic",
            "image_size": 8,
            "synthetic": {"train_size": 24, "test_size": 8, "channels": 3},
        },
        model={
            "backbone": {"width": 4, "in_channels": 3},
            "head": {"dims": [16, 16, 8]},
            "channels_last": channels_last,
        },
    )


@pytest.mark.slow
@pytest.mark.parametrize("channels_last", [True, False])
def test_a_run_trains_in_the_configured_layout(tmp_path: Path, channels_last: bool) -> None:
    layouts = Layouts()
    state = SSLTrainer(rgb_config(tmp_path / "run", channels_last), hooks=[layouts]).train()
    assert layouts.seen == {(channels_last, channels_last)}
    assert bool(torch.isfinite(state.loss))


class FirstStep(Hook):
    """Keeps the first train step's loss and the gradients of every parameter."""

    def __init__(self) -> None:
        super().__init__()
        self.loss: float | None = None
        self.grads: list[torch.Tensor] = []

    def on_backward(self, engine: Engine) -> None:
        state = engine.state
        if self.loss is None:
            self.loss = state.loss.item()
            self.grads = [p.grad.clone() for p in state.base_model.parameters()]


@pytest.mark.slow
def test_the_layout_changes_only_rounding(tmp_path: Path) -> None:
    first = {True: FirstStep(), False: FirstStep()}
    for channels_last, hook in first.items():
        SSLTrainer(rgb_config(tmp_path / str(channels_last), channels_last), hooks=[hook]).train()
    assert first[True].loss == pytest.approx(first[False].loss, rel=1e-5)
    for nhwc, nchw in zip(first[True].grads, first[False].grads, strict=True):
        torch.testing.assert_close(nhwc, nchw, rtol=1e-3, atol=1e-5)


@pytest.mark.slow
def test_a_channels_last_run_preempted_mid_phase_resumes_bit_exactly(tmp_path: Path) -> None:
    straight = SSLTrainer(rgb_config(tmp_path / "straight", True)).train()
    cfg = rgb_config(tmp_path / "run", True)
    with pytest.raises(PreemptedError, match=r"in phase 3/\d+ after step 2 "):
        SSLTrainer(cfg, hooks=[*default_hooks(cfg), SignalAt(5)]).train()
    resumed = SSLTrainer(cfg).train()
    kernel = next(p for p in resumed.base_model.parameters() if p.ndim == 4)
    assert kernel.is_contiguous(memory_format=NHWC)  # the checkpoint loaded into NHWC weights
    expected = straight.base_model.state_dict()
    assert all(torch.equal(expected[k], v) for k, v in resumed.base_model.state_dict().items())
