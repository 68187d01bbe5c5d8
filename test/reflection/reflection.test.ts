/**
 * gRPC server reflection on every railfence server, checked with a real reflection client:
 * `buf curl` (the @bufbuild/buf dev dependency) lists each server's methods over
 * grpc.reflection.v1 and over v1alpha, and calls a method with no proto files at hand. The mesh
 * runs mutual TLS, so this also proves an identified operator may reflect and that nobody
 * without a certificate can.
 */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import * as grpc from "@grpc/grpc-js";
import { join } from "node:path";
import { promisify } from "node:util";
import { create, createFileRegistry, fromBinary, toJson } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema, FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { beforeAll, describe, expect, it } from "vitest";
import { useMesh } from "../support/use-mesh.js";
import { Pki } from "../../tools/harness/pki.js";
import { projectRoot } from "../../services/shared/process/project-root.js";
import { ServerReflection } from "../../services/shared/gen/grpc/reflection/v1/reflection_pb.js";
import { startPayouts } from "../payouts/support.js";

const run = promisify(execFile);
const buf = join(projectRoot(), "node_modules", ".bin", "buf");

const t = useMesh({ tls: true, proxies: 1 });

beforeAll(async () => {
  await t.mesh.startLock();
  await t.mesh.startPayouts();
});

