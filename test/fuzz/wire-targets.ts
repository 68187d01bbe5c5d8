/**
 * Every server of the mesh as a raw-wire target: its money (or state-changing) method, the
 * headers a caller needs, a request whose content passes every check, and the documented
 * request size limit read from docs/limits.md's table (the contract, not the code).
 * Also the protobuf wire-format pieces the hostile properties build bodies from.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { create, ScalarType, toBinary, type DescField, type DescMessage, type DescMethod } from "@bufbuild/protobuf";
import type http2 from "node:http2";
import type { Mesh } from "../../tools/harness/mesh.js";
import { projectRoot } from "../../services/shared/process/project-root.js";
import { AcquireRequestSchema, LockService } from "../../services/shared/gen/railfence/lock/v1/lock_pb.js";
import { CreatePayoutRequestSchema, PayoutService } from "../../services/shared/gen/railfence/payouts/v1/payouts_pb.js";
import { RailService, SubmitPaymentRequestSchema } from "../../services/shared/gen/railfence/rail/v1/rail_pb.js";
import { FaultKind, RailControlService, SetFaultsRequestSchema } from "../../services/shared/gen/railfence/railcontrol/v1/rail_control_pb.js";
import { RailProxyService, SubmitPayoutRequestSchema } from "../../services/shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";

export type TargetName = "rail-proxy" | "payouts" | "lock" | "rail-stub" | "rail-stub-control";

export interface WireTarget {
  name: TargetName;
  url: () => string;
  method: DescMethod;
  path: string;
  /** Headers a legitimate caller sends (credential, idempotency key). */
  headers: () => http2.OutgoingHttpHeaders;
  /** A request whose content passes every check of the method (it would be executed). */
  valid: () => Uint8Array;
  /** The same request in Connect JSON. */
  validJson: () => string;
  /** The documented largest request message, in bytes (docs/limits.md). */
  maxBytes: number;
}

/** The docs/limits.md rows "request message, <server>": the documented size limit per server. */
export function documentedRequestLimits(): Record<string, number> {
  const readme = readFileSync(join(projectRoot(), "docs", "limits.md"), "utf8");
  const out: Record<string, number> = {};
  for (const m of readme.matchAll(/^\| request message, ([\w-]+) \| (\d+) (KiB|MiB|bytes) \|/gm)) {
    out[m[1]!] = Number(m[2]) * (m[3] === "KiB" ? 1024 : m[3] === "MiB" ? 1024 * 1024 : 1);
  }
  return out;
}

let counter = 0;
const uid = (p: string) => `${p}-${process.pid}-${++counter}`;

export function wireTargets(mesh: () => Mesh): WireTarget[] {
  const limits = documentedRequestLimits();
  const limit = (name: TargetName) => {
    const n = limits[name];
    if (n === undefined) throw new Error(`docs/limits.md has no "request message, ${name}" row`);
    return n;
  };
  const money = { amountMinor: 100n, currency: "EUR" };
  const json = (o: object) => JSON.stringify(o, (_k, v: unknown) => (typeof v === "bigint" ? String(v) : v));
  const submitPayout = () => ({ accountId: uid("acc-wire"), payoutId: uid("p-wire"), fencingToken: 7n, amount: money, beneficiary: "ben-wire" });
  const createPayout = () => ({ accountId: uid("acc-wire"), amount: money, beneficiary: "ben-wire", clientReference: "wire" });
  const acquire = () => ({ key: `fz-wire/${uid("k")}`, owner: "wire fuzz", ttlMs: 1000, waitMs: 0 });
  const payment = () => ({ clientReference: uid("ref-wire"), accountId: "acc-wire", beneficiary: "ben-wire", amount: money });
  const faults = () => ({ rules: [{ kind: FaultKind.LATENCY, latencyMs: 1, count: 1, clientReferencePrefix: "fz-wire-never" }] });
  const path = (m: DescMethod) => `/${m.parent.typeName}/${m.name}`;
  const bin = <D extends DescMessage>(d: D, init: object) => toBinary(d, create(d, init as never));
  return [
    {
      name: "rail-proxy",
      url: () => mesh().proxies[0]!.url,
      method: RailProxyService.method.submitPayout,
      path: path(RailProxyService.method.submitPayout),
      headers: () => ({}),
      valid: () => bin(SubmitPayoutRequestSchema, submitPayout()),
      validJson: () => json(submitPayout()),
      maxBytes: limit("rail-proxy"),
    },
    {
      name: "payouts",
      url: () => mesh().payouts!.url,
      method: PayoutService.method.createPayout,
      path: path(PayoutService.method.createPayout),
      headers: () => ({ "idempotency-key": uid("wire-key") }),
      valid: () => bin(CreatePayoutRequestSchema, createPayout()),
      validJson: () => json(createPayout()),
      maxBytes: limit("payouts"),
    },
    {
      name: "lock",
      url: () => mesh().lock!.url,
      method: LockService.method.acquire,
      path: path(LockService.method.acquire),
      headers: () => ({}),
      valid: () => bin(AcquireRequestSchema, acquire()),
      validJson: () => json(acquire()),
      maxBytes: limit("lock"),
    },
    {
      name: "rail-stub",
      url: () => mesh().railStub.url,
      method: RailService.method.submitPayment,
      path: path(RailService.method.submitPayment),
      headers: () => ({ authorization: `Bearer ${mesh().credential}` }),
      valid: () => bin(SubmitPaymentRequestSchema, payment()),
      validJson: () => json(payment()),
      maxBytes: limit("rail-stub"),
    },
    {
      name: "rail-stub-control",
      url: () => `http://127.0.0.1:${mesh().railStub.ready!.controlPort}`,
      method: RailControlService.method.setFaults,
      path: path(RailControlService.method.setFaults),
      headers: () => ({}),
      valid: () => bin(SetFaultsRequestSchema, faults()),
      validJson: () => json({ rules: [{ kind: "FAULT_KIND_LATENCY", latencyMs: 1, count: 1, clientReferencePrefix: "fz-wire-never" }] }),
      maxBytes: limit("rail-stub-control"),
    },
  ];
}

