/**
 * The database role each service logs in with (migrations/paydb/008_service_roles.sql,
 * migrations/lockdb/002_service_roles.sql). Least privilege: each role can run only the
 * statements its service uses; only the owner (the migration job) can DELETE money records,
 * TRUNCATE, ALTER or disable triggers. A deployment creates one login role per component in
 * the group (docs/deploy.md); the harness lets the groups log in on its throwaway servers.
 */
import type { DatabaseKind } from "./migrate.js";

export type ServiceRole = "rail-proxy" | "executor" | "payouts" | "reconciler" | "lock" | "auditor";

export const SERVICE_ROLES: Readonly<Record<ServiceRole, { name: string; database: DatabaseKind }>> = {
  "rail-proxy": { name: "railfence_rail_proxy", database: "paydb" },
  executor: { name: "railfence_executor", database: "paydb" },
  payouts: { name: "railfence_payouts", database: "paydb" },
  reconciler: { name: "railfence_reconciler", database: "paydb" },
  lock: { name: "railfence_lock", database: "lockdb" },
  /** `railfence check`: reads paydb (and makes temporary tables), writes nothing. */
  auditor: { name: "railfence_auditor", database: "paydb" },
};

/** The role that owns the databases and runs migrations in the harness. */
export const OWNER_ROLE = "railfence_owner";
