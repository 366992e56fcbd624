"""`autotune seeds`: the facts found for a kernel and shape, what each rule made of them, the seeds.

Binds the kernel to CPU tensors (no GPU needed; a GPU's space may offer more choices, so a
seed is shown only if it is a point of the space bound here).  Device limits come from the GPU
when there is one, else the H100 defaults the rules name.  Nothing is written anywhere.

For a matmul + epilogue kernel it also shows which of the family's formulations the formulation
rule picks at this cell, with that formulation's seed and why: the rule answers for the family,
whichever member was named, since picking the member is its job.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from autotune.commands import add_task_arguments

NAME = "seeds"


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(NAME, help="show the heuristic facts, rules and seeds for a kernel and shape")
    add_task_arguments(parser, shape_help="e.g. 4096x32000, or MxKxN for the matmul kernels")
    parser.add_argument("--format", choices=("text", "json"), default="text")


def run(args: argparse.Namespace, console: Console) -> int:
    from autotune.commands import kernel_task_inputs
    from autotune.task import bind_live
    from heuristics import analyse, registered_rules

    spec, shape, dtype = kernel_task_inputs(args)
    task = bind_live(spec, shape, dtype, "cpu")
    analysis = analyse(task)
    formulation = _formulation(spec.name, shape, task.dtype, analysis.device)
    if args.format == "json":
        record = {"kernel": spec.name, "shape": list(shape), "dtype": task.dtype,
                  "facts": [_fact_record(f) for f in analysis.facts.all()], **analysis.to_record()}
        if formulation is not None:
            record["formulation"] = dataclasses.asdict(formulation)
        console.print(json.dumps(record, indent=2), markup=False, highlight=False, soft_wrap=True)
        return 0
    device = analysis.device
    console.print(f"{spec.name} {'x'.join(map(str, shape))} {task.dtype}: device limits {device.smem_per_block} B "
                  f"shared memory per block, {device.sm_count} SMs ({escape(device.source)})")
    console.print(_facts_table(analysis.facts))
    console.print(_rules_table(analysis, registered_rules()))
    console.print(_seeds_table(task, analysis.outcome.seeds))
    if formulation is not None:
        config = ", ".join(f"{k}={v!r}" for k, v in formulation.config.items())
        console.print(f"formulation: {formulation.formulation} (run {formulation.kernel}), seed {escape(config)}")
        console.print(f"why: {escape(formulation.why)}", soft_wrap=True)
    return 0


def _formulation(kernel: str, shape: tuple[int, ...], dtype: str, device: Any) -> Any:
    """The formulation rule's pick for a matmul + epilogue kernel's cell, else None."""
    from heuristics.matmul_formulation import epilogue_of, pick_formulation

    epilogue = epilogue_of(kernel)
    if epilogue is None or len(shape) != 3:
        return None
    m, k, n = shape
    return pick_formulation(epilogue, m, k, n, dtype, device)


def _fact_record(fact: Any) -> dict[str, Any]:
    from heuristics.facts import as_record

    return as_record(fact)


def _fields(fact: Any) -> str:
    from heuristics.facts import MatmulWithReductionEpilogueFact

    if isinstance(fact, MatmulWithReductionEpilogueFact):
        n_form = "resident" if fact.matmul.n_resident else "tiled"
        return (f"N={fact.n_extent} reduced by {'+'.join(fact.reduction.kinds) or '?'}; "
                f"M tile {fact.matmul.m_slot}, K tile {fact.matmul.k_slot}, N {n_form}")
    return ", ".join(f"{k}={v}" for k, v in vars(fact).items())


def _facts_table(facts: Any) -> Table:
    table = Table(title="facts")
    table.add_column("fact")
    table.add_column("fields")
    for fact in facts.all():
        table.add_row(type(fact).__name__, escape(_fields(fact)))
    if facts.compiler_epilogue_fact is not None:
        table.add_row("(Helion's own composed fact)", "formed" if facts.compiler_epilogue_fact else "not formed")
    for note in facts.notes:
        table.add_row("(note)", escape(note))
    if not facts.all() and not facts.notes:
        table.add_row("(none)", "no matmul or sized reduction found")
    return table


def _rules_table(analysis: Any, rules: list[Any]) -> Table:
    outcome = analysis.outcome
    declined = {d.rule: d.reason for d in outcome.declined}
    counts: dict[str, int] = {}
    for seed in outcome.seeds:
        counts[seed.rule] = counts.get(seed.rule, 0) + 1
    table = Table(title="rules")
    for column in ("rule", "needs", "outcome"):
        table.add_column(column)
    for rule in rules:
        if rule.name in outcome.fired:
            result = f"fired: {counts.get(rule.name, 0)} seed(s)"
        elif rule.name in declined:
            result = f"declined: {declined[rule.name]}"
        else:
            result = "not applicable (facts absent)"
        table.add_row(rule.name, ", ".join(rule.needs), escape(result))
    return table


def _seeds_table(task: Any, seeds: Any) -> Table:
    table = Table(title="seeds (parameters that differ from the default)")
    for column in ("#", "rule", "config", "reason"):
        table.add_column(column)
    for index, seed in enumerate(seeds, start=1):
        changed = {k: v for k, v in seed.params.items() if v != task.space.default.get(k)}
        text = ", ".join(f"{k}={v!r}" for k, v in changed.items()) or "(the default)"
        table.add_row(str(index), seed.rule, escape(text), escape(seed.reason))
    if not seeds:
        table.add_row("-", "-", "no seeds", "")
    return table
