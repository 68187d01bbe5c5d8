/**
 * Starts one real PostgreSQL server for the whole run (unless RAILFENCE_TEST_PG_URL points at an
 * existing one). Each test file creates its own uniquely named databases on it, so files are
 * independent of each other and of order. Tests that must stop PostgreSQL start their own.
 */
import type { TestProject } from "vitest/node";
import { PostgresServer } from "../../tools/harness/postgres.js";

declare module "vitest" {
  export interface ProvidedContext {
    pgUrl: string;
  }
}

let server: PostgresServer | undefined;

export async function setup(project: TestProject): Promise<void> {
  const external = process.env.RAILFENCE_TEST_PG_URL;
  if (external) {
    project.provide("pgUrl", external);
    return;
  }
  server = await PostgresServer.start({ durable: false });
  project.provide("pgUrl", server.url("postgres"));
}

export async function teardown(): Promise<void> {
  await server?.destroy();
}
