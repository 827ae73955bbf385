"""andrea's conformance kit: every registered attention backend and mask, proven against the math.

Installed with andrea. A plugin package (entry points `andrea.attention_backends`,
`andrea.attention_masks`) proves its backend or mask with one command, once installed:

    pytest --pyargs andrea.testing           # needs pytest: pip install "andrea[dev]"

The kit parametrises itself over the registries, so a plugin joins every cell:
parity against `naive` for every backend x mask example x head config (MHA, GQA, MQA)
x dtype (float32, bfloat16) x pass (forward, backward), the same with a score bias
(ALiBi), queries aligned to the end of longer keys (decode), the attention weights,
rows with no key, declared capabilities honoured, and every mask's declared flags
checked against its own predicate. A mask's test instances come from its
`examples(batch, seq)` classmethod. A failure names its cell, e.g.
`einsum x causal x gqa x torch.float32 x forward: output differs`.

Every registered token mixer other than attention (entry points `andrea.mixers`) joins it too: each form it
declares against the recurrence it writes on its own (`reference`), and decoding from its cache
(andrea.testing.mixer_checks; `--andrea-mixers NAME` runs only its cells). So does every selection of keys
(entry points `andrea.attention_selections`): against dense attention over the keys it chose, through a cache, and
keeping every key (andrea.testing.selection_checks).

andrea's own parity matrix (tests/attention/test_parity.py, tests/mixers/test_parity.py,
tests/attention/test_selection_kit.py) is this kit.
"""

from andrea.testing.checks import HEADS, make_qkv
from andrea.testing.formula import TOLERANCE

__all__ = ["HEADS", "TOLERANCE", "make_qkv"]
