"""The per-issue task lifecycle: tasks and their states, RQ jobs, the coding runtime, delivery."""