/** Runs `buf curl` as the operator; resolves with its exit code and output (never throws). */
async function bufCurl(args: string[], identity: "operator" | "none" = "operator"): Promise<{ code: number; stdout: string; stderr: string }> {
  const op = t.mesh.identityFiles("operator");
  const tls = identity === "operator" ? ["--cert", op.cert, "--key", op.key, "--cacert", op.ca] : ["--cacert", op.ca];
  try {
    const { stdout, stderr } = await run(buf, ["curl", ...tls, "--timeout", "20s", ...args], { timeout: 30_000 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === "number" ? e.code : -1, stdout: e.stdout ?? "", stderr: e.stderr ?? "" };
  }
}

const servers = () => [
  {
    name: "payouts",
    url: t.mesh.payouts!.url,
    methods: [
      "railfence.payouts.v1.PayoutService/CreatePayout",
      "railfence.payouts.v1.PayoutService/GetPayout",
      "railfence.payouts.v1.PayoutService/ListPayouts",
      "railfence.payouts.v1.PayoutService/LookupPayout",
    ],
  },
  {
    name: "rail-proxy",
    url: t.mesh.proxies[0]!.url,
    methods: [
      "railfence.railproxy.v1.RailProxyService/SubmitPayout",
      "railfence.railproxy.v1.RailProxyService/GetSubmission",
      "railfence.railproxy.v1.RailProxyService/GetRailStatement",
    ],
  },
  { name: "lock", url: t.mesh.lock!.url, methods: ["railfence.lock.v1.LockService/Acquire", "railfence.lock.v1.LockService/Inspect"] },
  { name: "rail-stub", url: t.mesh.railStub.url, methods: ["railfence.rail.v1.RailService/SubmitPayment", "railfence.rail.v1.RailService/ListPayments"] },
  { name: "rail-stub control", url: t.mesh.railControlUrl, methods: ["railfence.railcontrol.v1.RailControlService/SetFaults"] },
];

describe("gRPC reflection", () => {
  it.each(["grpc-v1", "grpc-v1alpha"])("buf curl --list-methods over %s lists every server's own methods, health and reflection", async (protocol) => {
    for (const s of servers()) {
      const r = await bufCurl(["--list-methods", "--reflect-protocol", protocol, s.url]);
      expect(r.code, `${s.name}: ${r.stderr}`).toBe(0);
      const listed = r.stdout.split("\n").filter((l) => l.trim());
      for (const m of s.methods) expect(listed, s.name).toContain(m);
      expect(listed, s.name).toContain("grpc.health.v1.Health/Check");
      expect(listed, s.name).toContain("grpc.reflection.v1.ServerReflection/ServerReflectionInfo");
      expect(listed, s.name).toContain("grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo");
      // Only what this server serves: the payouts server does not describe the lock service.
      if (s.name === "payouts") expect(listed.some((l) => l.startsWith("railfence.lock."))).toBe(false);
    }
  });

  it("calls a method with nothing but reflection for the schema (no proto files)", async () => {
    const r = await bufCurl(["--protocol", "grpc", "-d", '{"key":"account:reflected"}', `${t.mesh.lock!.url}/railfence.lock.v1.LockService/Inspect`]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ key: "account:reflected" });
  });

  it("fails for a service the server does not have (the check can fail)", async () => {
    const r = await bufCurl(["-d", "{}", `${t.mesh.payouts!.url}/railfence.lock.v1.LockService/Inspect`]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/railfence\.lock\.v1\.LockService/);
  });

  it("refuses a caller without a client certificate (mutual TLS comes first)", async () => {
    const r = await bufCurl(["--list-methods", t.mesh.payouts!.url], "none");
    expect(r.code).not.toBe(0);
  });

  it("under TLS_CLIENT_AUTH=request, a caller without a certificate gets a session but no reflection", async () => {
    const svc = await startPayouts(t.mesh.dbUrl("paydb"), { ...Pki.env(t.mesh.identityFiles("payouts")), TLS_CLIENT_AUTH: "request" }, "payouts-request-auth");
    svc.opts.tls = true;
    try {
      const anonymous = await bufCurl(["--list-methods", svc.url], "none");
      expect(anonymous.code).not.toBe(0);
      expect(anonymous.stderr).toMatch(/permission_denied|PERMISSION_DENIED/);
      const operator = await bufCurl(["--list-methods", svc.url]);
      expect(operator.code, operator.stderr).toBe(0);
      expect(operator.stdout).toContain("railfence.payouts.v1.PayoutService/CreatePayout");
    } finally {
      await svc.stop(5000);
    }
  });

  it("answers symbol lookups with the file and its imports, and NOT_FOUND for unknown names", async () => {
    const client = t.mesh.client(ServerReflection, t.mesh.proxies[0]!.url, "operator", { idleConnectionTimeoutMs: 1000 });
    async function* requests() {
      yield { host: "", messageRequest: { case: "fileContainingSymbol" as const, value: "railfence.railproxy.v1.RailProxyService.GetSubmission" } };
      yield { host: "", messageRequest: { case: "fileContainingSymbol" as const, value: "railfence.railproxy.v1.SUBMISSION_STATE_TIMEOUT" } };
      yield { host: "", messageRequest: { case: "fileByFilename" as const, value: "no/such/file.proto" } };
      yield { host: "", messageRequest: { case: "allExtensionNumbersOfType" as const, value: "railfence.railproxy.v1.Submission" } };
    }
    const answers = [];
    for await (const a of client.serverReflectionInfo(requests())) answers.push(a);
    expect(answers).toHaveLength(4);
    for (const a of answers.slice(0, 2)) {
      expect(a.messageResponse.case).toBe("fileDescriptorResponse");
      const names = (a.messageResponse.value as { fileDescriptorProto: Uint8Array[] }).fileDescriptorProto.map(
        (b) => fromBinary(FileDescriptorProtoSchema, b).name,
      );
      // Dependencies first, the file itself last.
      expect(names[names.length - 1]).toBe("railfence/railproxy/v1/rail_proxy.proto");
      expect(names).toContain("railfence/common/v1/money.proto");
      expect(names).toContain("google/protobuf/timestamp.proto");
    }
    expect(answers[2]!.messageResponse).toMatchObject({ case: "errorResponse", value: { errorCode: 5 } });
    expect(answers[3]!.messageResponse).toMatchObject({
      case: "allExtensionNumbersResponse",
      value: { baseTypeName: "railfence.railproxy.v1.Submission", extensionNumber: [] },
    });
  });

  it("serves the files a refusal mentions: google.rpc.ErrorInfo and google.rpc.Status, with their imports", async () => {
    const client = t.mesh.client(ServerReflection, t.mesh.payouts!.url, "operator", { idleConnectionTimeoutMs: 1000 });
    async function* requests() {
      yield { host: "", messageRequest: { case: "fileContainingSymbol" as const, value: "google.rpc.ErrorInfo" } };
      yield { host: "", messageRequest: { case: "fileContainingSymbol" as const, value: "google.rpc.RetryInfo" } };
      yield { host: "", messageRequest: { case: "fileContainingSymbol" as const, value: "google.rpc.Status" } };
      yield { host: "", messageRequest: { case: "fileByFilename" as const, value: "google/rpc/error_details.proto" } };
    }
    const files = [];
    for await (const a of client.serverReflectionInfo(requests())) {
      expect(a.messageResponse.case).toBe("fileDescriptorResponse");
      files.push(
        (a.messageResponse.value as { fileDescriptorProto: Uint8Array[] }).fileDescriptorProto.map((b) => fromBinary(FileDescriptorProtoSchema, b).name),
      );
    }
    expect(files).toEqual([
      ["google/protobuf/duration.proto", "google/rpc/error_details.proto"],
      ["google/protobuf/duration.proto", "google/rpc/error_details.proto"],
      ["google/protobuf/any.proto", "google/rpc/status.proto"],
      ["google/protobuf/duration.proto", "google/rpc/error_details.proto"],
    ]);
  });

  it("a tool with nothing but reflection decodes a refusal's ErrorInfo (what grpcurl does with an Any it meets)", async () => {
    // buf curl prints each detail as type + base64 value (its error writer decodes only types
    // compiled into it); grpcurl resolves the type through reflection, as done here.
    const r = await bufCurl(["--protocol", "grpc", "-d", "{}", `${t.mesh.lock!.url}/railfence.lock.v1.LockService/Inspect`]);
    expect(r.code).not.toBe(0);
    const printed = JSON.parse(r.stderr) as { code: string; details: { type: string; value: string }[] };
    expect(printed.code).toBe("invalid_argument");
    const detail = printed.details.find((d) => d.type === "google.rpc.ErrorInfo")!;

    const client = t.mesh.client(ServerReflection, t.mesh.lock!.url, "operator", { idleConnectionTimeoutMs: 1000 });
    async function* requests() {
      yield { host: "", messageRequest: { case: "fileContainingSymbol" as const, value: detail.type } };
    }
    const protos = [];
    for await (const a of client.serverReflectionInfo(requests())) {
      expect(a.messageResponse.case, JSON.stringify(a.messageResponse.value)).toBe("fileDescriptorResponse");
      for (const b of (a.messageResponse.value as { fileDescriptorProto: Uint8Array[] }).fileDescriptorProto)
        protos.push(fromBinary(FileDescriptorProtoSchema, b));
    }
    const registry = createFileRegistry(create(FileDescriptorSetSchema, { file: protos }));
    const type = registry.getMessage(detail.type);
    expect(type, `reflection did not describe ${detail.type}`).toBeDefined();
    const info = toJson(type!, fromBinary(type!, Buffer.from(detail.value, "base64")));
    expect(info).toEqual({ reason: "FIELD_REQUIRED", domain: "railfence.dev", metadata: { field: "key" } });
  });

  it("a malformed reflection message is invalid_argument MALFORMED_REQUEST, for a plain grpc-js client; a well-formed one is answered", async () => {
    const op = t.mesh.identityFiles("operator");
    const creds = grpc.credentials.createSsl(readFileSync(op.ca), readFileSync(op.key), readFileSync(op.cert));
    const client = new grpc.Client(t.mesh.proxies[0]!.url.replace("https://", ""), creds);
    const raw = (b: Buffer) => b;
    /** Sends one message of raw bytes on the reflection stream; resolves with the answers and the final status. */
    const exchange = (message: Buffer) =>
      new Promise<{ answers: number; status: grpc.StatusObject }>((resolve) => {
        let answers = 0;
        const call = client.makeBidiStreamRequest("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", raw, raw);
        call.on("data", () => answers++);
        call.on("error", () => {});
        call.on("status", (status: grpc.StatusObject) => resolve({ answers, status }));
        call.write(message);
        call.end();
      });
    try {
      // list_services = "" (field 7, length 0): well-formed, answered.
      const ok = await exchange(Buffer.from([0x3a, 0x00]));
      expect(ok.status.code, ok.status.details).toBe(grpc.status.OK);
      expect(ok.answers).toBe(1);
      // host (field 1) declares 5 bytes and carries 1: truncated.
      const truncated = await exchange(Buffer.from([0x0a, 0x05, 0x61]));
      expect(truncated.status.code, truncated.status.details).toBe(grpc.status.INVALID_ARGUMENT);
      expect(truncated.answers).toBe(0);
      const details = truncated.status.metadata.get("grpc-status-details-bin")[0] as Buffer;
      expect(details.toString("latin1")).toContain("MALFORMED_REQUEST");
      // file_by_filename (field 3, a string) sent as a varint: the wrong wire type.
      const wrongType = await exchange(Buffer.from([0x18, 0x01]));
      expect(wrongType.status.code, wrongType.status.details).toBe(grpc.status.INVALID_ARGUMENT);
    } finally {
      client.close();
    }
  });
});
