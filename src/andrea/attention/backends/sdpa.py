"""sdpa: torch's fused `scaled_dot_product_attention` (flash / memory-efficient kernels).

The mask reaches it in the cheapest form it accepts: nothing for an unmasked
call, `is_causal=True` when the mask is exactly causal over a square score
matrix (torch aligns `is_causal` top-left, wrong for T != S), an explicit
boolean mask otherwise. Grouped heads go in as they are (`enable_gqa`).
"""

import torch
import torch.nn.functional as F

from andrea.attention.contract import AttentionBackend, Capabilities


class SDPABackend(AttentionBackend):
    name = "sdpa"
    capabilities = Capabilities(native_weights=False, cpu_backward=True, native_gqa=True)

    def forward(self, q, k, v, mask, scale, need_weights):
        B, H, T, _ = q.shape
        S = k.shape[2]
        attn_mask, is_causal = None, False
        if mask is not None and not mask.is_full:
            if mask.is_causal and T == S:
                is_causal = True
            else:
                attn_mask = mask.dense(T, S, batch_size=B, num_heads=H, device=q.device)  # (B|1, H|1, T, S)
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, is_causal=is_causal, scale=scale, enable_gqa=H != k.shape[1]
        )  # (B, H, T, d)
        if attn_mask is not None and not mask.attends_self:
            # Not every kernel on every device returns zeros for a row with no key.
            out = torch.where(attn_mask.any(dim=-1, keepdim=True), out, 0.0)
        return out, None
