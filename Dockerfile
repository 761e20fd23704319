FROM python:3.11-slim
WORKDIR /app
# git: the worker's checkouts; bubblewrap: the coding sandbox every run happens in
# (docs/lifecycle.md says what the container must be allowed for it).
RUN apt-get update && apt-get install -y --no-install-recommends git bubblewrap \
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
CMD ["steelframe", "serve", "--host", "0.0.0.0", "--port", "8080"]
