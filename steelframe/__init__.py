"""Steelframe's entry: the CLI and its commands, the web service composition, dev mode."""
