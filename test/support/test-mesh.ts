/**
 * Test fixture: a Mesh on the run's shared PostgreSQL with databases unique to this mesh.
 * Always stop it in afterAll/afterEach (it stops every process it started, by pid).
 */
import { randomBytes } from "node:crypto";
import { inject } from "vitest";
import { Mesh, type MeshOptions } from "../../tools/harness/mesh.js";

export function uniqueSuffix(): string {
  return `_${randomBytes(5).toString("hex")}`;
}

export function testMesh(opts: MeshOptions = {}): Mesh {
  return new Mesh({
    postgresUrl: opts.postgres ? undefined : inject("pgUrl"),
    dbSuffix: uniqueSuffix(),
    ...opts,
  });
}
