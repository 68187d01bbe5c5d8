import { describeWithEtcd } from "../support/etcd-suite.js";
import { drillSuite } from "./drill-suite.js";

// CI installs etcd-server and requires it; on a machine without it this file is skipped, visibly.
describeWithEtcd("etcd", () => drillSuite("etcd"));
