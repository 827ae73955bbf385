"""andrea-export --format hf of a network GPT-2 does not hold but OLMo 3 or Gemma 3 does
(andrea.models.files.family_export): a folder of that family that transformers loads with the same logits, and
that andrea reads back to the same tensors; a network no family holds is refused in one line, nothing written."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf
from transformers import AutoModelForCausalLM, Gemma3ForCausalLM, Gemma3TextConfig, Olmo3Config, Olmo3ForCausalLM

from andrea.models.files.gemma3 import load_gemma3
from andrea.models.files.hf_export import write_folder
from andrea.models.files.olmo3 import load_olmo3
from tests.compose import QUICK, compose_train
from tests.models.hf_parity import relative, saved
from tests.models.test_gemma3 import CONFIG as GEMMA
from tests.models.test_olmo3 import CONFIG as OLMO

FAMILIES = {
    "olmo3": (lambda: Olmo3ForCausalLM(Olmo3Config(**OLMO)), load_olmo3),
    "gemma3": (lambda: Gemma3ForCausalLM(Gemma3TextConfig(**GEMMA)), load_gemma3),
}


@pytest.mark.parametrize("name", list(FAMILIES))
def test_a_family_s_folder_round_trips(name, tmp_path):
    """transformers' folder -> andrea -> --format hf: transformers' logits on the written folder are the first
    folder's, and andrea reads it back to the very tensors it wrote."""
    build, load = FAMILIES[name]
    torch.manual_seed(0)
    hf = saved(build(), tmp_path / "theirs")
    net, config = load(tmp_path / "theirs")
    assert write_folder(net, config, None, tmp_path / "ours") == ["config.json", "model.safetensors",
                                                                  "generation_config.json"]  # fmt: skip
    back = AutoModelForCausalLM.from_pretrained(tmp_path / "ours", attn_implementation="eager").eval()
    ids = torch.randint(0, 97, (2, 12), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        assert relative(back(ids).logits, hf(ids).logits) <= 1e-5
    again, _ = load(tmp_path / "ours")
    assert all(torch.equal(a, b) for a, b in zip(net.state_dict().values(), again.state_dict().values(), strict=True))


@pytest.mark.parametrize("preset", ["olmo3", "gemma3"])
def test_a_preset_s_network_is_written_as_its_family(preset, tmp_path):
    """The preset's own kind names (gemma3's `global`) and settings: the family's reader makes the same network."""
    cfg = compose_train(tmp_path / "run", [*QUICK, f"model={preset}"])
    torch.manual_seed(0)
    net = instantiate(cfg.model.net).eval()
    config = OmegaConf.to_container(cfg.model.net, resolve=True)
    write_folder(net, config, None, tmp_path / "hf")  # type: ignore[arg-type]
    theirs = AutoModelForCausalLM.from_pretrained(tmp_path / "hf", attn_implementation="eager").eval()
    ids = torch.randint(0, 64, (2, 24), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        assert relative(theirs(ids).logits, net(ids)[0]) <= 1e-5


def test_a_network_no_family_holds_is_refused_and_nothing_written(tmp_path):
    cfg = compose_train(tmp_path / "run", [*QUICK, "model=olmo3", "model.net.kinds.full.mechanism.over=head"])
    net = instantiate(cfg.model.net)
    config = OmegaConf.to_container(cfg.model.net, resolve=True)
    with pytest.raises(ValueError, match="no other family andrea writes \\(OLMo 3, Gemma 3\\) holds it") as refused:
        write_folder(net, config, None, tmp_path / "hf")  # type: ignore[arg-type]
    assert "\n" not in str(refused.value) and not (tmp_path / "hf").exists()


def test_two_networks_are_the_same_only_layer_for_layer(tmp_path):
    """Windows past what a short drawing shows still differ; the backend, which computes the same function, does
    not count."""
    from andrea.models.files.family_export import same_network

    cfg = compose_train(tmp_path / "run", [*QUICK, "model=olmo3", "data.seq_len=512"])
    ours: dict[str, Any] = OmegaConf.to_container(cfg.model.net, resolve=True)  # type: ignore[assignment]
    assert same_network(ours, ours)
    wider = {**ours, "kinds": {**ours["kinds"], "sliding": {**ours["kinds"]["sliding"], "mask": {
        "name": "sliding_window", "window": 200, "causal": True}}}}  # fmt: skip
    assert not same_network({**ours, "kinds": {**ours["kinds"], "sliding": {**ours["kinds"]["sliding"], "mask": {
        "name": "sliding_window", "window": 100, "causal": True}}}}, wider)  # fmt: skip
    assert same_network({**ours, "attention": {**ours["attention"], "backend": "eager"}}, ours)
