/**
 * grpc.health.v1.Health on the Connect router (no Connect package exists for it).
 * Status per service name; "" is the whole server. Watch streams changes until the caller leaves.
 */
import type { ConnectRouter } from "@connectrpc/connect";
import { DomainError, REASONS } from "../domain/errors.js";
import { EventEmitter, on } from "node:events";
import { Health, HealthCheckResponse_ServingStatus as Status } from "../gen/grpc/health/v1/health_pb.js";

export { Status as ServingStatus };

export class HealthState {
  private readonly statuses = new Map<string, Status>();
  private readonly changes = new EventEmitter();

  constructor(serviceNames: string[]) {
    this.changes.setMaxListeners(0);
    for (const name of ["", ...serviceNames]) this.statuses.set(name, Status.NOT_SERVING);
  }

  /** Sets every known service (and the server as a whole) to status. */
  setAll(status: Status): void {
    for (const name of this.statuses.keys()) this.set(name, status);
  }

  set(name: string, status: Status): void {
    this.statuses.set(name, status);
    this.changes.emit("change", name);
  }

  get(name: string): Status | undefined {
    return this.statuses.get(name);
  }

  register(router: ConnectRouter): void {
    router.service(Health, {
      check: (req) => {
        const status = this.get(req.service);
        // The name is caller text: not echoed back (nor into logs).
        if (status === undefined) throw new DomainError(REASONS.SERVICE_UNKNOWN, "unknown service");
        return { status };
      },
      watch: async function* (this: void, req, ctx) {
        const self = state;
        yield { status: self.get(req.service) ?? Status.SERVICE_UNKNOWN };
        for await (const [name] of on(self.changes, "change", { signal: ctx.signal })) {
          if (name === req.service) yield { status: self.get(req.service) ?? Status.SERVICE_UNKNOWN };
        }
      },
    });
    const state = this;
  }
}
