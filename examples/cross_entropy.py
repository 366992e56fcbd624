"""Cross-entropy over a large vocabulary, one loss per row, as a user would write it in Helion.

    autotune tune examples/cross_entropy.py:kernel --shape 4096x128256 --dtype bfloat16

The shape is NxV: logits are [N, V], labels [N] (int64); the losses come out in float32.
"""

import helion
import helion.language as hl
import torch

import autotune


@helion.kernel(static_shapes=True)
def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    n, v = logits.size()
    losses = torch.empty([n], dtype=torch.float32, device=logits.device)
    flat = logits.view(-1)
    for rows in hl.tile(n):
        values = logits[rows, :].to(torch.float32)
        peak = torch.amax(values, dim=-1, keepdim=True)
        log_sum = torch.log(torch.sum(torch.exp(values - peak), dim=-1)) + peak.squeeze(-1)
        picked = hl.load(flat, [rows.index * v + labels[rows]]).to(torch.float32)
        losses[rows] = log_sum - picked
    return losses


def inputs(shape, dtype, device):
    n, v = shape
    logits = torch.randn(n, v, device=device).mul_(4).to(dtype)
    return logits, torch.randint(0, v, (n,), device=device)


def torch_cross_entropy(logits, labels):
    return torch.nn.functional.cross_entropy(logits, labels, reduction="none").float()


_compiled = {}


def compiled_cross_entropy(logits, labels):
    if "fn" not in _compiled:
        _compiled["fn"] = torch.compile(torch_cross_entropy, dynamic=False)
    return _compiled["fn"](logits, labels)


def bytes_moved(shape, dtype):
    n, v = shape
    return n * v * torch.empty((), dtype=dtype).element_size() + n * (8 + 4)


kernel = autotune.Kernel(cross_entropy, inputs=inputs, bytes_moved=bytes_moved,
                         baselines={"torch": torch_cross_entropy, "torch.compile": compiled_cross_entropy})
