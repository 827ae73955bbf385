"""andrea-train init_from=<folder>: the run's network takes the shape of a GPT-2 folder, or of a decoder family's
(OLMo 3, Gemma 3, Llama 4, Qwen3-Next, Falcon-H1), and starts from its weights."""

from typing import Any

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from andrea.models.files.checkpoint import read_checkpoint
from andrea.train.config import ConfigError, validate
from andrea.train.pipeline import _load_init_from, train
from tests.compose import QUICK, compose_train


def hf_folder(folder):
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=101, n_positions=64, n_embd=48, n_layer=2, n_head=4)).eval()
    model.save_pretrained(folder, safe_serialization=True)
    return model


def test_fine_tuning_starts_from_gpt2_s_weights(tmp_path):
    hf = hf_folder(tmp_path / "gpt2")
    cfg = compose_train(tmp_path / "run", [*QUICK, f"init_from={tmp_path / 'gpt2'}", "attention=eager"])
    parts = validate(cfg)
    net = cfg.model.net
    assert (net._target_, net.bias, net.activation, net.d_model, net.n_layer) == (
        "andrea.models.gpt.GPT",
        True,
        "gelu_tanh",
        48,
        2,
    )
    assert (net.attention.backend, net.attention.n_head, net.attention.n_kv_head) == (
        "eager",
        4,
        4,
    )  # the run's backend
    module = parts.module
    _load_init_from(module.net, cfg.init_from)
    idx = torch.randint(64, (2, 16))
    with torch.no_grad():
        torch.testing.assert_close(module.net.eval()(idx)[0], hf(idx).logits, atol=1e-4, rtol=1e-4)
    result = train(cfg, parts)
    assert result.status == "completed"
    saved = read_checkpoint(tmp_path / "run" / "checkpoints" / "last.ckpt")["andrea_net_config"]
    assert saved["bias"] is True and saved["activation"] == "gelu_tanh"  # the checkpoint describes itself


def test_init_from_refuses_in_one_line(tmp_path):
    empty, folder = tmp_path / "empty", tmp_path / "gpt2"
    empty.mkdir()
    hf_folder(folder)
    for overrides, message in [
        ([f"init_from={empty}"], f"init_from={empty}: {empty} has no model.safetensors"),
        ([f"init_from={folder}", "position=rope"], "GPT-2's weights need learned positions; drop position=rope"),
    ]:
        cfg = compose_train(tmp_path / "run", [*QUICK, *overrides])
        with pytest.raises(ConfigError) as refused:
            validate(cfg)
        assert message in str(refused.value) and "\n" not in str(refused.value)


FAMILIES: dict[
    str, tuple[str, str, dict[str, Any]]
] = {  # transformers' model, config and its sizes: the data's 64 tokens, the repetition task's 32 positions
    "olmo3": ("Olmo3ForCausalLM", "Olmo3Config", dict(num_hidden_layers=4, sliding_window=4)),
    "gemma3": (
        "Gemma3ForCausalLM",
        "Gemma3TextConfig",
        dict(num_hidden_layers=6, head_dim=16, query_pre_attn_scalar=24, sliding_window=4),
    ),
    "llama4": (
        "Llama4ForCausalLM",
        "Llama4TextConfig",
        dict(num_hidden_layers=4, head_dim=16, intermediate_size_mlp=96, moe_layers=[], attention_chunk_size=4),
    ),
    "qwen3_next": (
        "Qwen3NextForCausalLM",
        "Qwen3NextConfig",
        dict(
            num_hidden_layers=4,
            head_dim=16,
            linear_num_key_heads=4,
            linear_num_value_heads=4,
            linear_key_head_dim=16,
            linear_value_head_dim=32,
            mlp_only_layers=[0, 1, 2, 3],
        ),
    ),
    "falcon_h1": (
        "FalconH1ForCausalLM",
        "FalconH1Config",
        dict(num_hidden_layers=2, head_dim=16, mamba_d_ssm=128, mamba_n_heads=4, mamba_d_head=32, mamba_d_state=16),
    ),
}
KINDS = {"olmo3": {"sliding", "full"}, "gemma3": {"sliding", "full"}, "llama4": {"chunked", "nope"},
         "qwen3_next": {"linear", "full"}, "falcon_h1": {"hybrid"}}  # fmt: skip  # the kinds each folder becomes


def family_folder(name, folder):
    import transformers

    model_class, config_class, own = FAMILIES[name]
    sizes = dict(vocab_size=64, hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2,
                 max_position_embeddings=64, attn_implementation="eager")  # fmt: skip
    torch.manual_seed(0)
    model = getattr(transformers, model_class)(getattr(transformers, config_class)(**sizes, **own)).eval()
    model.save_pretrained(folder)
    return model


