"""An example andrea plugin: the `einsum` attention backend and the `strided` mask."""
