"""Benchmark the ANDREA GPT family beside the peer a user would pick instead: HF transformers' GPT-2.

    python scripts/bench_model.py                                   # 120M and 12M, T 256 1024 (~11 min, 2 threads)
    python scripts/bench_model.py --models andrea-12m --seq-lens 256 --rounds 2
    python scripts/bench_model.py --models andrea-120m --backends sdpa --peer-impls sdpa --no-compile \\
        --rounds 30 --best-of 2                                     # the train-step target, paired
    python scripts/bench_model.py --models andrea-120m --seq-lens 256 --profile 15   # where a step's time goes
    python scripts/bench_model.py --heads                           # the KV cache of MHA, GQA, MQA and MLA

Per model and sequence length, at batch 1 and float32:
  train    forward + backward + AdamW step: median ms, tokens/s, MFU, peak MiB
  forward  forward only (no grad): median ms, tokens/s
for every attention backend (one network, its backend swapped between calls,
so every backend runs the very same weights), for sdpa under torch.compile (as
the andrea-120m recipe trains; --no-compile skips it), and for GPT2LMHeadModel
at the same size (random init, attn_implementation sdpa and eager; install it
with `pip install -e ".[bench]"`). Both sides step a fused AdamW: our model
configs ask for it, and HF's Trainer picks it by default on torch >= 2.8. Then
greedy generation tokens/s with and without the KV cache, ours beside the
peer's `generate`.

Candidates of one table are timed in interleaved rounds, in a fresh random order
each round (andrea.bench.timing.round_ms); "× peer sdpa" is the median of the per-round
ratios, with their spread (half the interquartile range, in %). MFU is training FLOPs per token (nanoGPT's
6·N + 12·L·d·T, the same formula for the peer) times tokens/s over a float32
matmul peak measured at the start of the same run. Peak MiB is the most extra
memory one train step holds at once (activations, gradients, temporaries) on
top of the weights and the optimizer state.

--heads prints only the head configurations' table, at each model's sizes with RoPE: the numbers
the KV cache keeps a token (all layers) and its size for a full context in bfloat16, parameters,
and cached greedy generation tokens/s on sdpa. MLA (DeepSeek-V2's proportions): kv_rank = 4·head_dim,
rope_dim = head_dim / 2; GQA: n_head / 4 key/value heads.

Targets: our train step at most 0.9x the peer's time (sdpa beside sdpa), and
cached generation at least the peer's tokens/s.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch
import torch.nn.functional as F

from andrea.attention import backend_registry, get_backend
from andrea.bench.timing import median_ms, peak_memory_mib, ratio_spread, round_ms
from andrea.models.generate import generate
from andrea.models.gpt import GPT
from andrea.models.network import kv_cache_widths

PRESETS = {  # conf/model/<name>.yaml, at the benchmark's longest context
    "andrea-120m": dict(n_layer=12, d_model=768, n_head=12),
    "andrea-12m": dict(n_layer=6, d_model=192, n_head=6),
    "andrea-tiny": dict(n_layer=2, d_model=64, n_head=4),
}
CONTEXT = {"andrea-120m": 1024, "andrea-12m": 256, "andrea-tiny": 64}  # each preset's max_context
VOCAB = 50257
PEER = "HF GPT-2"


def matmul_peak_flops(n: int = 2048, repeats: int = 5) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    ms = median_ms({"mm": lambda: a @ b}, repeats=repeats)["mm"]
    return 2 * n**3 / (ms / 1e3)


def our_model(preset: str, context: int) -> GPT:
    p = PRESETS[preset]
    return GPT(VOCAB, context, p["n_layer"], p["d_model"], attention=dict(n_head=p["n_head"], backend="sdpa"))


def peer_models(preset: str, context: int, impls: tuple[str, ...] = ("sdpa", "eager")) -> dict[str, torch.nn.Module]:
    try:
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError:
        return {}
    p, models = PRESETS[preset], {}
    for impl in impls:
        config = GPT2Config(
            vocab_size=VOCAB, n_positions=context, n_embd=p["d_model"], n_layer=p["n_layer"], n_head=p["n_head"],
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation=impl,
        )  # fmt: skip
        models[f"{PEER} {impl}"] = GPT2LMHeadModel(config)
    return models


def backends(only: list[str] | None = None) -> list[str]:
    order = ["naive", "eager", "sdpa", "flex"]
    names = [n for n in backend_registry.names() if only is None or n in only]
    return sorted(names, key=lambda n: (order.index(n) if n in order else len(order), n))


_INSTANCES: dict[str, object] = {}


def use_backend(model: GPT, name: str) -> None:
    """Swap every layer's backend; one instance per name, so a compiled model's guards keep holding."""
    backend = _INSTANCES.setdefault(name, get_backend(name))
    for attention in model.attention:
        attention.backend = backend


def adamw(model: torch.nn.Module) -> torch.optim.Optimizer:
    return torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)


def train_step(model, optimizer, idx, labels, ours: bool, backend: str | None = None, forward=None):
    forward = model if forward is None else forward

    def step():
        if backend:
            use_backend(model, backend)
        if ours:
            logits, _ = forward(idx)
            loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1))
        else:
            loss = model(input_ids=idx, labels=idx).loss  # shifts inside
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def forward_only(model, idx, ours: bool, backend: str | None = None, forward=None):
    forward = model if forward is None else forward

    def run():
        if backend:
            use_backend(model, backend)
        with torch.no_grad():
            return forward(idx)[0] if ours else model(input_ids=idx).logits

    return run


def candidates(mode, ours, peers, idx, labels, args):
    """The calls to time for one pass (train or forward), and the backends that cannot run here with why."""
    calls, refused = {}, {}
    for name in backends(args.backends):
        refusal = get_backend(name).refusal(mask=None, device="cpu", needs_grad=mode == "train")
        if refusal is not None:  # a backend that cannot run here (GPU only) or train here is listed, not run
            refused[name] = refusal
        elif mode == "train":
            calls[name] = train_step(ours.train(), adamw(ours), idx, labels, True, name)
        else:
            calls[name] = forward_only(ours, idx, True, name)
    if args.compile:
        compiled = torch.compile(ours, dynamic=False)  # sdpa, as the recipe compiles it; a graph per length
        if mode == "train":
            calls["sdpa+compile"] = train_step(ours.train(), adamw(ours), idx, labels, True, "sdpa", compiled)
        else:
            calls["sdpa+compile"] = forward_only(ours, idx, True, "sdpa", compiled)
    for name, peer in peers.items():
        if mode == "train":
            calls[name] = train_step(peer.train(), adamw(peer), idx, labels, False)
        else:
            calls[name] = forward_only(peer, idx, False)
    return calls, refused


def bench_length(preset, T, ours, peers, peak, args):
    idx = torch.randint(VOCAB, (1, T))
    labels = torch.roll(idx, -1, dims=1)
    flops = ours.flops_per_token(T)
    peer_flops = {
        name: 6 * sum(p.numel() for p in m.parameters() if p.requires_grad)
        - 6 * m.transformer.wpe.weight.numel()
        + 12 * PRESETS[preset]["n_layer"] * PRESETS[preset]["d_model"] * T
        for name, m in peers.items()
    }
    rows = []
    for mode in ("train", "forward"):
        calls, refused = candidates(mode, ours, peers, idx, labels, args)
        samples = round_ms(calls, repeats=args.rounds, warmup=1, best_of=args.best_of)
        for name in refused:
            rows.append((preset, T, mode, name, None, None, None, None, None, refused[name]))
        reference = samples.get(f"{PEER} sdpa")
        for name, times in samples.items():
            ms = statistics.median(times)
            memory = peak_memory_mib(calls[name]) if mode == "train" else None
            mfu = (peer_flops.get(name, flops) * T / (ms / 1e3)) / peak if mode == "train" else None
            ratio = ratio_spread(times, reference) if reference else None  # paired round by round
            rows.append((preset, T, mode, name, ms, T / (ms / 1e3), ratio, mfu, memory, None))
    return rows


def bench_generation(preset, ours, peers, args):
    prompt = torch.randint(VOCAB, (1, args.prompt))
    n = args.new_tokens
    calls = {}
    for name in backends(args.backends):
        if get_backend(name).refusal(mask=None, device="cpu", needs_grad=False) is not None:
            continue  # listed with its reason in the train-step table

        def ours_cached(name=name):
            use_backend(ours, name)
            return generate(ours, prompt, n, temperature=0)

        calls[f"{name} cache"] = ours_cached
    calls["sdpa no cache"] = lambda: (
        use_backend(ours, "sdpa"),
        generate(ours, prompt, n, temperature=0, use_cache=False),
    )
    for name, peer in peers.items():
        for cache in (True, False):
            calls[f"{name} {'cache' if cache else 'no cache'}"] = (
                lambda peer=peer, cache=cache: peer.generate(
                    prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=n, min_new_tokens=n,
                    do_sample=False, use_cache=cache, pad_token_id=0,
                )
            )  # fmt: skip
    ours.eval()
    for peer in peers.values():
        peer.eval()
    times = median_ms(calls, repeats=args.rounds, warmup=1)
    reference = times.get(f"{PEER} sdpa cache")
    return [(preset, name, ms, n / (ms / 1e3), (reference / ms) if reference else None) for name, ms in times.items()]


def profile_train_step(preset: str, T: int, top: int) -> None:
    """Where a train step's time goes: torch profiler's top ops by self CPU time, ours (sdpa) beside the
    peer's (sdpa), one warm step each, then the totals of the shared op kinds side by side."""
    from torch.profiler import ProfilerActivity, profile

    idx = torch.randint(VOCAB, (1, T))
    labels = torch.roll(idx, -1, dims=1)
    ours = our_model(preset, T)
    peer = peer_models(preset, T).get(f"{PEER} sdpa")
    candidates = {"ours (sdpa)": (ours, True)} | ({f"{PEER} sdpa": (peer, False)} if peer is not None else {})
    totals: dict[str, dict[str, float]] = {}
    for name, (model, is_ours) in candidates.items():
        step = train_step(model, adamw(model), idx, labels, is_ours, "sdpa" if is_ours else None)
        step(), step()  # warm
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            step()
        events = prof.key_averages()
        totals[name] = {e.key: e.self_cpu_time_total / 1e3 for e in events}
        print(f"\n# {preset}, T={T}, one train step, {name}: {sum(totals[name].values()):.0f} ms of self CPU time")
        print(events.table(sort_by="self_cpu_time_total", row_limit=top, max_name_column_width=40))
    if len(totals) == 2:
        a, b = totals.values()
        keys = sorted(set(a) | set(b), key=lambda k: -(a.get(k, 0) + b.get(k, 0)))[:top]
        print(f"\n| op | {' | '.join(candidates)} | difference ms |\n|---|---:|---:|---:|")
        for key in keys:
            print(f"| {key} | {a.get(key, 0):.1f} | {b.get(key, 0):.1f} | {a.get(key, 0) - b.get(key, 0):+.1f} |")


