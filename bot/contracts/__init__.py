"""Typed wire contracts, one module per seam, declared once as msgspec Structs; they
import nothing of ours."""
