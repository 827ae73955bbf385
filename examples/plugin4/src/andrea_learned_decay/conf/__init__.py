"""Config groups this plugin adds to andrea-train's search path: mixer/learned_decay.yaml."""
