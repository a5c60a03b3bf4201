"""Route modules, one per API family; each exports ROUTES (handlers) for app.py."""
