"""Which heads form the induction circuit, which earlier head does each read from, and how much loss does each
carry? Answered with andrea.lens on an `experiment=induction` run.

    python examples/induction_circuit.py              # trains experiment=induction here first (about 10 s)
    python examples/induction_circuit.py <run dir>    # or reads that run's last checkpoint and validation data
"""

import subprocess
import sys
from pathlib import Path

from andrea.data.from_run import data_from_run
from andrea.lens.circuit import sources
from andrea.lens.heads import parse_head
from andrea.lens.interventions import ablation_loss
from andrea.lens.verdict import meeting, score_heads
from andrea.models.files.load import load_any
from andrea.train.lit.module import next_token_loss

if len(sys.argv) > 1:
    run_dir = Path(sys.argv[1])
else:
    run_dir = Path("logs/induction_circuit")
    subprocess.run(["andrea-train", "experiment=induction", "logger=none", f"hydra.run.dir={run_dir}"], check=True)
net, _, _ = load_any(run_dir / "checkpoints" / "last.ckpt")
data = data_from_run(run_dir)
data.setup("validate")
batch = next(iter(data.val_dataloader()))  # one batch of validation rows
ids, labels = batch["input_ids"], batch["labels"]


def scores(weights):  # every role's (L, H) scores on these rows
    return score_heads(weights, ids)


roles = scores(net(ids, return_weights=True)[1])
induction = [head for head, _ in meeting(roles["induction"].values, 0.5, min_layer=1)]
reads = sources(net, ids, induction, "induction", lambda weights: scores(weights)["induction"].values)
batches = [(ids, labels)]
print(f"induction circuit on {ids.shape[0]} validation rows of {run_dir}:")
for head in induction:
    read, rise = reads[head], ablation_loss(net, batches, [parse_head(head)], next_token_loss)["rise"]
    print(f"  {head}: induction {read['score']:.2f}, reads {read['reads']} (ablated: {read['ablated']:.2f}), "
          f"loss +{rise:.3f} alone")  # fmt: skip
together = ablation_loss(net, batches, [parse_head(head) for head in induction], next_token_loss)
print(f"  all {len(induction)} together: loss {together['base_loss']:.3f} -> {together['ablated_loss']:.3f}")
for source in sorted({read["reads"] for read in reads.values()}):
    rise = ablation_loss(net, batches, [parse_head(source)], next_token_loss)["rise"]
    previous = float(roles["previous_token"].values[parse_head(source)])
    print(f"  {source}: previous_token {previous:.2f}, loss +{rise:.3f} alone")
