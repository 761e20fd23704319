"""The GitHub App side of the core: App authentication, the REST client and its errors."""
