"""How long a test waits for what a loaded machine makes slow before calling it a hang.

Its own module, importing nothing, so `tests/conftest.py` (the sandbox's `settle`) and
`tests/fakes/lifecycle.py` (which imports conftest) share one figure."""

# For webhooks to settle and sandboxed runs to start (`wait_for(..., within=PATIENCE_SECONDS)`).
# A clean-clone CI run at a load average of 20 took more than 10 s for what takes a second
# or two on a quiet machine; only a test that fails waits this long. Not `wait_for`'s
# default: some of its callers wait for what a product timeout (30 s and more) would bring
# about anyway, and must fail before that.
PATIENCE_SECONDS = 60.0
