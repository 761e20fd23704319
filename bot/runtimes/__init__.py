"""Model runtimes: one interface (`Runtime`, in `bot.runtimes.base`), one module per protocol."""
