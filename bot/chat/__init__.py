"""Operator Chat: sessions, the turn pipeline, in-flight turns, trailer, titles, summaries."""
