"""safetensors export and import, from a module or from an andrea-train checkpoint."""

import pytest
import torch

from andrea.models.files import export
from andrea.models.files.checkpoint import export_checkpoint
from andrea.models.gpt import GPT

CONFIG = {
    "_target_": "andrea.models.gpt.GPT",
    "vocab_size": 97,
    "max_context": 16,
    "n_layer": 2,
    "d_model": 32,
    "attention": {"n_head": 4, "n_kv_head": 2, "backend": "sdpa", "mask": {"_target_": "andrea.attention.Causal"}},
}


def test_round_trip(tmp_path):
    from hydra.utils import instantiate

    net = instantiate(CONFIG, _convert_="partial")
    path = export.save(net, CONFIG, tmp_path / "tiny.safetensors")
    loaded, config = export.load(path)
    assert config == CONFIG and isinstance(loaded, GPT)
    assert loaded.lm_head.weight is loaded.embed.token.weight  # still tied after loading
    idx = torch.randint(97, (1, 8))
    with torch.no_grad():
        torch.testing.assert_close(loaded(idx)[0], net.eval()(idx)[0])


def test_bad_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        export.load(tmp_path / "missing.safetensors")
    (tmp_path / "junk.safetensors").write_bytes(b"\x00" * 64)
    with pytest.raises(ValueError, match="is not a readable safetensors file"):
        export.load(tmp_path / "junk.safetensors")
    from hydra.utils import instantiate

    path = export.save(
        instantiate(CONFIG, _convert_="partial"), {**CONFIG, "d_model": 64}, tmp_path / "mismatch.safetensors"
    )
    with pytest.raises(ValueError, match="tensors do not fit the saved config"):
        export.load(path)


def test_export_an_andrea_train_checkpoint(default_run, tmp_path):
    _, run_dir = default_run
    checkpoint = run_dir / "checkpoints" / "last.ckpt"
    assert "andrea_net_config" in torch.load(checkpoint, map_location="cpu", weights_only=True)  # plain data
    path = export_checkpoint(checkpoint, tmp_path / "toy.safetensors")
    net, config = export.load(path)
    assert config["_target_"] == "andrea.models.toy.ToyModel"
    ids = torch.full((1, 32), 7)
    with torch.no_grad():
        assert net(ids)[0][0, -1].argmax().item() == 7  # the repetition task, learned


def test_export_refuses_foreign_and_broken_checkpoints(tmp_path):
    torch.save({"state_dict": {}}, tmp_path / "foreign.ckpt")
    with pytest.raises(ValueError, match="was not written by andrea-train"):
        export_checkpoint(tmp_path / "foreign.ckpt", tmp_path / "out.safetensors")
    (tmp_path / "broken.ckpt").write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(ValueError, match="cannot be read safely"):
        export_checkpoint(tmp_path / "broken.ckpt", tmp_path / "out.safetensors")
    assert not (tmp_path / "out.safetensors").exists()


def test_andrea_export_from_the_command_line(default_run, tmp_path, capsys):
    import stat

    from andrea.cli.export import main

    checkpoint = default_run[1] / "checkpoints" / "last.ckpt"
    out = tmp_path / "toy.safetensors"
    main([str(checkpoint), str(out)])
    assert capsys.readouterr().out.strip() == f"exported {out} (9,344 parameters)"
    assert stat.S_IMODE(out.stat().st_mode) & 0o044 == 0o044  # readable like the run's other files
    net, config = export.load(out)
    assert config["_target_"] == "andrea.models.toy.ToyModel"
    before = out.read_bytes()
    for argv, message in [
        ([str(checkpoint), str(out)], f"{out} exists; give another file, or --force to replace it"),
        ([str(checkpoint), str(tmp_path / "toy.bin")], f"out={tmp_path / 'toy.bin'} must end in .safetensors"),
        ([str(tmp_path / "none.ckpt")], "none.ckpt does not exist"),
    ]:
        with pytest.raises(SystemExit) as exit:
            main(argv)
        err = capsys.readouterr().err
        assert exit.value.code == 2 and err.startswith("andrea-export: error: ") and message in err
        assert len(err.strip().splitlines()) == 1
    assert out.read_bytes() == before  # nothing already written is lost
    main([str(checkpoint), str(out), "--force"])


@pytest.mark.parametrize("mixer", ["linear", "retention", "gla", "mamba2"])
def test_a_network_with_token_mixers_round_trips(tmp_path, mixer):
    """A GPT whose layers alternate a mixer and attention: exported and loaded, its outputs and its cached
    generation are the network's."""
    from hydra.utils import instantiate

    from andrea.models.generate import generate

    config = {
        **CONFIG,
        "mixer": {"name": mixer, "n_head": 4, "form": "chunked", "chunk": 8},
        "layout": [mixer, "attention"],
    }
    torch.manual_seed(0)
    net = instantiate(config, _convert_="partial").eval()
    loaded, saved = export.load(export.save(net, config, tmp_path / "mixed.safetensors"))
    assert saved == config and type(loaded.mixers[0]) is type(net.mixers[0])  # type: ignore[index]
    idx = torch.randint(97, (2, 12))
    with torch.no_grad():
        torch.testing.assert_close(loaded(idx)[0], net(idx)[0])
    tokens = [generate(n, idx[:, :3], 8, top_k=1, generator=torch.Generator().manual_seed(0)) for n in (net, loaded)]
    assert torch.equal(*tokens)
