"""What every part of the zoo shares and none owns: the plugin registries' machinery (plugins), the named points
the lens reads and edits (hook_points), and the size of a layer's cache for generation (cache_size)."""
