import { describe, it } from "vitest";
import { etcdBinary } from "../../tools/harness/etcd.js";
import { drillSuite } from "./drill-suite.js";

// CI installs etcd-server; on a machine without it this file says so instead of failing.
if (etcdBinary()) drillSuite("etcd");
else describe.skip("C5 drills on the etcd lock backend (no etcd binary)", () => it("needs etcd", () => {}));
