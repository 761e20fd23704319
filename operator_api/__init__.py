"""The operator HTTP API: /api/operator/* routes, auth, SSE framing, error shaping."""
