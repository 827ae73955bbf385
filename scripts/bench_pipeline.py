"""Benchmark the training pipeline: andrea-train with the attention-maps dashboard, without it, the same
model and data in Lightning with everything optional off (Lightning's own loop: the floor andrea stands
on), and a bare PyTorch loop of the same model, data, optimizer and schedule.

    python scripts/bench_pipeline.py                      # small GPT on bytes, 2,000 steps, 4 rounds (~40-80 min)
    python scripts/bench_pipeline.py --steps 300 --rounds 4

The small GPT: 4 layers, d_model 128, 4 heads, batch 12 x 64 tokens of byte-level text (the Tempest
excerpt andrea ships), AdamW, no logger. Each candidate is a whole process (start-up included), timed
in paired rounds, each candidate in each place of a round equally often (a Latin square: run a multiple
of 4 rounds); the table gives each one's median wall time, its median CPU time (user + system, every
thread: what a busy neighbour on the machine does not inflate as much), the ratios' medians
with their spread (min-max over the rounds), and each one's final losses. The dashboard must not change
training: every candidate prints the same losses.

Targets: andrea (maps on) / bare loop <= 1.02 at the median, maps on / maps off <= 1.02.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BATCH, SEQ_LEN = 12, 64  # sequences a step, tokens a sequence
SMALL_GPT = [
    "data=text", "data.tokenizer=bytes", f"data.seq_len={SEQ_LEN}", f"data.batch_size={BATCH}", "model=andrea-tiny",
    "model.net.n_layer=4", "model.net.d_model=128", "logger=none", "trainer.max_epochs=-1", "validate=false",
    "trainer.limit_val_batches=0",
    "~callbacks.model_checkpoint", "~callbacks.last_checkpoint", "~callbacks.rich_progress_bar",
]  # fmt: skip


INTERVAL = 10  # steps a speed interval spans: andrea's logging interval (trainer.log_every_n_steps)


class StepClock:
    """Wall time per step over intervals of INTERVAL steps, as andrea's run stats time its logging intervals:
    the median over the intervals after the first (which holds the warm-up) is the step's figure."""

    def __init__(self) -> None:
        self.start, self.ms = time.perf_counter(), []

    def tick(self, step: int) -> None:
        if step % INTERVAL == 0:
            now = time.perf_counter()
            self.ms.append((now - self.start) * 1000 / INTERVAL)
            self.start = now

    def median_ms(self) -> float:
        return statistics.median(self.ms[1:] if len(self.ms) > 2 else self.ms)


def _parts(overrides: list[str]) -> tuple:
    """(config, data module, network, optimizer) of the run, built as andrea-train builds them, nothing else."""
    import numpy as np
    import torch
    from hydra import compose, initialize_config_module
    from hydra.utils import instantiate

    with initialize_config_module(config_module="andrea.conf", version_base="1.3"):
        cfg = compose("train", overrides=overrides)
    random.seed(cfg.seed), np.random.seed(cfg.seed), torch.manual_seed(cfg.seed)  # as andrea-train's seeding
    data = instantiate(cfg.data)  # data first, then the model, as andrea-train builds them
    net = instantiate(cfg.model.net)
    matrices = [p for p in net.parameters() if p.dim() >= 2]
    others = [p for p in net.parameters() if p.dim() < 2]
    optimizer = instantiate(cfg.model.optimizer)(params=[{"params": matrices}, {"params": others, "weight_decay": 0.0}])
    return cfg, data, net, optimizer


def bare_loop(overrides: list[str], out: Path) -> None:
    """The same run as a bare PyTorch loop: andrea's config composed for its sizes, nothing of Lightning."""
    import torch.nn.functional as F

    cfg, data, net, optimizer = _parts(overrides)
    data.setup("fit")
    loader = data.train_dataloader()
    losses, step, epoch, clock = [], 0, 0, StepClock()
    while step < cfg.trainer.max_steps:
        loader.sampler.set_epoch(epoch)  # each epoch its own order, as Lightning asks of the sampler
        epoch += 1
        for batch in loader:
            logits, _ = net(batch["input_ids"])  # (B, T, V)
            loss = F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=-100)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            step += 1
            clock.tick(step)
            if step == cfg.trainer.max_steps:
                break
    last = losses[-20:]
    out.write_text(json.dumps({"train_loss": sum(last) / len(last), "steps": step, "step_ms": clock.median_ms()}))


def lightning_floor(overrides: list[str], out: Path) -> None:
    """The same run in Lightning with everything optional off: a module that only returns the loss, no
    callbacks, logger, checkpoint, progress bar or summary. Lightning's own loop, what andrea cannot remove."""
    import lightning as L
    import torch.nn.functional as F

    cfg, data, net, optimizer = _parts(overrides)
    losses, clock = [], StepClock()

    class Loss(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = net

        def training_step(self, batch, batch_idx):
            logits, _ = self.net(batch["input_ids"])  # (B, T, V)
            loss = F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=-100)
            losses.append(loss.detach())
            return loss

        def configure_optimizers(self):
            return optimizer

        def on_train_batch_end(self, outputs, batch, batch_idx):
            clock.tick(len(losses))

    trainer = L.Trainer(
        accelerator="cpu", devices=1, max_steps=cfg.trainer.max_steps, max_epochs=-1, limit_val_batches=0,
        num_sanity_val_steps=0, logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, use_distributed_sampler=False,
    )  # fmt: skip
    trainer.fit(Loss(), datamodule=data)
    last = [float(loss) for loss in losses[-20:]]
    out.write_text(
        json.dumps({"train_loss": sum(last) / len(last), "steps": len(losses), "step_ms": clock.median_ms()})
    )


