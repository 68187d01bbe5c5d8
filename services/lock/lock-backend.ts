/**
 * The seam between the Lock service and its storage. Handlers speak only this interface, so the
 * pg and etcd backends are interchangeable and pass one conformance suite; nothing above this
 * file branches on which backend is configured.
 *
 * Backends never know Connect codes: they return outcomes (granted / held / lost / not held) and
 * throw BackendUnavailableError when the store cannot be reached, which the handlers map to
 * UNAVAILABLE LOCK_BACKEND_UNAVAILABLE (fail closed: no answer is ever guessed).
 */

export type BackendName = "pg" | "etcd";

/** A granted (or renewed) lease. `leaseId` is the plain capability, returned to the holder only. */
export interface LeaseGrant {
  key: string;
  leaseId: string;
  owner: string;
  token: bigint;
  /** Expiry by the backend's clock (etcd: an estimate that is never later than the real one). */
  expiresAt: Date;
}

export interface AcquireInput {
  key: string;
  owner: string;
  ttlMs: number;
  /** 0 = one attempt only. */
  waitMs: number;
  /** Aborted when the caller leaves or the server drains: stop waiting, grant nothing more. */
  signal?: AbortSignal;
}

export interface RenewInput {
  key: string;
  leaseId: string;
  ttlMs: number;
}

export interface ReleaseInput {
  key: string;
  leaseId: string;
}

/**
 * released: this call ended a live lease. already_ended: the caller's lease was the latest one
 * for the key and had already ended (second release, or expired). not_held: the lease id is not
 * the key's latest lease (a stranger, or a lease superseded by a newer grant).
 */
export type ReleaseOutcome = "released" | "already_ended" | "not_held";

export interface LockState {
  key: string;
  held: boolean;
  owner: string;
  /** Holder's token; 0n when not held. */
  token: bigint;
  expiresAt: Date | undefined;
  /** Highest token this backend ever issued for the key (0n if none). */
  lastToken: bigint;
}

export interface LockBackend {
  readonly name: BackendName;
  /** The effective token floor (configured floor ratcheted with the stored one). */
  readonly floor: bigint;
  /** Returns undefined when the key was still held when waitMs ran out. */
  acquire(input: AcquireInput): Promise<LeaseGrant | undefined>;
  /** Returns undefined when the lease is no longer live (expired, released, superseded, unknown). */
  renew(input: RenewInput): Promise<LeaseGrant | undefined>;
  release(input: ReleaseInput): Promise<ReleaseOutcome>;
  inspect(key: string): Promise<LockState>;
  close(): Promise<void>;
}

/** The backend could not be reached or did not answer in time; nothing is known to have changed. */
export class BackendUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "BackendUnavailableError";
  }
}

/** Thrown when a waiting acquire is abandoned because its caller left or the server is draining. */
export class AcquireAbortedError extends Error {
  constructor() {
    super("acquire abandoned: the caller went away or the server is shutting down");
    this.name = "AcquireAbortedError";
  }
}
