"""The ops: each recurrence under the token mixers written once as math on tensors, its reference form beside its
fast ones (as flash-linear-attention lays out its ops):

    <op>/__init__.py   the recurrence as its paper writes it, and `run(form, ...)`, the one way in
    <op>/naive.py      `recurrent`: token by token from a fixed-size state, the reference the other forms are
                       proven against (tests/mixers), and what generation runs
    <op>/chunk.py      `chunked`: the implied weights inside chunks, the state carried across them, linear in T;
                       `parallel`: the whole sequence as one chunk
    <op>/implied.py    `weights`: the implied (T, T) weights alone, which the maps draw
    <op>/inputs.py     what every form starts from (the working dtype, the initial state)
    sequence.py        what every form walks a sequence with: tokens one at a time, chunks, their documents

The ops: gated_linear (linear attention, retention, GLA, Mamba-2), delta_rule (DeltaNet, Gated DeltaNet, Gated
DeltaProduct, KDA), dplr (the diagonal-plus-low-rank transition RWKV-7 writes; its mixer is to come); decayed.py
the decayed scores every chunk of a decaying recurrence computes.

A new form of an op is a file beside these and a name in its `run` (and FORMS). Attention's forms are its
backends (andrea.attention.backends, `naive` the reference); the layers around the ops are andrea.mixers."""
