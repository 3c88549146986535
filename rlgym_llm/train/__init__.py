"""Training: losses, the trainer loop, reference model, checkpoints, weight sync (needs the train extra)."""
