/**
 * LockService handlers: validate, call the backend, map outcomes to messages and Connect codes.
 * The only layer of the lock service that knows Connect codes; it never knows which backend
 * runs underneath.
 *
 * Refusals (all with google.rpc.ErrorInfo, domain railfence.dev):
 * - Acquire still held after wait_ms: ABORTED LOCK_HELD.
 * - Renew of a lease that is not live (expired, released, superseded, unknown id):
 *   FAILED_PRECONDITION LEASE_LOST.
 * - Release with a lease id that is not the key's latest lease: FAILED_PRECONDITION
 *   LEASE_NOT_HELD (a capability mismatch, like LEASE_LOST; not PERMISSION_DENIED, which is
 *   about who the caller is). The holder's own second Release answers released=false.
 * - Backend unreachable: UNAVAILABLE LOCK_BACKEND_UNAVAILABLE with a retry hint.
 */
import type { ConnectRouter } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { DomainError, REASONS, unavailable } from "../shared/domain/errors.js";
import { LeaseSchema, LockService, type Lease } from "../shared/gen/railfence/lock/v1/lock_pb.js";
import { signToken } from "../shared/process/token-signature.js";
import { AcquireAbortedError, BackendUnavailableError, type LeaseGrant, type LockBackend } from "./lock-backend.js";
import type { LockMetrics } from "./lock-metrics.js";
import { checkKey, checkLeaseId, checkOwner, checkTtl, checkWait } from "./lock-validation.js";

/** How long a caller should wait before retrying after LOCK_BACKEND_UNAVAILABLE. */
const BACKEND_RETRY_MS = 1000;

export interface LockRoutesDeps {
  backend: LockBackend;
  metrics: LockMetrics;
  /** When set, every lease carries a signature of (key, token) that rail-proxy can verify. */
  tokenSigningKey?: Buffer;
}

function toLease(g: LeaseGrant, signingKey: Buffer | undefined): Lease {
  return create(LeaseSchema, {
    key: g.key,
    leaseId: g.leaseId,
    owner: g.owner,
    fencingToken: g.token,
    expiresAt: timestampFromDate(g.expiresAt),
    tokenSignature: signingKey ? signToken(signingKey, g.key, g.token) : new Uint8Array(0),
  });
}

export function lockRoutes(deps: LockRoutesDeps) {
  const { backend, metrics } = deps;
  const labels = { backend: backend.name };

  /** Fail closed: an unreachable backend is UNAVAILABLE with a retry hint, never a guess. */
  async function call<T>(op: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof BackendUnavailableError) {
        metrics.backendErrors.inc({ ...labels, op });
        throw unavailable(REASONS.LOCK_BACKEND_UNAVAILABLE, "the lock backend is unavailable; no lease was changed", BACKEND_RETRY_MS, err);
      }
      if (err instanceof AcquireAbortedError) throw new DomainError(REASONS.ACQUIRE_ABANDONED, err.message, {}, undefined, { cause: err });
      throw err;
    }
  }

  return (router: ConnectRouter) =>
    router.service(LockService, {
      async acquire(req, ctx) {
        const key = checkKey(req.key);
        const owner = checkOwner(req.owner);
        const ttlMs = checkTtl(req.ttlMs);
        const waitMs = checkWait(req.waitMs);
        const started = performance.now();
        const seconds = () => (performance.now() - started) / 1000;
        let grant: LeaseGrant | undefined;
        try {
          grant = await call("acquire", () => backend.acquire({ key, owner, ttlMs, waitMs, signal: ctx.signal }));
        } catch (err) {
          metrics.acquireSeconds.observe({ ...labels, result: "error" }, seconds());
          throw err;
        }
        if (!grant) {
          metrics.acquireSeconds.observe({ ...labels, result: "held" }, seconds());
          metrics.contention.inc(labels);
          throw new DomainError(REASONS.LOCK_HELD, `key is held by another lease (waited ${waitMs} ms)`, { key });
        }
        metrics.acquireSeconds.observe({ ...labels, result: "granted" }, seconds());
        metrics.grants.inc(labels);
        return { lease: toLease(grant, deps.tokenSigningKey) };
      },

      async renew(req) {
        const key = checkKey(req.key);
        const leaseId = checkLeaseId(req.leaseId);
        const ttlMs = checkTtl(req.ttlMs);
        const grant = await call("renew", () => backend.renew({ key, leaseId, ttlMs }));
        if (!grant) {
          metrics.leaseLost.inc(labels);
          throw new DomainError(REASONS.LEASE_LOST, "the lease is no longer held (expired, released or superseded); acquire again", { key });
        }
        return { lease: toLease(grant, deps.tokenSigningKey) };
      },

      async release(req) {
        const key = checkKey(req.key);
        const leaseId = checkLeaseId(req.leaseId);
        const outcome = await call("release", () => backend.release({ key, leaseId }));
        metrics.releases.inc({ ...labels, outcome });
        if (outcome === "not_held") {
          throw new DomainError(REASONS.LEASE_NOT_HELD, "this lease id is not the key's current lease; nothing was released", { key });
        }
        return { released: outcome === "released" };
      },

      async inspect(req) {
        const key = checkKey(req.key);
        const s = await call("inspect", () => backend.inspect(key));
        return {
          key: s.key,
          held: s.held,
          owner: s.owner,
          fencingToken: s.token,
          expiresAt: s.expiresAt ? timestampFromDate(s.expiresAt) : undefined,
          lastToken: s.lastToken,
        };
      },
    });
}
