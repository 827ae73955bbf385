"""The default run end to end, read back from what it wrote: wandb's offline run, PNGs, checkpoints."""

import json
import math

import pytest
import torch

from tests.compose import compose_train
from tests.train.wandb_reader import history, run_info


def test_loss_falls_below_one_within_three_epochs(default_run):
    result, _ = default_run
    assert result.status == "completed" and result.epochs == 3
    assert result.val_loss < 1.0 and result.train_loss < 1.0
    assert result.val_acc > 0.9
    assert result.val_perplexity == pytest.approx(math.exp(result.val_loss), rel=1e-3)
    estimate = result.memory_estimate  # made from the config before the run, kept in the summary
    assert (
        estimate["parameters"] == 4 * 32 * 32 + 2 * 64 * 32 + 32 * 32 + 4 * 32
    )  # QKV + W_O, token + LM head, positions, 2 norms
    assert estimate["bytes"] > 16 * estimate["parameters"] and estimate["text"].startswith("about ")


def test_wandb_history_has_every_tenth_step_and_each_epoch_end(default_run):
    result, run_dir = default_run
    rows = history(run_dir)
    losses = [row["train/loss_step"] for row in rows if "train/loss_step" in row]
    rates = [row for row in rows if any(key.startswith("lr-") for key in row)]
    accuracies = [row["train/acc_step"] for row in rows if "train/acc_step" in row]
    speeds = [row for row in rows if "train/tokens_per_s" in row]
    steps, per_epoch = result.global_step, 4096 // 64
    assert steps == 3 * per_epoch
    logged = {s for s in range(steps) if (s + 1) % 10 == 0} | {e * per_epoch - 1 for e in (1, 2, 3)}
    assert len(losses) == len(accuracies) == len(speeds) == len(logged)  # trainer.log_every_n_steps=10
    assert len(rates) == steps // 10  # Lightning's own logging steps
    curve = [loss for _, loss in result.curves["train"]]  # every step's, read with the logged ones
    assert len(curve) == steps and abs(curve[0] - math.log(64)) < 0.5  # starts near chance
    assert losses == [loss for step, loss in result.curves["train"] if step - 1 in logged]
    assert losses[-1] < 1.0
    assert sum(losses[-5:]) < sum(losses[:5])
    val_losses = [row["val/loss"] for row in rows if "val/loss" in row]
    assert len(val_losses) >= 3 and val_losses[-1] == pytest.approx(result.val_loss, rel=1e-5)


def test_wandb_run_is_offline_and_finished(default_run):
    import wandb

    _, run_dir = default_run
    assert run_info(run_dir).project == "andrea"
    assert wandb.run is None  # wandb.finish() was called, the next job gets a run of its own


def test_attention_maps_as_png_and_on_the_dashboard(default_run):
    result, run_dir = default_run
    pngs = sorted((run_dir / "attention_maps").glob("layer0_step*.png"))
    steps = [int(p.stem.split("step")[1]) for p in pngs]
    assert steps[0] == 0 and steps[-1] == result.global_step and 50 in steps
    assert all(p.read_bytes()[:4] == b"\x89PNG" for p in pngs)
    import numpy as np
    from PIL import Image

    from andrea.lens.viz import MASKED_RGB

    last = np.asarray(Image.open(pngs[-1]).convert("RGB"))
    assert (last == MASKED_RGB).all(-1).sum() > 1000  # the causal mask's hidden keys, apart from any weight
    logged = [row for row in history(run_dir) if "attention/layer0/filenames" in row]
    assert len(logged) == len(pngs)
    media = run_dir.glob("wandb/offline-run-*/files/" + logged[-1]["attention/layer0/filenames"][0])
    assert next(media).read_bytes()[:4] == b"\x89PNG"


def test_head_role_metrics_are_logged(default_run):
    result, run_dir = default_run
    last = [row for row in history(run_dir) if "heads/first_token/L0H0" in row][-1]
    for head in range(4):
        assert f"heads/entropy/L0H{head}" in last and f"heads/first_token/L0H{head}" in last
        # every token of a row is the same: previous-token and induction are not applicable, never a number
        assert f"heads/previous_token/L0H{head}" not in last and f"heads/induction/L0H{head}" not in last
    assert result.head_roles["heads/entropy/L0H0"] == pytest.approx(last["heads/entropy/L0H0"])
    assert result.roles["induction"] == {"best": None, "score": None, "queries": 0, "transformer_lens": None}
    assert result.verdict["text"].startswith("this task needs no attention")


def test_checkpoints_last_and_best(default_run):
    _, run_dir = default_run
    names = sorted(p.name for p in (run_dir / "checkpoints").glob("*.ckpt"))
    assert "last.ckpt" in names and len(names) == 2
    checkpoint = torch.load(run_dir / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)  # plain data
    assert checkpoint["global_step"] == 192


def test_result_file(default_run):
    result, run_dir = default_run
    written = json.loads((run_dir / "result.json").read_text())
    assert written["val_loss"] == result.val_loss and written["tokens_per_s"] > 0
    assert written["tokens_per_s"] == written["tokens_per_s_steps"]["median"]  # one meaning: the summary's figure
    from andrea.train.sweep import done_line

    assert f", {written['tokens_per_s']:,.0f} tokens/s (p25-p75 " in done_line(result)
    assert written["config"]["attention"]["backend"] == "sdpa"


