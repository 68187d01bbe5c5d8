import { describe, expect, it } from "vitest";
import { loadConfig, ConfigError } from "./config.js";
import { processConfig, processEnvShape, rpcStackOf } from "./process-config.js";
import { z } from "zod";

describe("the RPC stack switch is part of the config", () => {
  const parse = (value?: string) =>
    processConfig(loadConfig(z.object(processEnvShape(9100)), value === undefined ? {} : { RAILFENCE_CONNECT_UNARY: value }) as never);

  it("unset or 0: direct on both sides; 1/both: connect-node on both; server/client: that side only", () => {
    expect(parse().rpcStack).toEqual({ directServer: true, directClient: true });
    expect(parse("0").rpcStack).toEqual({ directServer: true, directClient: true });
    expect(parse("1").rpcStack).toEqual({ directServer: false, directClient: false });
    expect(rpcStackOf("both")).toEqual({ directServer: false, directClient: false });
    expect(rpcStackOf("server")).toEqual({ directServer: false, directClient: true });
    expect(rpcStackOf("client")).toEqual({ directServer: true, directClient: false });
  });

  it("an unknown value is a configuration error naming the variable, not silently the default", () => {
    expect(() => parse("yes")).toThrow(ConfigError);
    expect(() => parse("yes")).toThrow(/RAILFENCE_CONNECT_UNARY/);
  });
});
