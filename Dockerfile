# syntax=docker/dockerfile:1.7
# railfence: one image for every service. The container command picks the service:
#   node dist/services/<name>/main.js        (lock, rail-proxy, payouts, executor, reconciler, rail-stub)
#   node dist/services/migrate/main.js paydb (migrations; also lockdb, raildb)
# Base: a Node LTS pinned by exact tag (CI runs Node 20; the code targets ES2022 and runs on both).
# Pin the digest too when you build for production (e.g. node:22.23.4-bookworm-slim@sha256:...).
ARG NODE_IMAGE=node:22.23.4-bookworm-slim

# ---- build: full install (dev dependencies for tsc) and compile services/ to dist/ ----
FROM ${NODE_IMAGE} AS build
WORKDIR /app
ENV NPM_CONFIG_UPDATE_NOTIFIER=false
COPY package.json package-lock.json ./
# No install scripts: the build needs only the compiler, and scripts are supply-chain risk.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY services ./services
# The railfence client library (the CLI uses it); compiled with the services.
COPY clients/typescript/src ./clients/typescript/src
RUN npm run build

# ---- prod-deps: runtime dependencies only, from the same lockfile ----
FROM ${NODE_IMAGE} AS prod-deps
WORKDIR /app
ENV NPM_CONFIG_UPDATE_NOTIFIER=false
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force

# ---- runtime ----
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    HOME=/tmp \
    NPM_CONFIG_UPDATE_NOTIFIER=false
WORKDIR /app
# uid/gid 10001: matches runAsUser/runAsGroup in the Helm chart. No home, no login shell.
RUN groupadd --system --gid 10001 railfence \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin railfence
# Everything is owned by root and read-only to the service user: with a read-only root
# filesystem the only writable path is /tmp (an emptyDir in Kubernetes).
COPY --from=prod-deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# package.json marks the project root (ESM "type": "module"); migrations/ is read by the migrate job.
COPY package.json ./
COPY migrations ./migrations
USER 10001:10001
# Service ports (gRPC/Connect h2c) and metrics ports; the chart sets PORT/METRICS_PORT explicitly.
EXPOSE 7100 7200 7300 7400 9100 9200 9300 9400 9500 9600
# No default service: running the image without a command is a mistake, say so and exit 64.
CMD ["node", "-e", "console.error('railfence: choose a service, e.g. node dist/services/rail-proxy/main.js'); process.exit(64)"]