def test_resume_from_last_checkpoint(default_run, tmp_path):
    from andrea.train.pipeline import train

    _, run_dir = default_run
    overrides = ["logger=none", "trainer.max_epochs=4", f"ckpt_path={run_dir}/checkpoints/last.ckpt"]
    resumed = train(compose_train(tmp_path, overrides))
    assert resumed.epochs == 4 and resumed.global_step == 4 * 4096 // 64  # one more epoch, not four


def test_wandb_gets_one_chart_per_role_and_layer(default_run):
    """wandb's line-series charts: head_roles/<role>_L<layer>, a line per head, every recorded step."""
    _, run_dir = default_run
    rows = history(run_dir)
    charts = {k.split("_table/")[0]: row[k] for row in rows for k in row if k.endswith("_table/nrows")}
    assert sorted(charts) == ["head_roles/entropy_L0", "head_roles/first_token_L0"]  # the applicable roles only
    records = len([row for row in rows if "heads/entropy/L0H0" in row])
    assert charts["head_roles/entropy_L0"] == 4 * records  # (step, head, value) rows: 4 heads at every record


def test_a_finished_run_resumed_keeps_its_results(default_run, tmp_path):
    """Resumed with nothing left to train, a finished run's result.json stays as it was, no attempt's summary
    is written beside it, and train() returns the run's own result."""
    import shutil

    from andrea.train.pipeline import train

    result, finished = default_run
    run_dir = tmp_path / "run"
    shutil.copytree(finished, run_dir)
    before = (run_dir / "result.json").read_text()
    overrides = ["logger=none", f"ckpt_path={run_dir}/checkpoints/last.ckpt"]
    again = train(compose_train(run_dir, overrides))
    assert (run_dir / "result.json").read_text() == before
    assert not list(run_dir.glob("result-attempt-*.json"))
    assert (again.global_step, again.train_loss, again.val_loss) == (
        result.global_step,
        result.train_loss,
        result.val_loss,
    )


@pytest.mark.parametrize(
    "key, inside, refusal",
    [
        ("loops", {"fit_loop": 3}, "its training state cannot be restored ("),  # found by Lightning's restore
        ("optimizer_states", [{"state": 1, "param_groups": "all"}], "optimizer_states[0] has no param_groups"),
    ],  # the optimizer's state is checked with the config, before anything is built
    ids=["loops", "optimizer_states"],
)
def test_a_checkpoint_whose_training_state_is_wrong_inside_is_one_line(default_run, tmp_path, key, inside, refusal):
    import torch

    from andrea.train.config import ConfigError
    from andrea.train.lit.resume import CheckpointRestoreError
    from andrea.train.pipeline import train

    _, run_dir = default_run
    state = torch.load(run_dir / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    bad = tmp_path / "bad.ckpt"
    torch.save({**state, key: inside}, bad)
    with pytest.raises((CheckpointRestoreError, ConfigError)) as err:
        train(compose_train(tmp_path / "run", ["logger=none", "trainer.max_epochs=4", f"ckpt_path={bad}"]))
    message = str(err.value)
    assert message.startswith(f"ckpt_path={bad}: {refusal}") and "\n" not in message
    assert message.endswith("give a checkpoint written by andrea-train" + (", e.g. an earlier one in the same folder"
                                                                            if key == "loops" else ""))  # fmt: skip


def test_head_roles_csv_holds_every_record_whatever_the_logger(default_run):
    import csv

    _, run_dir = default_run
    with (run_dir / "head_roles.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    logged = [row for row in history(run_dir) if "heads/entropy/L0H0" in row]
    steps = sorted({int(row["step"]) for row in rows})
    pngs = sorted(int(p.stem.split("step")[1]) for p in (run_dir / "attention_maps").glob("layer0_step*.png"))
    assert steps == pngs and len(steps) == len(logged)  # one block of rows per record
    assert {row["role"] for row in rows} == {"entropy", "first_token"}  # the applicable roles only
    last = {(row["role"], int(row["layer"]), int(row["head"])): float(row["score"]) for row in rows[-8:]}
    assert last[("entropy", 0, 3)] == pytest.approx(logged[-1]["heads/entropy/L0H3"], rel=1e-5)


def test_a_resumed_attempt_keeps_the_rows_before_its_step_and_drops_the_rest(tmp_path):
    from andrea.train.lit import role_history

    path = tmp_path / role_history.HISTORY_FILE
    for step in (0, 50, 100):
        role_history.append(path, step, {("entropy", 0, 1): 0.5 + step, ("induction", 1, 0): 0.25})
    role_history.start(path, 50)  # the checkpoint the attempt resumes from was taken at step 50
    role_history.append(path, 50, {("entropy", 0, 1): 7.0})
    lines = path.read_text().splitlines()
    assert lines == ["step,layer,head,role,score", "0,0,1,entropy,0.5", "0,1,0,induction,0.25", "50,0,1,entropy,7"]


@pytest.mark.parametrize(
    ("overrides", "written"),
    [
        (["callbacks=none"], []),
        (["~callbacks.model_checkpoint", "~callbacks.last_checkpoint"], []),
        (["callbacks=none", "+trainer.enable_checkpointing=true"], ["epoch=0-step=4.ckpt"]),  # Lightning's own
    ],
)
def test_a_run_without_checkpoint_callbacks_writes_no_checkpoint(tmp_path, overrides, written):
    from andrea.train.pipeline import train
    from tests.compose import QUICK

    train(compose_train(tmp_path, [*QUICK, *overrides]))
    assert sorted(p.name for p in tmp_path.rglob("*.ckpt")) == written