def fmt(value, spec):
    return "" if value is None else format(value, spec)


def fmt_ratio(ratio: tuple[float, float] | None) -> str:
    """A paired ratio and its spread (half the interquartile range of the per-round ratios)."""
    return "" if ratio is None else f"{ratio[0]:.3f} ±{100 * ratio[1]:.1f}%"


def print_tables(rows, gen_rows, args) -> None:
    print("\n| model | T | pass | implementation | median ms | tokens/s | × peer sdpa | MFU | peak MiB |")
    print("|---|---:|---|---|---:|---:|---:|---:|---:|")
    notes = []
    for preset, T, mode, name, ms, tps, ratio, mfu, memory, refused in rows:
        if refused:
            notes.append(refused) if refused not in notes else None
            print(f"| {preset} | {T} | {mode} | {name} | n/a [{notes.index(refused) + 1}] | | | | |")
            continue
        print(
            f"| {preset} | {T} | {mode} | {name} | {ms:.1f} | {tps:.0f} | {fmt_ratio(ratio)} | "
            f"{fmt(mfu and 100 * mfu, '.1f')}{'%' if mfu else ''} | {fmt(memory, '.0f')} |"
        )
    for i, note in enumerate(notes, 1):
        print(f"\n[{i}] unsupported: {note}")

    print(
        f"\n| model | generation ({args.prompt} prompt + {args.new_tokens} new, greedy) | median ms | tokens/s | × "
        "peer sdpa cache (tokens/s) |"
    )
    print("|---|---|---:|---:|---:|")
    for preset, name, gen_ms, gen_tps, ratio in gen_rows:
        print(f"| {preset} | {name} | {gen_ms:.0f} | {gen_tps:.1f} | {fmt(ratio, '.2f')} |")

    print("\n## targets")
    for preset, T, mode, name, _ms, _tps, ratio, *_ in rows:
        if mode == "train" and name in ("sdpa", "sdpa+compile") and ratio is not None:
            print(
                f"train step {preset} T={T}: ours {name} / {PEER} sdpa = {fmt_ratio(ratio)} over {args.rounds} "
                f"paired rounds (target <= 0.90: {'met' if ratio[0] <= 0.9 else 'MISSED'})"
            )
    for preset, name, _ms, _tps, ratio in gen_rows:
        if name == "sdpa cache" and ratio is not None:
            print(
                f"cached generation {preset}: ours / {PEER} = {ratio:.2f}x tokens/s (target >= 1: "
                f"{'met' if ratio >= 1 else 'MISSED'})"
            )


