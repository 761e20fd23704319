"""The migration chain, one module per revision, applied in order (`steelframe db upgrade`).

A revision is history: once released it is never edited, and it never imports the models
(they describe today's schema, a revision the schema of its day). So revisions repeat one
another's shape on purpose — the Alembic header (`revision`, `down_revision`, ...), the
`upgrade`/`downgrade` pair, `op.create_table` with `sa.Column` lists — and `duplicates` lists
those pairs; there is no shared logic to extract from them.
"""
