"""Linear attention (Katharopoulos et al. 2020, "Transformers are RNNs"): softmax's exp(q·k) replaced by a
feature map's φ(q)·φ(k), so the weights factor and a running sum S = Σ φ(k) vᵀ serves every query:

    o_t = φ(q_t)ᵀ S_t / φ(q_t)ᵀ Σ_{j<=t} φ(k_j)        (the paper's normalised form, `normalize`)

feature_map: elu1 (φ(x) = elu(x) + 1 > 0, the paper's) or identity (then `normalize` must be off: the
normaliser needs positive features). No decay, no gate, no norm by default (MIXERS.md); each is a setting.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from andrea.mixers.gated_linear import CHUNK
from andrea.mixers.linear_layer import LinearMixer
from andrea.utils.rules import SettingError

FEATURE_MAPS = ("elu1", "identity")


class LinearAttention(LinearMixer):
    name = "linear"

    def __init__(
        self, d_model: int, max_context: int, layer: int = 0, n_layer: int = 1, dropout: float = 0.0,
        bias: bool = False, *, n_head: int = 4, feature_map: str = "elu1", normalize: bool = True,
        form: str = "chunked", chunk: int = CHUNK, conv: bool = False, gate: bool = False, norm: bool = False,
    ) -> None:  # fmt: skip
        if feature_map not in FEATURE_MAPS:
            raise SettingError("mixer.feature_map", f"={feature_map!r} is not one of {', '.join(FEATURE_MAPS)}")
        if normalize and feature_map == "identity":
            raise SettingError("mixer.normalize", "=true needs positive features: use mixer.feature_map=elu1")
        super().__init__(d_model, max_context, layer, n_layer, dropout, bias, n_head=n_head, form=form, chunk=chunk,
                         conv=conv, gate=gate, norm=norm, normalize=normalize)  # fmt: skip
        self.feature_map = feature_map

    def features(self, q: Tensor, k: Tensor, start: int) -> tuple[Tensor, Tensor]:
        if self.feature_map == "identity":
            return q, k
        return F.elu(q) + 1, F.elu(k) + 1
