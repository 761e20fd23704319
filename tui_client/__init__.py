"""The Steelframe TUI: a Textual client over the operator HTTP API only."""
