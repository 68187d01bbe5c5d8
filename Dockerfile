# syntax=docker/dockerfile:1.7
# railfence: one image for every service. The container command picks the service:
#   node dist/services/<name>/main.js        (lock, rail-proxy, payouts, executor, reconciler, rail-stub)
#   node dist/services/migrate/main.js paydb (migrations; also lockdb, raildb)
# Telemetry starts before any of them (NODE_OPTIONS below), configured only by OTEL_* variables.
#
# Bases pinned by exact tag; pin their digests too when you build for production
# (node:22.23.5-bookworm-slim@sha256:...). Where no registry is reachable, deploy/image/build.sh
# makes both locally under these same tags (Debian minbase + Node from npm), so this file builds
# unchanged everywhere. CI runs Node 20; the code targets ES2022 and runs on both.
ARG NODE_IMAGE=node:22.23.5-bookworm-slim
ARG DEBIAN_IMAGE=debian:12.15-slim

# ---- node: the runtime; the final image takes only its binary (no npm, yarn or corepack) ----
FROM ${NODE_IMAGE} AS node

# ---- build-deps: the full, lockfile-exact install the compiler needs ----
FROM ${NODE_IMAGE} AS build-deps
WORKDIR /app
ENV NPM_CONFIG_UPDATE_NOTIFIER=false NPM_CONFIG_FUND=false NPM_CONFIG_AUDIT=false
COPY package.json package-lock.json ./
# No install scripts: nothing here needs one, and they are supply-chain risk. build_ca is an
# optional build secret: the CA bundle of a TLS-intercepting proxy between the builder and the
# registry. A secret mount exists for this one step only and never lands in a layer.
RUN --mount=type=secret,id=build_ca,target=/run/secrets/build_ca \
    --mount=type=cache,target=/root/.npm,sharing=locked \
    if [ -s /run/secrets/build_ca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/build_ca; fi; \
    npm ci --ignore-scripts

# ---- build: the product only (tsconfig.image.json: no harness, no tests, no source maps) ----
FROM build-deps AS build
COPY tsconfig.json tsconfig.build.json tsconfig.image.json ./
COPY services ./services
# The railfence client library (the CLI uses it); compiled with the services.
COPY clients/typescript/src ./clients/typescript/src
RUN npm run build:image && test ! -e dist/tools && test ! -e dist/test

# ---- prod-deps: runtime dependencies only, from the same lockfile, minus what never runs ----
FROM ${NODE_IMAGE} AS prod-deps
WORKDIR /app
ENV NPM_CONFIG_UPDATE_NOTIFIER=false NPM_CONFIG_FUND=false NPM_CONFIG_AUDIT=false
COPY package.json package-lock.json ./
# Type declarations, source maps and READMEs are never loaded by node (about half the bytes).
RUN --mount=type=secret,id=build_ca,target=/run/secrets/build_ca \
    --mount=type=cache,target=/root/.npm,sharing=locked \
    if [ -s /run/secrets/build_ca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/build_ca; fi; \
    npm ci --omit=dev --ignore-scripts \
 && find node_modules -type f \( -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' -o -name '*.map' \) -delete \
 && find node_modules -type f -iname '*.md' ! -iname 'license*' -delete

# ---- runtime: Debian slim + the node binary + the compiled product ----
FROM ${DEBIAN_IMAGE} AS runtime
# uid/gid 10001: matches runAsUser/runAsGroup in the Helm chart. No home, no login shell.
RUN groupadd --gid 10001 railfence \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin railfence
COPY --from=node /usr/local/bin/node /usr/local/bin/node
WORKDIR /app
# Everything is owned by root and read-only to the service user: with a read-only root
# filesystem the only writable path is /tmp (an emptyDir in Kubernetes).
COPY --from=prod-deps /app/node_modules ./node_modules
# package.json marks the project root (ESM "type": "module"); migrations/ is read by the migrate job.
COPY package.json ./
COPY migrations ./migrations
COPY --from=build /app/dist ./dist
# Telemetry before the application, for every process this image runs (the opentelemetry-demo
# way): the chart's `command: [node, dist/services/...]` inherits it. instrumentation.js starts
# the SDK only when OTEL_EXPORTER_OTLP_ENDPOINT is set and OTEL_SDK_DISABLED is not "true".
ENV NODE_ENV=production \
    NODE_OPTIONS="--import=/app/dist/services/shared/observability/instrumentation.js" \
    HOST=0.0.0.0 \
    HOME=/tmp
USER 10001:10001
# Service ports (gRPC/Connect h2c) and metrics ports; the chart sets PORT/METRICS_PORT explicitly.
EXPOSE 7100 7200 7300 7400 9100 9200 9300 9400 9500 9600
# No default service: running the image without a command is a mistake, say so and exit 64.
CMD ["node", "-e", "console.error('railfence: choose a service, e.g. node dist/services/rail-proxy/main.js'); process.exit(64)"]