def run(command: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system of the process and its threads) of one whole process."""
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command[:4])} ... failed:\n{done.stderr[-2000:]}")
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=4)  # a Latin square: each candidate in each place once
    parser.add_argument("--bare", type=Path, help=argparse.SUPPRESS)  # the bare loop's own process
    parser.add_argument("--floor", type=Path, help=argparse.SUPPRESS)  # Lightning's, everything off
    parser.add_argument("overrides", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare:
        return bare_loop(args.overrides, args.bare)
    if args.floor:
        return lightning_floor(args.overrides, args.floor)

    work = Path(tempfile.mkdtemp(prefix="andrea-bench-pipeline-"))
    overrides = [*SMALL_GPT, f"trainer.max_steps={args.steps}", f"paths.log_dir={work}"]
    train = [str(Path(sys.executable).parent / "andrea-train"), *overrides]
    candidates = {
        "andrea, maps on": lambda n: [*train, f"hydra.run.dir={work}/on{n}"],
        "andrea, maps off": lambda n: [*train, "~callbacks.attention_maps", f"hydra.run.dir={work}/off{n}"],
        "Lightning, all off": lambda n: [sys.executable, __file__, "--floor", str(work / f"floor{n}.json"), *overrides],
        "bare PyTorch loop": lambda n: [sys.executable, __file__, "--bare", str(work / f"bare{n}.json"), *overrides],
    }
    results = {  # each candidate's record of round n: {"train_loss", "step_ms"}
        "andrea, maps on": lambda n: _andrea_record(work / f"on{n}"),
        "andrea, maps off": lambda n: _andrea_record(work / f"off{n}"),
        "Lightning, all off": lambda n: json.loads((work / f"floor{n}.json").read_text()),
        "bare PyTorch loop": lambda n: json.loads((work / f"bare{n}.json").read_text()),
    }
    times: dict[str, list[float]] = {name: [] for name in candidates}
    cpu: dict[str, list[float]] = {name: [] for name in candidates}
    step: dict[str, list[float]] = {name: [] for name in candidates}
    names = list(candidates)
    for n in range(args.rounds):
        # a Latin square: each candidate in each place of a round once every len(names) rounds, as this machine
        # slows down over minutes of load (a fixed seed's shuffles had put one candidate last in most rounds)
        for name in names[n % len(names) :] + names[: n % len(names)]:
            wall, cpu_s = run(candidates[name](n))
            times[name].append(wall)
            cpu[name].append(cpu_s)
            step[name].append(results[name](n)["step_ms"])
        print(f"round {n + 1}/{args.rounds}: " + ", ".join(f"{k} {times[k][-1]:.1f} s" for k in candidates), flush=True)

    losses = {name: results[name](0)["train_loss"] for name in candidates}
    skipped = json.loads((work / "on0" / "result.json").read_text())["attention_maps_skipped"]
    maps = len(list((work / "on0" / "attention_maps").glob("*.png")))
    print(f"\nsmall GPT on bytes, {args.steps} steps, {args.rounds} paired rounds, whole processes; {maps} PNGs drawn, "
          f"{skipped} records skipped")  # fmt: skip
    print(f"{'candidate':20} {'median s':>9} {'min s':>7} {'max s':>7} {'median CPU s':>13} {'median step ms':>15} "
          f"{'final train loss':>17}")  # fmt: skip
    for name in candidates:
        t = times[name]
        print(f"{name:20} {statistics.median(t):9.1f} {min(t):7.1f} {max(t):7.1f} {statistics.median(cpu[name]):13.1f} "
              f"{statistics.median(step[name]):15.2f} {losses[name]:17.6f}")  # fmt: skip
    print("\nratio (medians over the rounds; min-max)    whole process            step")
    for a, b in (("andrea, maps on", "andrea, maps off"), ("andrea, maps on", "bare PyTorch loop"),
                 ("andrea, maps off", "bare PyTorch loop"), ("andrea, maps off", "Lightning, all off"),
                 ("Lightning, all off", "bare PyTorch loop")):  # fmt: skip
        print(f"{a + ' / ' + b:42} {_ratio(times[a], times[b]):>22} {_ratio(step[a], step[b]):>22}")


def _andrea_record(run_dir: Path) -> dict[str, float]:
    """The train loss and the median step (ms) of an andrea run, from its result.json: tokens/s is the median over
    its logging intervals, each timed from the interval's first step to the host read that ends it."""
    record = json.loads((run_dir / "result.json").read_text())
    return {"train_loss": record["train_loss"], "step_ms": 1000 * BATCH * SEQ_LEN / record["tokens_per_s"]}


def _ratio(a: list[float], b: list[float]) -> str:
    ratios = [x / y for x, y in zip(a, b, strict=True)]
    return f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})"


if __name__ == "__main__":
    main()
