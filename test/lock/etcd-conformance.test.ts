import { describe } from "vitest";
import { etcdBinary } from "../../tools/harness/etcd.js";
import { lockConformance } from "./conformance.js";
import { etcdFixture } from "./lock-fixture.js";

// CI installs etcd-server; elsewhere the etcd half of the suite is skipped, visibly.
describe.skipIf(!etcdBinary())("lock conformance: etcd backend", () => lockConformance(() => etcdFixture()));
