FROM python:3.11-slim
WORKDIR /app
RUN apt-get update && apt-get install -y --no-install-recommends git \
    && rm -rf /var/lib/apt/lists/*
COPY pyproject.toml README.md app.yml* ./
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
# serve runs the migrations first; run workers from the same image with `steelframe worker`.
CMD ["steelframe", "serve", "--host", "0.0.0.0", "--port", "8080"]
