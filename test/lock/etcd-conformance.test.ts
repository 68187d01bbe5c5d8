import { describeWithEtcd } from "../support/etcd-suite.js";
import { lockConformance } from "./conformance.js";
import { etcdFixture } from "./lock-fixture.js";

// CI installs etcd-server and requires it; elsewhere the etcd half of the suite is skipped, visibly.
describeWithEtcd("lock conformance: etcd backend", () => lockConformance(() => etcdFixture()));
