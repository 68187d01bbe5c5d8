/**
 * Endpoint resolution: flag > env > .railfence/endpoints.json > default, per endpoint, with
 * the source remembered; malformed configuration is a usage error, never a silent fallback.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { redactUrl, resolveEndpoints, splitUrls } from "../../services/cli/endpoints.js";
import { UsageError } from "../../services/cli/exit-codes.js";

let cwd: string;

const fileContent = {
  paydb: "postgres://app@127.0.0.1:5432/paydb",
  rail: "http://127.0.0.1:7300",
  railProxy: ["http://127.0.0.1:7201", "http://127.0.0.1:7202"],
  lock: "http://127.0.0.1:7101",
  payouts: "http://127.0.0.1:7401",
  railControl: "http://127.0.0.1:7301",
  metrics: { "rail-proxy-1": "http://127.0.0.1:9201/metrics" },
};

function writeFile(content: unknown): void {
  mkdirSync(join(cwd, ".railfence"), { recursive: true });
  writeFileSync(join(cwd, ".railfence", "endpoints.json"), typeof content === "string" ? content : JSON.stringify(content));
}

beforeEach(() => {
  cwd = mkdtempSync(join(tmpdir(), "railfence-cli-endpoints-"));
});
afterEach(() => {
  rmSync(cwd, { recursive: true, force: true });
});

describe("endpoint precedence", () => {
  it("with nothing configured, services fall back to their default ports and paydb stays unset", () => {
    const e = resolveEndpoints({ flags: {}, env: {}, cwd });
    expect(e.payouts).toEqual({ value: "http://127.0.0.1:7400", source: "default" });
    expect(e.railProxy).toEqual({ value: ["http://127.0.0.1:7200"], source: "default" });
    expect(e.lock).toEqual({ value: "http://127.0.0.1:7100", source: "default" });
    expect(e.paydb).toBeUndefined();
    expect(e.file).toEqual({ path: join(cwd, ".railfence", "endpoints.json"), found: false });
  });

  it("the endpoints file beats the defaults, key by key, and its informational entries are kept", () => {
    writeFile(fileContent);
    const e = resolveEndpoints({ flags: {}, env: {}, cwd });
    expect(e.payouts).toEqual({ value: "http://127.0.0.1:7401", source: "file" });
    expect(e.railProxy).toEqual({ value: fileContent.railProxy, source: "file" });
    expect(e.lock).toEqual({ value: "http://127.0.0.1:7101", source: "file" });
    expect(e.paydb).toEqual({ value: fileContent.paydb, source: "file" });
    expect(e.railControl?.value).toBe("http://127.0.0.1:7301");
    expect(e.metrics?.value).toEqual(fileContent.metrics);
    expect(e.file.found).toBe(true);
  });

  it("env beats the file, and a comma-separated env list gives several replicas", () => {
    writeFile(fileContent);
    const env = {
      RAILFENCE_PAYOUTS_URL: "http://10.0.0.1:7400",
      RAILFENCE_RAIL_PROXY_URL: "http://10.0.0.2:7200, http://10.0.0.3:7200",
      RAILFENCE_PAYDB_URL: "postgres://ops@10.0.0.4/paydb",
    };
    const e = resolveEndpoints({ flags: {}, env, cwd });
    expect(e.payouts).toEqual({ value: "http://10.0.0.1:7400", source: "env" });
    expect(e.railProxy).toEqual({ value: ["http://10.0.0.2:7200", "http://10.0.0.3:7200"], source: "env" });
    expect(e.paydb).toEqual({ value: "postgres://ops@10.0.0.4/paydb", source: "env" });
    // Not set in env: still from the file.
    expect(e.lock).toEqual({ value: "http://127.0.0.1:7101", source: "file" });
  });

  it("flags beat env and file; repeated --rail-proxy flags accumulate", () => {
    writeFile(fileContent);
    const env = { RAILFENCE_LOCK_URL: "http://10.0.0.9:7100", RAILFENCE_RAIL_PROXY_URL: "http://10.0.0.2:7200" };
    const e = resolveEndpoints({
      flags: { lock: "http://192.168.1.1:7100/", railProxy: ["http://192.168.1.2:7200", "http://192.168.1.3:7200,http://192.168.1.4:7200"] },
      env,
      cwd,
    });
    // A trailing slash is dropped so paths join cleanly.
    expect(e.lock).toEqual({ value: "http://192.168.1.1:7100", source: "flag" });
    expect(e.railProxy).toEqual({ value: ["http://192.168.1.2:7200", "http://192.168.1.3:7200", "http://192.168.1.4:7200"], source: "flag" });
    expect(e.payouts?.source).toBe("file");
  });

  it("an empty env value does not shadow the file", () => {
    writeFile(fileContent);
    const e = resolveEndpoints({ flags: {}, env: { RAILFENCE_PAYOUTS_URL: "", RAILFENCE_RAIL_PROXY_URL: " , " }, cwd });
    expect(e.payouts?.source).toBe("file");
    expect(e.railProxy?.source).toBe("file");
  });

  it("--endpoints-file (and RAILFENCE_ENDPOINTS_FILE) point at another file", () => {
    const other = join(cwd, "elsewhere.json");
    writeFileSync(other, JSON.stringify({ payouts: "http://127.0.0.1:7499" }));
    expect(resolveEndpoints({ flags: { endpointsFile: other }, env: {}, cwd }).payouts?.value).toBe("http://127.0.0.1:7499");
    expect(resolveEndpoints({ flags: {}, env: { RAILFENCE_ENDPOINTS_FILE: other }, cwd }).payouts?.value).toBe("http://127.0.0.1:7499");
  });
});

describe("malformed configuration is a usage error", () => {
  const cases: Array<[string, () => unknown, RegExp]> = [
    ["a file that is not JSON", () => writeFile("{nope"), /not valid JSON/],
    ["a file holding an array", () => writeFile([]), /JSON object/],
    ["railProxy of numbers", () => writeFile({ railProxy: [7200] }), /railProxy/],
    ["a non-string lock", () => writeFile({ lock: 7100 }), /"lock"/],
    ["metrics that is not an object", () => writeFile({ metrics: ["x"] }), /metrics/],
    ["a service URL that is not http", () => writeFile({ payouts: "ftp://x" }), /http/],
    ["a service URL that is not a URL", () => writeFile({ payouts: "localhost:7400" }), /http/],
    ["a paydb URL that is not postgres", () => writeFile({ paydb: "http://db" }), /postgres/],
  ];
  for (const [name, setup, message] of cases) {
    it(`refuses ${name}`, () => {
      setup();
      expect(() => resolveEndpoints({ flags: {}, env: {}, cwd })).toThrow(UsageError);
      expect(() => resolveEndpoints({ flags: {}, env: {}, cwd })).toThrow(message);
    });
  }

  it("refuses a bad flag URL even when the file is fine", () => {
    writeFile(fileContent);
    expect(() => resolveEndpoints({ flags: { railProxy: ["not a url"] }, env: {}, cwd })).toThrow(UsageError);
  });
});

describe("helpers", () => {
  it("splitUrls trims and drops empties", () => {
    expect(splitUrls([" a ,b,,", "c"])).toEqual(["a", "b", "c"]);
  });

  it("redactUrl masks a password and leaves a password-less URL alone", () => {
    expect(redactUrl("postgres://app:s3cret@db:5432/paydb")).not.toContain("s3cret");
    expect(redactUrl("postgres://app:s3cret@db:5432/paydb")).toContain("****");
    expect(redactUrl("postgres://app@db:5432/paydb")).toBe("postgres://app@db:5432/paydb");
  });
});
