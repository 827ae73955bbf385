"""An example andrea token-mixer plugin: linear attention whose state decays at a rate each head learns."""
