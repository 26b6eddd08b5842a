# syntax=docker/dockerfile:1
#
# nsfleet worker image.
#
#   docker build -t ghcr.io/nsfleet/nsfleet:0.1.0 .
#   docker run --rm -p 8080:8080 -p 9876:9876 \
#       -e NSFLEET_REDIS_URL=redis://redis.example:6379/0 ghcr.io/nsfleet/nsfleet:0.1.0
#
# Stage 1 builds the nsfleet wheel from the source tree and installs it, with its
# dependencies, into a virtualenv at /opt/nsfleet. Stage 2 is a clean
# python:3.11-slim with only that virtualenv added: no compilers, no build
# backend, no extra tools, running as the unprivileged uid/gid 10001.
# The Helm chart (helm/nsfleet) defaults to this image.

ARG PYTHON_IMAGE=python:3.11-slim

# ---------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

WORKDIR /src
# .dockerignore lets through only what the wheel is built from.
COPY . .

# Build the wheel (pyproject.toml's build backend, hatchling, is fetched in an
# isolated build environment), then install it into the runtime virtualenv.
# pip byte-compiles everything, so the read-only root filesystem costs nothing
# at start-up.
RUN pip wheel --no-deps --wheel-dir /dist . \
 && python -m venv /opt/nsfleet \
 && /opt/nsfleet/bin/pip install /dist/nsfleet-*.whl \
 && /opt/nsfleet/bin/pip uninstall --yes pip \
 && /opt/nsfleet/bin/nsfleet --help > /dev/null

# ---------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS runtime

ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="nsfleet" \
      org.opencontainers.image.description="Horizontally scalable, Redis-backed replacement for Apache RocketMQ's NameServer" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}"

# Unprivileged user; its home is the data directory the embedded Redis would use
# when no NSFLEET_REDIS_URL is given (never the case under the Helm chart).
RUN groupadd --system --gid 10001 nsfleet \
 && useradd --system --uid 10001 --gid 10001 --no-create-home \
        --home-dir /var/lib/nsfleet --shell /usr/sbin/nologin nsfleet \
 && install -d -o 10001 -g 10001 -m 0750 /var/lib/nsfleet

COPY --from=build /opt/nsfleet /opt/nsfleet

ENV PATH=/opt/nsfleet/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    NSFLEET_DATA_DIR=/var/lib/nsfleet

USER 10001:10001
WORKDIR /var/lib/nsfleet

# 8080: HTTP API, /livez, /readyz, /metrics; 9876: RocketMQ remoting (namesrvAddr).
EXPOSE 8080 9876

# nsfleet runs as PID 1 and exits 0 on SIGTERM after draining.
STOPSIGNAL SIGTERM
ENTRYPOINT ["nsfleet"]
CMD ["serve"]