// ---- protobuf wire format, written from the encoding spec (not from any decoder) ----

export const WIRE = { varint: 0, i64: 1, len: 2, sgroup: 3, egroup: 4, i32: 5 } as const;

export function varint(v: bigint): number[] {
  const out: number[] = [];
  let x = BigInt.asUintN(64, v);
  do {
    let b = Number(x & 0x7fn);
    x >>= 7n;
    if (x > 0n) b |= 0x80;
    out.push(b);
  } while (x > 0n);
  return out;
}

export const tag = (fieldNo: number, wireType: number) => varint(BigInt((fieldNo << 3) | wireType));
export const lenField = (fieldNo: number, data: Uint8Array | number[]) => Uint8Array.from([...tag(fieldNo, WIRE.len), ...varint(BigInt(data.length)), ...data]);

/** The wire types protobuf allows for a field: its own, plus packed (LEN) for repeated numbers. */
export function allowedWireTypes(f: DescField): number[] {
  const natural = (t: ScalarType | undefined): number => {
    switch (t) {
      case ScalarType.DOUBLE:
      case ScalarType.FIXED64:
      case ScalarType.SFIXED64:
        return WIRE.i64;
      case ScalarType.FLOAT:
      case ScalarType.FIXED32:
      case ScalarType.SFIXED32:
        return WIRE.i32;
      case ScalarType.STRING:
      case ScalarType.BYTES:
        return WIRE.len;
      default:
        return WIRE.varint;
    }
  };
  switch (f.fieldKind) {
    case "scalar":
      return [natural(f.scalar)];
    case "enum":
      return [WIRE.varint];
    case "message":
    case "map":
      return [WIRE.len];
    case "list":
      if (f.listKind === "message") return [WIRE.len];
      return f.listKind === "enum" ? [WIRE.varint, WIRE.len] : [...new Set([natural(f.scalar), WIRE.len])];
  }
}

/** A field of a request, possibly inside a message field: the path and how to reach it. */
export interface FieldPath {
  path: string;
  field: DescField;
  /** The enclosing message field, when the field is one level down. */
  parent?: DescField;
}

/** Every field of desc and of its message fields, singular or repeated (one level down). */
export function fieldPaths(desc: DescMessage): FieldPath[] {
  const out: FieldPath[] = [];
  for (const f of desc.fields) {
    out.push({ path: f.name, field: f });
    const child = f.fieldKind === "message" || (f.fieldKind === "list" && f.listKind === "message") ? f.message : undefined;
    for (const g of child?.fields ?? []) out.push({ path: `${f.name}.${g.name}`, field: g, parent: f });
  }
  return out;
}

/** One field of the given wire type (its payload well-formed for that wire type), nested as p says. */
export function encodeAt(p: FieldPath, wireType: number, payload: Uint8Array): Uint8Array {
  const fieldNo = p.field.number;
  let bytes: number[];
  switch (wireType) {
    case WIRE.varint:
      bytes = [...tag(fieldNo, wireType), ...varint(payload.reduce((v, b) => (v << 8n) | BigInt(b), 0n) & ((1n << 64n) - 1n))];
      break;
    case WIRE.i64:
      bytes = [...tag(fieldNo, wireType), ...Array.from({ length: 8 }, (_, i) => payload[i] ?? 0)];
      break;
    case WIRE.i32:
      bytes = [...tag(fieldNo, wireType), ...Array.from({ length: 4 }, (_, i) => payload[i] ?? 0)];
      break;
    case WIRE.sgroup:
      bytes = [...tag(fieldNo, WIRE.sgroup), ...tag(fieldNo, WIRE.egroup)];
      break;
    default:
      bytes = [...lenField(fieldNo, payload)];
  }
  return p.parent ? lenField(p.parent.number, bytes) : Uint8Array.from(bytes);
}

export const concat = (...parts: Uint8Array[]) => Uint8Array.from(parts.flatMap((p) => [...p]));
