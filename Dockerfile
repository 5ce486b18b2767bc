# syntax=docker/dockerfile:1
# One image for every Lexvoz program (agent worker, web/token service, search server); the compose
# file picks the command. No secret is baked in: keys arrive as environment variables at run time.

# --- 1. the browser page -------------------------------------------------------------------------
FROM node:22-bookworm-slim AS web
WORKDIR /web
COPY web/package.json web/package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY web/ ./
RUN npm run build

# --- 2. Python dependencies and the project, in a venv -------------------------------------------
FROM python:3.11-slim-bookworm AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
# a compiler only for the rare dependency without a wheel; it stays in this stage
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential \
    && rm -rf /var/lib/apt/lists/*
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
COPY pyproject.toml README* ./
COPY agent/ agent/
COPY panama_law/ panama_law/
COPY realtime_standin/ realtime_standin/
RUN pip install .

# --- 3. runtime ----------------------------------------------------------------------------------
FROM python:3.11-slim-bookworm AS runtime
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN groupadd --system --gid 10001 lexvoz \
    && useradd --system --uid 10001 --gid lexvoz --home-dir /app --shell /usr/sbin/nologin lexvoz \
    && mkdir -p /app/var /data /tmp/lexvoz-prometheus \
    && chown -R lexvoz:lexvoz /app /data /tmp/lexvoz-prometheus
WORKDIR /app
COPY --from=builder /opt/venv /opt/venv
# Files outside the Python package are found through settings, so the source is installed once (in the
# venv) and only the page build and livekit.yaml's template sit beside it.
COPY --from=web --chown=lexvoz:lexvoz /web/dist /app/web/dist
ENV LEXVOZ_WEB_DIST=/app/web/dist
# the ledger (/app/var, agent) and the search index (/data, search) are volumes in docker-compose.yml
USER lexvoz
EXPOSE 8080 8765
CMD ["python", "-m", "agent", "start"]
