"""Linear attention (Katharopoulos et al. 2020, "Transformers are RNNs"): softmax's exp(q·k) replaced by a
feature map's φ(q)·φ(k), so the weights factor and a running sum S = Σ φ(k) vᵀ serves every query:

    o_t = φ(q_t)ᵀ S_t / φ(q_t)ᵀ Σ_{j<=t} φ(k_j)        (the paper's normalised form, `normalize`)

feature_map: elu1 (φ(x) = elu(x) + 1 > 0, the paper's), identity, or elementwise_product (fla's learned map,
φ(x) = (W_1 x + b_1) ⊙ (W_2 x + b_2) over a head's channels, one for q and one for k, its layer's choice with
no normaliser and a per-head RMSNorm: `mixer.normalize=false mixer.norm=true`). `normalize` needs positive
features: elu1. No decay, no gate, no norm by default (MIXERS.md); each is a setting.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from andrea.attention.masks import Mask
from andrea.mixers.linear_layer import LinearMixer
from andrea.mixers.linear_reference import recurrence
from andrea.ops.gated_linear import CHUNK
from andrea.utils.rules import SettingError, one_of

FEATURE_MAPS = ("elu1", "identity", "elementwise_product")


class ElementwiseProduct(nn.Module):
    """A learned feature map: (W_1 x + b_1) ⊙ (W_2 x + b_2) over the last dimension (fla's HadamardFeatureMap)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.layer1, self.layer2 = nn.Linear(width, width), nn.Linear(width, width)

    def forward(self, x: Tensor) -> Tensor:
        return self.layer1(x) * self.layer2(x)


class LinearAttention(LinearMixer):
    name = "linear"
    setting_rules = LinearMixer.setting_rules | {"feature_map": one_of(*FEATURE_MAPS)}  # andrea.mixers.settings

    def __init__(
        self, d_model: int, max_context: int, layer: int = 0, n_layer: int = 1, dropout: float = 0.0,
        bias: bool = False, *, n_head: int = 4, feature_map: str = "elu1", normalize: bool = True,
        form: str = "chunked", chunk: int = CHUNK, conv: bool = False, gate: bool = False, norm: bool = False,
    ) -> None:  # fmt: skip
        if feature_map not in FEATURE_MAPS:
            raise SettingError("mixer.feature_map", f"={feature_map!r} is not one of {', '.join(FEATURE_MAPS)}")
        if normalize and feature_map != "elu1":
            raise SettingError(
                "mixer.normalize",
                f"=true needs positive features, and {feature_map} gives signed ones: use mixer.feature_map=elu1 "
                "or mixer.normalize=false",
            )
        super().__init__(d_model, max_context, layer, n_layer, dropout, bias, n_head=n_head, form=form, chunk=chunk,
                         conv=conv, gate=gate, norm=norm, normalize=normalize)  # fmt: skip
        self.feature_map, self.signed = feature_map, feature_map != "elu1"  # elu + 1 > 0: no negative weight
        learned = feature_map == "elementwise_product"
        self.maps = nn.ModuleDict({s: ElementwiseProduct(self.key_dim) for s in "qk"}) if learned else None

    def features(self, q: Tensor, k: Tensor, start: int) -> tuple[Tensor, Tensor]:
        if self.maps is not None:
            return self.maps["q"](q), self.maps["k"](k)
        if self.feature_map == "identity":
            return q, k
        return F.elu(q) + 1, F.elu(k) + 1

    def reference(self, x: Tensor, mask: Mask | None = None) -> Tensor:
        """The paper's recurrence one token at a time (andrea.mixers.linear_reference), no decay:
        S_t = S_{t-1} + φ(k_t) v_tᵀ and o_t = S_tᵀ φ(q_t) / sqrt(K), normalised by φ(q_t)·Σ_{j<=t} φ(k_j)."""
        no_decay = x.new_ones(1, self.n_head, 1)
        return recurrence(self, x, mask, lambda token, q, k: (self._phi(q, "q"), self._phi(k, "k"), no_decay))

    def _phi(self, u: Tensor, stream: str) -> Tensor:
        """The feature map on one token's q or k (B, H, K), written out: elu(u) + 1 is u + 1 above 0, e^u below."""
        if self.feature_map == "elu1":
            return torch.where(u > 0, u + 1, u.clamp_max(0).exp())
        return u if self.maps is None else self.maps[stream](u)  # identity, or the learned map's module on the token
