"""Shared fakes: only for what cannot run here (hosted models, GitHub)."""
