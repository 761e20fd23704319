"""Webhook handlers, one module (and one `Router`) per concern, composed in `webhooks.router`."""
