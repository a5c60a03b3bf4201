"""msgspec request models, one module per API family (no logic here)."""
