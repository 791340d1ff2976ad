"""Naming and type conventions: pure functions from the model to text (as torchgen's api/)."""
