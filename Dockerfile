FROM python:3.11-slim
WORKDIR /app
# git: the worker's checkouts; bubblewrap: the coding sandbox every run happens in
# (docs/lifecycle.md, "The sandbox"); util-linux: prlimit and setpriv, which set its limits
# and drop root inside it.
RUN apt-get update && apt-get install -y --no-install-recommends git bubblewrap util-linux \
    && rm -rf /var/lib/apt/lists/*
COPY pyproject.toml README.md app.yml* ./
COPY steelframe ./steelframe
COPY bot ./bot
COPY operator_api ./operator_api
COPY webhooks ./webhooks
COPY memory ./memory
COPY tui_client ./tui_client
COPY github_sandbox ./github_sandbox
RUN pip install --no-cache-dir .
ENV STEELFRAME_DATA_DIR=/data
VOLUME /data
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --retries=3 \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=2)"
# serve runs the migrations first; run workers from the same image with `steelframe worker`.
#
# A worker container must be allowed to create the sandbox's namespaces. As root in the
# container (this image's default) bwrap needs no user namespace, but it does call
# mount(2), pivot_root(2) and unshare(2), which Docker's default seccomp profile and its
# dropped CAP_SYS_ADMIN refuse: run workers with
#   docker run --cap-add SYS_ADMIN --security-opt seccomp=unconfined \
#     --security-opt apparmor=unconfined IMAGE steelframe worker
# (or a seccomp profile that allows those calls). Run as a non-root user instead, bwrap
# needs unprivileged user namespaces (kernel.unprivileged_userns_clone=1 where that knob
# exists; Ubuntu 24.04 hosts also need an AppArmor profile for bwrap) and the same
# seccomp allowance. A worker that cannot create them refuses coding runs and says why;
# STEELFRAME_CODING_SANDBOX=off runs them unisolated instead (not recommended).
CMD ["steelframe", "serve", "--host", "0.0.0.0", "--port", "8080"]
