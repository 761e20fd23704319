"""CLI command groups, one module each (see steelframe.cli.COMMAND_MODULES)."""
