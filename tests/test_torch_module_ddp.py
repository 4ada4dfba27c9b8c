"""A converted module trains under ``DistributedDataParallel``: two processes, gloo, loopback.

Each process converts the same model, takes one SGD step on its own half of a batch,
and saves its parameters; DDP averages the gradients, so both must end with identical
parameters, different from the start.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the torch back end needs the optional torch extra")
distributed = pytest.importorskip("torch.distributed", reason="this torch build has no torch.distributed")

pytestmark = pytest.mark.torch


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _train_one_step(rank: int, world: int, port: int, folder: str) -> None:
    import numpy as np

    import converter
    from tests import torch_models

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
    try:
        module = converter.to_torch(torch_models.cnn()).train()
        parallel = torch.nn.parallel.DistributedDataParallel(module)
        optimizer = torch.optim.SGD(parallel.parameters(), lr=0.5)
        rng = np.random.default_rng(100 + rank)  # each process its own data
        x = torch.from_numpy(rng.standard_normal((4, 3, 8, 8)).astype(np.float32))
        target = torch.from_numpy(rng.integers(0, 3, 4))
        torch.nn.functional.cross_entropy(parallel(x), target).backward()
        optimizer.step()
        torch.save({k: v.detach().clone() for k, v in module.named_parameters()}, Path(folder) / f"rank{rank}.pt")
        # Both ranks done before either tears gloo down (one tearing down while the other
        # still talks aborts it: "terminate called without an active exception").
        torch.distributed.barrier()
    finally:
        torch.distributed.destroy_process_group()


def test_ddp_training_step_leaves_identical_parameters(tmp_path: Path) -> None:
    if not distributed.is_available() or not distributed.is_gloo_available():
        pytest.skip("this torch build has no gloo backend")
    import torch.multiprocessing

    import converter
    from tests import torch_models

    torch.multiprocessing.spawn(_train_one_step, args=(2, _free_port(), str(tmp_path)), nprocs=2, join=True)
    first = torch.load(tmp_path / "rank0.pt", weights_only=True)
    second = torch.load(tmp_path / "rank1.pt", weights_only=True)
    start = dict(converter.to_torch(torch_models.cnn()).named_parameters())
    assert first.keys() == second.keys() == start.keys()
    for name in first:
        torch.testing.assert_close(first[name], second[name], rtol=0, atol=0)
        assert not torch.equal(first[name], start[name].detach()), name
