# Two stages: the wheel is built from exactly the files COPY'd below (tests/test_image.py
# builds and starts it from the same list), and the image keeps only its runtime
# dependencies: no build tools, no dev extras, no pip cache.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY steelframe ./steelframe
COPY bot ./bot
COPY operator_api ./operator_api
COPY webhooks ./webhooks
COPY memory ./memory
COPY tui_client ./tui_client
COPY web_gui ./web_gui
COPY http_edge ./http_edge
COPY github_sandbox ./github_sandbox
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11-slim
# git: the worker's checkouts; bubblewrap: the coding sandbox every run happens in
# (docs/lifecycle.md, "The sandbox"); util-linux: prlimit and setpriv, which set its limits
# and drop privileges inside it.
RUN apt-get update && apt-get install -y --no-install-recommends git bubblewrap util-linux \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
# app.yml: the App manifest `steelframe github register` reads (optional in the image).
COPY app.yml /app/
# A user of its own: the service never needs root, and a coding run escaping its sandbox
# lands as this user, not as root. /data belongs to it before the volume is declared, so
# a fresh named volume starts with the same owner.
RUN useradd --create-home --uid 10001 --user-group steelframe \
    && mkdir -p /data && chown steelframe:steelframe /data
USER steelframe
WORKDIR /app
ENV STEELFRAME_DATA_DIR=/data
# One BLAS thread: chat's dense round is one matrix product per question (docs/memory.md,
# "Hybrid ranking"), and with OpenBLAS's default of a thread per core it took 103 ms where
# one thread took 35 ms, on a machine whose cores were busy with other work (here: serve
# instances, workers, the database).
# Every container of this image (compose.yaml, deploy/kubernetes) inherits it.
ENV OPENBLAS_NUM_THREADS=1
VOLUME /data
EXPOSE 8080
# Ready, not merely alive: /readyz is 503 while a setting serving needs is missing
# (webhook secret, App credentials) or the database or Redis is down. serve listens only
# after rebuilding a memory index of another analysis or database (minutes at a million
# chunks: docs/memory.md), so failures in the first 10 minutes do not count.
HEALTHCHECK --interval=10s --timeout=3s --retries=3 --start-period=10m \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/readyz', timeout=2)"
# serve runs the migrations first; run workers from the same image with `steelframe worker`.
#
# A worker container must be allowed to create the sandbox's namespaces. As this image's
# non-root user, bwrap needs unprivileged user namespaces (kernel.unprivileged_userns_clone=1
# where that knob exists; Ubuntu 24.04 hosts also need an AppArmor profile for bwrap) and a
# seccomp profile that allows mount(2), pivot_root(2) and unshare(2), which Docker's default
# refuses, and a /proc without Docker's masks (bwrap mounts a fresh one for the run's pid
# namespace, which the kernel refuses a user namespace while parts of /proc are masked): run
# workers with
#   docker run --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
#     --security-opt systempaths=unconfined --no-healthcheck IMAGE steelframe worker
# (as compose.yaml does; the HEALTHCHECK above asks serve's port, where a worker does not
# listen). A worker that cannot create them refuses coding runs and says
# why; STEELFRAME_CODING_SANDBOX=off runs them unisolated instead (not recommended).
CMD ["steelframe", "serve", "--host", "0.0.0.0", "--port", "8080"]