def heads_table(args) -> None:
    """The KV cache, parameters and cached generation speed of each head configuration, per model."""
    print("| model | heads | KV cache a token (numbers) | × MHA | cache at max_context (bf16) | parameters | "
          "cached generation (tokens/s) |\n|---|---|---:|---:|---:|---:|---:|")  # fmt: skip
    for preset in args.models:
        p = PRESETS[preset]
        head_dim, context = p["d_model"] // p["n_head"], args.prompt + args.new_tokens
        groups = next(g for g in (4, 3, 2, 1) if p["n_head"] % g == 0 and g < p["n_head"])  # kv heads of GQA
        configs = {
            "mha": {},
            f"gqa ({groups} kv heads)": {"n_kv_head": groups},
            "mqa": {"n_kv_head": 1},
            f"mla (kv_rank {4 * head_dim}, rope_dim {head_dim // 2})": {
                "latent": {"kv_rank": 4 * head_dim, "rope_dim": head_dim // 2}
            },
        }
        for name, heads in configs.items():
            prompt = torch.randint(VOCAB, (1, args.prompt))
            torch.manual_seed(0)
            attention = dict(n_head=p["n_head"], backend="sdpa") | heads
            model = GPT(VOCAB, context, p["n_layer"], p["d_model"], attention=attention, position="rope").eval()
            widths = kv_cache_widths(model)
            calls = {"gen": lambda model=model, prompt=prompt: generate(model, prompt, args.new_tokens, temperature=0)}
            ms = median_ms(calls, repeats=args.rounds, warmup=1)["gen"]
            print(
                f"| {preset} | {name} | {widths['kept']:,} | {widths['kept'] / widths['mha']:.3f} | "
                f"{widths['kept'] * CONTEXT[preset] * 2 / 2**20:.2f} MiB | {model.num_parameters():,} | "
                f"{args.new_tokens / (ms / 1e3):,.0f} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["andrea-120m", "andrea-12m"], choices=sorted(PRESETS))
    parser.add_argument("--seq-lens", nargs="+", type=int, default=[256, 1024])
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per candidate (median)")
    parser.add_argument("--best-of", type=int, default=1, help="a candidate's time in a round: the fastest of N calls")
    parser.add_argument("--prompt", type=int, default=16, help="prompt tokens for generation")
    parser.add_argument("--new-tokens", type=int, default=64, help="generated tokens")
    parser.add_argument("--no-peer", action="store_true", help="skip HF transformers even when installed")
    parser.add_argument("--backends", nargs="+", help="only these attention backends (default: every registered one)")
    parser.add_argument("--peer-impls", nargs="+", default=["sdpa", "eager"], help="HF GPT-2 attn_implementations")
    parser.add_argument("--no-compile", dest="compile", action="store_false", help="skip the torch.compile rows")
    parser.add_argument(
        "--profile", type=int, metavar="TOP", help="only profile a train step: the TOP ops, ours beside the peer's"
    )
    parser.add_argument("--heads", action="store_true", help="only the KV cache of MHA, GQA, MQA and MLA")
    args = parser.parse_args()
    if args.heads:
        heads_table(args)
        return
    if args.profile:
        torch.manual_seed(0)
        for preset in args.models:
            for T in args.seq_lens:
                profile_train_step(preset, T, args.profile)
        return

    torch.manual_seed(0)
    start = time.perf_counter()
    peak = matmul_peak_flops()
    print(
        f"# torch {torch.__version__}, {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads"
    )
    print(f"# float32 matmul peak measured now: {peak / 1e9:.1f} GFLOP/s (2048x2048, median of 5)")
    rows, gen_rows = [], []
    for preset in args.models:
        context = max(args.seq_lens + [args.prompt + args.new_tokens])
        ours = our_model(preset, context)
        peers = {} if args.no_peer else peer_models(preset, context, tuple(args.peer_impls))
        print(
            f"# {preset}: {ours.num_parameters():,} parameters (context {context})"
            + "".join(f"; {name}: {sum(p.numel() for p in m.parameters()):,}" for name, m in list(peers.items())[:1])
        )
        for T in args.seq_lens:
            rows += bench_length(preset, T, ours, peers, peak, args)
        gen_rows += bench_generation(preset, ours, peers, args)
        del ours, peers

    print_tables(rows, gen_rows, args)
    print(f"\n# {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
