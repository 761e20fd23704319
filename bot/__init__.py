"""Steelframe's domain core: config, storage, the chat turn pipeline, runtimes, CLI."""

__version__ = "0.1.0"
