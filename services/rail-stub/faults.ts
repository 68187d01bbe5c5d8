/**
 * The stub's fault plan: an ordered list of rules; the first live rule whose prefix matches a
 * call applies to it and, if counted, is used up. Lets tests and drills make the rail slow,
 * rejecting, "landed but the answer was lost", or "never landed and hung".
 */
import { FaultKind } from "../shared/gen/railfence/railcontrol/v1/rail_control_pb.js";

export interface FaultRule {
  kind: FaultKind;
  latencyMs: number;
  /** Calls left; 0 = unlimited. */
  count: number;
  clientReferencePrefix: string;
}

export class FaultPlan {
  private rules: FaultRule[] = [];
  submitCalls = 0n;

  replace(rules: FaultRule[]): void {
    this.rules = rules.map((r) => ({ ...r }));
  }

  list(): FaultRule[] {
    return this.rules.map((r) => ({ ...r }));
  }

  /** Picks (and consumes) the rule for a call, if any. */
  take(clientReference: string): FaultRule | undefined {
    const i = this.rules.findIndex((r) => clientReference.startsWith(r.clientReferencePrefix));
    if (i < 0) return undefined;
    const rule = this.rules[i]!;
    if (rule.count > 0) {
      rule.count -= 1;
      if (rule.count === 0) this.rules.splice(i, 1);
    }
    return { ...rule };
  }
}

/** Parses RAIL_STUB_FAULTS JSON: [{"kind":"LATENCY","latencyMs":50,"count":0,"clientReferencePrefix":""}]. */
export function parseFaults(json: string): FaultRule[] {
  const raw = JSON.parse(json) as Array<Partial<Omit<FaultRule, "kind">> & { kind: string }>;
  return raw.map((r) => {
    const kind = FaultKind[r.kind as keyof typeof FaultKind];
    if (kind === undefined || kind === FaultKind.UNSPECIFIED) throw new Error(`unknown fault kind ${r.kind}`);
    return { kind, latencyMs: r.latencyMs ?? 0, count: r.count ?? 0, clientReferencePrefix: r.clientReferencePrefix ?? "" };
  });
}
