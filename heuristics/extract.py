"""Forming `KernelFacts` from a bound Helion kernel and the task's shape and dtype.

Inputs, in order of trust:
* Helion's own records on the ConfigSpec: `matmul_facts` (extents, dtypes, block ids of M,
  N, K), `reduction_kernel_fact` (one descriptor per reduction: category, block id,
  extent, load itemsize), `block_sizes` / `reduction_loops` (which slot tunes which block
  id) and `matmul_reduction_epilogue_facts` (Helion's composed fact, kept as a cross-check);
* the kernel's device IR (`bound.host_function.device_ir`): which operations reduce (the
  reduction kinds), over which dimension, and whether the reduced values flow from a
  matmul.  When the IR cannot be read the kinds are left empty and the dataflow unknown.

Binding only needs shapes, so a task without a bound kernel (a replay of a recorded
space) is bound here on CPU tensors; the structure of the kernel is the same on any
machine, only the space's choices differ.
"""

from __future__ import annotations

import functools
from collections import deque
from typing import Any, Iterable

from heuristics.facts import (
    REDUCTION_LOOP,
    RESIDENT,
    USER_TILE,
    KernelFacts,
    MatmulFact,
    ReductionFact,
    compose_epilogue,
)

# aten reduction operations and the kind each one is (softmax decomposes into max and sum).
_REDUCTION_KINDS: dict[str, tuple[str, ...]] = {
    "amax": ("max",), "amin": ("min",), "max": ("max",), "min": ("min",), "sum": ("sum",),
    "mean": ("mean",), "var": ("var",), "var_mean": ("var",), "std": ("var",), "prod": ("prod",),
    "logsumexp": ("logsumexp",), "argmax": ("argmax",), "argmin": ("argmin",),
    "_softmax": ("max", "sum"), "_log_softmax": ("max", "sum"),
}
_MATMUL_OPS = {"addmm", "mm", "bmm", "baddbmm", "matmul", "dot", "dot_scaled"}
# Helion categories with a statically known per-program extent (the others are grid-split
# or data-dependent, and no rule can size them).
_SIZED = {"full_slice", "full_grid", "user_tile", "fixed_tile"}


def facts_for_task(task: Any) -> KernelFacts:
    """Facts for a tuning task (binds the kernel on CPU tensors when the task has none)."""
    if task.spec.family != "helion":
        return KernelFacts(kernel=task.spec.name, shape=tuple(task.shape), dtype=task.dtype,
                           notes=("not a Helion kernel: no compiler records to read facts from",))
    bound = task.bound if task.bound is not None else _bind_on_cpu(task.spec.name, tuple(task.shape), task.dtype)
    return facts_from_bound(task.spec.name, tuple(task.shape), task.dtype, bound)


@functools.lru_cache(maxsize=16)
def _bind_on_cpu(kernel: str, shape: tuple[int, ...], dtype: str) -> Any:
    from autotune.kernels.registry import DTYPES, get_kernel

    spec = get_kernel(kernel)
    return spec.helion_kernel.bind(spec.make_inputs(shape, DTYPES[dtype], "cpu", 0))


def facts_from_bound(kernel: str, shape: tuple[int, ...], dtype: str, bound: Any) -> KernelFacts:
    spec = bound.config_spec
    notes: list[str] = []
    block_slots = _slots(spec.block_sizes, "block_sizes")
    loop_slots = _slots(spec.reduction_loops, "reduction_loops")
    extents = {bid: s.size_hint for s in spec.block_sizes for bid in s.block_ids}
    graphs = _graphs(bound, notes)

    precision = getattr(getattr(bound, "settings", None), "dot_precision", None)
    matmuls = tuple(_matmul_fact(m, block_slots, precision) for m in getattr(spec, "matmul_facts", []) or [])
    reductions: list[ReductionFact] = []
    kernel_fact = getattr(spec, "reduction_kernel_fact", None)
    if kernel_fact is not None:
        grid = tuple(kernel_fact.grid_axis_block_ids)
        rows = _product(extents.get(b) for b in grid)
        row_slot = block_slots.get(grid[0]) if len(grid) == 1 else None
        for descriptor in kernel_fact.reductions:
            category = descriptor.category.value
            if category not in _SIZED:
                notes.append(f"reduction over block {descriptor.block_id} is {category}: not sized")
                continue
            nodes = _reduction_nodes(graphs, descriptor.graph_id, descriptor.size_hint)
            reductions.append(ReductionFact(
                block_id=descriptor.block_id,
                axis=_axis(nodes),
                extent=descriptor.size_hint,
                residency=_residency(descriptor.block_id, loop_slots, block_slots),
                loop_slot=loop_slots.get(descriptor.block_id) or block_slots.get(descriptor.block_id),
                kinds=tuple(k for node in nodes for k in _kinds(node)),
                input_itemsize=int(descriptor.input_load_itemsize),
                rows=rows,
                row_slot=row_slot,
                over_matmul_output=_flows_from_matmul(nodes, graphs) if graphs is not None else None,
            ))
    found = tuple(reductions)
    compiler_fact = bool(getattr(spec, "matmul_reduction_epilogue_facts", None))
    return KernelFacts(kernel=kernel, shape=shape, dtype=dtype, matmuls=matmuls, reductions=found,
                       epilogue=compose_epilogue(matmuls, found), compiler_epilogue_fact=compiler_fact,
                       notes=tuple(notes))


