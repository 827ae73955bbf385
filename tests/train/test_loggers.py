"""TensorBoard and CSV loggers, read back; the no-attention ablation."""

import csv

import pytest

from andrea.train.pipeline import train
from tests.compose import QUICK, compose_train


def quick(tmp_path, *overrides):
    return train(compose_train(tmp_path, [*QUICK, "callbacks.attention_maps.every_n_steps=2", *overrides]))


def test_tensorboard_scalars_and_images(tmp_path):
    import io

    import numpy as np
    from PIL import Image
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    result = quick(tmp_path, "logger=tensorboard")
    (run,) = (tmp_path / "tensorboard").iterdir()  # a run of its own, not "." (andrea-train names it by its run
    assert run.is_dir() and run.name == "run"  # folder, a sweep's job by its overrides; composed here, it has neither)
    events = EventAccumulator(str(run), size_guidance={"images": 0, "scalars": 0})
    events.Reload()
    losses = events.Scalars("train/loss_step")
    assert [e.step for e in losses] == [0, 1, 2, 3] and result.global_step == 4
    assert all(0 < e.value < 10 for e in losses)
    assert "heads/first_token/L0H0" in events.Tags()["scalars"]
    images = events.Images("attention/layer0")
    assert [e.step for e in images] == [0, 2, 4]
    assert images[0].encoded_image_string[:4] == b"\x89PNG" and images[0].height > 0.6 * images[0].width  # a grid
    shown = np.asarray(Image.open(io.BytesIO(images[-1].encoded_image_string)).convert("RGB"))
    drawn = np.asarray(Image.open(tmp_path / "attention_maps" / "layer0_step000004.png").convert("RGB"))
    assert np.array_equal(shown, drawn)  # the pixels drawn, as the PNG holds them
    every_head = events.Images("head_roles/every_head")  # a line per head, each its own colour, with a legend
    assert len(every_head) == 1 and every_head[0].encoded_image_string[:4] == b"\x89PNG"
    assert custom_scalar_charts(run) == {
        f"{role} · layer 0": [rf"heads/{role}/L0H\d+$"]
        for role in ("entropy", "previous_token", "first_token", "induction")
    }  # one chart per role and layer, every head a line (the Custom Scalars tab)


def custom_scalar_charts(logdir):
    """TensorBoard's custom-scalar layout, as chart title -> tag regexes."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.custom_scalar import layout_pb2
    from tensorboard.util import tensor_util

    events = EventAccumulator(str(logdir), size_guidance={"tensors": 0})
    events.Reload()
    layout = layout_pb2.Layout()
    (config,) = events.Tensors("custom_scalars__config__")
    layout.ParseFromString(tensor_util.make_ndarray(config.tensor_proto).item())
    (category,) = layout.category
    assert category.title == "head roles"
    return {chart.title: list(chart.multiline.tag) for chart in category.chart}


def test_csv_metrics(tmp_path):
    quick(tmp_path, "logger=csv")
    with open(tmp_path / "csv" / "version_0" / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    steps = [int(r["step"]) for r in rows if r.get("train/loss_step")]
    assert steps == [0, 1, 2, 3]
    assert [r for r in rows if r.get("val/loss")]


def test_attention_maps_layer_out_of_range(tmp_path):
    import pytest

    with pytest.raises(
        ValueError, match="callbacks.attention_maps.layers=\\[3\\] names layers \\[3\\]; the model has 1"
    ):
        quick(tmp_path, "callbacks.attention_maps.layers=[3]")


@pytest.mark.slow  # reason: a training run (3 s); the default run trains with attention
def test_no_attention_ablation_learns_repetition(tmp_path):
    """The repetition task needs no attention: the ablation reaches the same low loss."""
    result = train(compose_train(tmp_path, ["experiment=repetition_no_attention", "logger=none"]))
    assert result.val_loss is not None
    assert result.val_loss < 1.0
    assert result.attention_maps is None and result.head_roles == {}


@pytest.mark.slow  # reason: a training run; the default run and the layer kinds train a GPT in the default suite
def test_tiny_gpt_trains_in_the_pipeline(tmp_path):
    result = quick(tmp_path, "model=andrea-tiny", "heads=gqa", "trainer.max_epochs=2")
    assert result.config["model"]["net"]["_target_"] == "andrea.models.gpt.GPT"
    assert result.config["model"]["net"]["attention"]["n_kv_head"] == 2
    assert result.val_loss < 4.0 and len([k for k in result.head_roles if k.startswith("heads/entropy/")]) == 2 * 4


@pytest.mark.slow  # reason: a GPT trained on text through the pipeline (12 s)
def test_tiny_gpt_on_text(tmp_path):
    overrides = [
        "data=text",
        "data.seq_len=32",
        "data.samples_per_epoch=64",
        "model=andrea-tiny",
        "logger=csv",
        "trainer.max_epochs=2",
        "callbacks.attention_maps.every_n_steps=4",
        "callbacks.run_stats.peak_tflops=0.2",
        "trainer.log_every_n_steps=1",
    ]
    result = train(compose_train(tmp_path, overrides))
    with open(tmp_path / "csv" / "version_0" / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    mfu = [float(r["train/mfu"]) for r in rows if r.get("train/mfu")]
    assert len(mfu) == result.global_step and all(0 < m < 1 for m in mfu)
    assert any(r.get("val/perplexity") for r in rows)
    assert result.global_step == 2 * 64 // 8
    assert result.val_loss is not None and result.config is not None
    assert result.val_loss < 10.0 and result.config["data"]["tokenizer"] == "gpt2"
    assert list((tmp_path / "token_cache").glob("gpt2-*.uint16.bin"))


@pytest.mark.slow  # reason: tokenises the whole Shakespeare corpus (5 MB) and runs ANDREA-12M steps on CPU
def test_andrea_12m_shakespeare_smoke(tmp_path):
    overrides = ["experiment=andrea-12m-shakespeare", "trainer.max_steps=3", "model.scheduler.warmup_steps=1",
                 "data.samples_per_epoch=48", "trainer.limit_val_batches=2", "logger=none"]  # fmt: skip
    result = train(compose_train(tmp_path, overrides))
    assert result.val_loss is not None
    assert result.global_step == 3 and 5.0 < result.val_loss < 11.5  # from ~log(50257) = 10.8


@pytest.mark.slow  # reason: builds the full 124M-parameter ANDREA-120M and runs it on CPU
def test_andrea_120m_recipe_smoke_on_cpu(tmp_path):
    overrides = [
        "experiment=andrea-120m",
        "trainer.accelerator=cpu",
        "trainer.precision=32-true",
        "model.compile=false",
        "data.seq_len=64",
        "data.batch_size=1",
        "data.samples_per_epoch=2",
        "data.num_workers=0",
        "trainer.max_steps=2",
        "trainer.accumulate_grad_batches=1",
        "+trainer.limit_val_batches=1",
        "model.scheduler.warmup_steps=1",
        "logger=none",
    ]
    result = train(compose_train(tmp_path, overrides))
    assert result.val_loss is not None and result.config is not None
    assert result.global_step == 2 and 9.0 < result.val_loss < 11.5  # ~log(50257) = 10.8 at the start
    assert result.config["model"]["net"]["n_layer"] == 12
