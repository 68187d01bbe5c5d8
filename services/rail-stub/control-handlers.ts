/** RailControlService: fault injection for tests and drills, on its own port. */
import type { ConnectRouter } from "@connectrpc/connect";
import { FaultKind, RailControlService } from "../shared/gen/railfence/railcontrol/v1/rail_control_pb.js";
import { invalidArgument, REASONS } from "../shared/domain/errors.js";
import { checkText } from "../shared/domain/validation.js";
import type { FaultPlan } from "./faults.js";

export function controlRoutes(faults: FaultPlan) {
  return (router: ConnectRouter) =>
    router.service(RailControlService, {
      setFaults(req) {
        for (const [i, r] of req.rules.entries()) {
          if (r.kind === FaultKind.UNSPECIFIED || FaultKind[r.kind] === undefined) {
            throw invalidArgument(`rules[${i}].kind`, REASONS.FIELD_INVALID, "fault kind is required");
          }
          checkText(`rules[${i}].client_reference_prefix`, r.clientReferencePrefix, 0, 128);
        }
        faults.replace(req.rules.map((r) => ({ kind: r.kind, latencyMs: r.latencyMs, count: r.count, clientReferencePrefix: r.clientReferencePrefix })));
        return {};
      },
      getFaults() {
        return { rules: faults.list(), submitCalls: faults.submitCalls };
      },
    });
}
