"""Typed wire contracts, one module per seam; they import nothing of ours."""
