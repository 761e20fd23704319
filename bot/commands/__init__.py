"""CLI command groups, one module each (see bot.cli.COMMAND_MODULES)."""
