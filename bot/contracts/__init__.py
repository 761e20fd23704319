"""Typed wire contracts: the shapes the service sends, declared once as msgspec Structs."""