# -- ConfigSpec ----------------------------------------------------------------------------------
def _slots(items: Iterable[Any], key: str) -> dict[int, str]:
    """block id -> slot name, in the flat layout's order (`block_sizes[i]` is the i-th item)."""
    slots: dict[int, str] = {}
    for index, item in enumerate(items):
        for block_id in item.block_ids:
            slots[block_id] = f"{key}[{index}]"
    return slots


def _matmul_fact(fact: Any, block_slots: dict[int, str], dot_precision: str | None) -> MatmulFact:
    from autotune.kernels.registry import dtype_name

    def slot(block_id: int | None) -> str | None:
        return block_slots.get(block_id) if block_id is not None else None

    return MatmulFact(
        m=fact.static_m, k=fact.static_k, n=fact.static_n,
        lhs_dtype=dtype_name(fact.lhs_dtype), rhs_dtype=dtype_name(fact.rhs_dtype),
        m_block_id=fact.m_block_id, n_block_id=fact.n_block_id, k_block_id=fact.k_block_id,
        m_slot=slot(fact.m_block_id), n_slot=slot(fact.n_block_id), k_slot=slot(fact.k_block_id),
        dot_precision=str(dot_precision) if dot_precision is not None else None,
    )


def _residency(block_id: int, loop_slots: dict[int, str], block_slots: dict[int, str]) -> str:
    if block_id in loop_slots:
        return REDUCTION_LOOP
    if block_id in block_slots:
        return USER_TILE
    return RESIDENT


def _product(values: Iterable[int | None]) -> int | None:
    result = 1
    for value in values:
        if value is None:
            return None
        result *= int(value)
    return result


# -- device IR -------------------------------------------------------------------------------------
def _graphs(bound: Any, notes: list[str]) -> dict[int, Any] | None:
    try:
        device_ir = bound.host_function.device_ir
        return {info.graph_id: info.graph for info in device_ir.graphs}
    except Exception as error:  # noqa: BLE001 - an internal API: degrade to fewer facts
        notes.append(f"device IR not readable ({type(error).__name__}): reduction kinds unknown")
        return None


def _op_name(target: Any) -> str:
    """'aten.amax.default' -> 'amax'; a plain function -> its name."""
    text = str(target)
    if text.startswith(("aten.", "prims.")):
        return text.split(".")[1]
    return getattr(target, "__name__", text)


def _reduction_nodes(graphs: dict[int, Any] | None, graph_id: int, extent: int) -> list[Any]:
    """Reduction nodes of one graph whose reduced dimension has this extent (or a symbolic one)."""
    if graphs is None or graph_id not in graphs:
        return []
    found = []
    for node in graphs[graph_id].nodes:
        if node.op != "call_function" or _op_name(node.target) not in _REDUCTION_KINDS:
            continue
        size = _reduced_size(node)
        if size is None or not isinstance(size, int) or size == extent:
            found.append(node)
    return found


def _reduced_dims(node: Any) -> list[int] | None:
    dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    if dims is None:
        return None
    dims = [dims] if isinstance(dims, int) else list(dims)
    value = _input_value(node)
    rank = getattr(value, "ndim", None)
    if rank is None or not all(isinstance(d, int) for d in dims):
        return None
    return [d % rank for d in dims]


def _input_value(node: Any) -> Any:
    """The reduced tensor's fake value.  Helion moves some inputs (mean's) into an
    `_inductor_lowering_extra` node passed as `_extra_args`: read through it."""
    source = node.args[0] if node.args else None
    extra = node.kwargs.get("_extra_args")
    if source is None and extra:
        source = extra[0].args[0] if getattr(extra[0], "args", None) else extra[0]
        if isinstance(source, (list, tuple)) and source:
            source = source[0]
    return getattr(source, "meta", {}).get("val")


def _reduced_size(node: Any) -> Any:
    dims = _reduced_dims(node)
    value = _input_value(node)
    if not dims or len(dims) != 1 or value is None:
        return None
    size = value.shape[dims[0]]
    return int(size) if isinstance(size, int) else size


def _axis(nodes: list[Any]) -> int | None:
    axes = {tuple(d) for n in nodes if (d := _reduced_dims(n)) is not None}
    return next(iter(axes))[0] if len(axes) == 1 and len(next(iter(axes))) == 1 else None


def _kinds(node: Any) -> tuple[str, ...]:
    return _REDUCTION_KINDS[_op_name(node.target)]


def _flows_from_matmul(nodes: list[Any], graphs: dict[int, Any]) -> bool | None:
    """Whether any reduced value depends on a matmul (directly, or as a loop's carried result)."""
    if not nodes:
        return None
    seen: set[Any] = set()
    queue = deque(nodes)
    while queue:
        node = queue.popleft()
        if node in seen:
            continue
        seen.add(node)
        if node.op == "call_function":
            name = _op_name(node.target)
            if name in _MATMUL_OPS:
                return True
            if name == "_for_loop" and _graph_has_matmul(graphs, node.args[0], set()):
                return True
        queue.extend(node.all_input_nodes)
    return False


def _graph_has_matmul(graphs: dict[int, Any], graph_id: Any, visited: set[int]) -> bool:
    if not isinstance(graph_id, int) or graph_id not in graphs or graph_id in visited:
        return False
    visited.add(graph_id)
    for node in graphs[graph_id].nodes:
        if node.op != "call_function":
            continue
        name = _op_name(node.target)
        if name in _MATMUL_OPS or (name == "_for_loop" and _graph_has_matmul(graphs, node.args[0], visited)):
            return True
    return False