@pytest.mark.slow  # reason: a training run each (the loaders are proven in tests/models/test_<family>.py)
@pytest.mark.parametrize("name", list(FAMILIES))
def test_fine_tuning_starts_from_a_family_folder(name, tmp_path):
    """The run's network becomes the family's (its kinds in the pattern of layer_types, its parts), holds its
    weights with transformers' logits, and trains; the checkpoint describes itself."""
    hf = family_folder(name, tmp_path / name)
    cfg = compose_train(tmp_path / "run", [*QUICK, f"init_from={tmp_path / name}", "attention=eager",
                                           "trainer.max_steps=2"])  # fmt: skip
    parts = validate(cfg)
    assert set(cfg.model.net.kinds) == KINDS[name] and cfg.model.net.attention.backend == "eager"
    _load_init_from(parts.module.net, cfg.init_from)
    idx = torch.randint(64, (2, 16))
    with torch.no_grad():
        torch.testing.assert_close(parts.module.net.eval()(idx)[0], hf(idx).logits, atol=1e-4, rtol=1e-4)
    assert train(cfg, parts).status == "completed"
    saved = read_checkpoint(tmp_path / "run" / "checkpoints" / "last.ckpt")["andrea_net_config"]
    assert saved["layout"] == cfg.model.net.layout and saved["norm"] in ("rmsnorm", "gemma_rmsnorm")


def test_a_family_folder_of_another_vocabulary_is_refused(tmp_path):
    family_folder("olmo3", tmp_path / "olmo3")
    cfg = compose_train(tmp_path / "run", [*QUICK, f"init_from={tmp_path / 'olmo3'}", "data.vocab_size=65"])
    with pytest.raises(ConfigError, match="its vocabulary has 64 tokens, the data's 65; give data whose tokenizer"):
        validate(cfg)


def _net_weights(checkpoint):
    return {k.removeprefix("net."): v for k, v in read_checkpoint(checkpoint)["state_dict"].items() if k[:4] == "net."}


def test_a_dense_run_starts_a_dsa_run_whose_warm_up_trains_the_indexers_alone(tmp_path):
    """DeepSeek-V3.2's order: a dense run, then its weights into a DSA run (init_from=<its last.ckpt>) whose dense
    warm-up (selection.train_indexer=dense) trains the indexers alone: after it every other weight is the dense
    run's, bit for bit, and every indexer weight has left its initial value."""
    dense = [*QUICK, "position=rope", "trainer.max_steps=3", "validate=false"]
    assert train(compose_train(tmp_path / "dense", dense)).status == "completed"
    start = tmp_path / "dense" / "checkpoints" / "last.ckpt"
    cfg = compose_train(
        tmp_path / "dsa", [*dense, "selection=dsa", "selection.train_indexer=dense", f"init_from={start}"]
    )
    parts = validate(cfg)
    initial = {n: w.clone() for n, w in parts.module.net.state_dict().items() if ".selection." in n}
    assert initial and train(cfg, parts).status == "completed"
    before, after = _net_weights(start), _net_weights(tmp_path / "dsa" / "checkpoints" / "last.ckpt")
    assert set(after) - set(before) == set(initial)
    assert all(torch.equal(after[n], w) for n, w in before.items())
    assert all(not torch.equal(after[n], w) for n, w in initial.items())


def test_a_run_s_checkpoint_of_another_network_is_refused_in_one_line(tmp_path):
    """init_from=<.ckpt> starts the same network but for its selection: another width is refused before any work,
    naming the setting that differs."""
    dense = [*QUICK, "trainer.max_steps=1", "validate=false"]
    train(compose_train(tmp_path / "dense", dense))
    start = tmp_path / "dense" / "checkpoints" / "last.ckpt"
    cfg = compose_train(tmp_path / "wide", [*dense, "model.net.d_model=64", f"init_from={start}"])
    with pytest.raises(ConfigError) as refused:
        validate(cfg)
    assert str(refused.value) == (
        f"init_from={start} holds a model with model.net.d_model=32, this run builds model.net.d_model=64; a run's "
        "checkpoint starts a run of the same network, its selections of keys aside: give the overrides its run had"
    )
    assert not (tmp_path / "wide" / "checkpoints").exists()


def test_a_hybrid_run_s_checkpoint_starts_its_dsa_run(tmp_path):
    """A layout whose kinds take another mixer's settings (filled in as the checkpoint saved them) starts its DSA
    run: the attention layer's selection is the one difference, and every weight but the indexer's is loaded."""
    hybrid = [*QUICK, "position=rope", "model.net.n_layer=2", "model.net.layout=[gated_deltanet,attention]",
              "trainer.max_steps=1",
              "validate=false"]  # fmt: skip
    train(compose_train(tmp_path / "dense", hybrid))
    start = tmp_path / "dense" / "checkpoints" / "last.ckpt"
    cfg = compose_train(tmp_path / "dsa", [*hybrid, "selection=dsa", f"init_from={start}"])
    net = validate(cfg).module.net
    _load_init_from(net, cfg.init_from)
    saved = _net_weights(start)
    assert all(torch.equal(w, saved[n]) for n, w in net.state_dict().items() if ".selection." not in n)
