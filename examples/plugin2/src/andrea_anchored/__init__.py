"""An example andrea plugin: the `baddbmm` attention backend and the `anchored_window` mask."""
