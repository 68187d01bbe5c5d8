/**
 * SCRAM-SHA-256 password verifiers (RFC 5802, RFC 7677), computed here so that a login role's
 * password never travels to PostgreSQL in clear: `ALTER ROLE .. PASSWORD '<verifier>'` stores
 * the verifier as is, while a plaintext password in that statement would land in the server's
 * log whenever log_statement covers DDL. psql's \password does the same (PQencryptPasswordConn).
 */
import { createHash, createHmac, pbkdf2Sync, randomBytes } from "node:crypto";

/** PostgreSQL's default scram_iterations. */
const ITERATIONS = 4096;

/**
 * SASLprep as the pg client applies it before deriving its proof (node_modules/pg/lib/crypto/sasl.js):
 * non-ASCII spaces to U+0020, "commonly mapped to nothing" removed, NFKC. The verifier must be
 * derived from the same bytes the services' client will derive from, or they could not log in.
 * Identity for ASCII passwords, where PostgreSQL's own SASLprep agrees.
 */
export function saslprep(password: string): string {
  return password.replace(/[\u00A0\u1680\u2000-\u200B\u202F\u205F\u3000]/g, " ").replace(/[\u00AD\u034F\u1806\u180B\u180C\u180D\u200C\u200D\u2060\uFE00-\uFE0F\uFEFF]/g, "").normalize("NFKC");
}

/** `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`, the form pg_authid stores. */
export function scramSha256Verifier(password: string, salt: Buffer = randomBytes(16), iterations = ITERATIONS): string {
  const salted = pbkdf2Sync(Buffer.from(saslprep(password), "utf8"), salt, iterations, 32, "sha256");
  const clientKey = createHmac("sha256", salted).update("Client Key").digest();
  const storedKey = createHash("sha256").update(clientKey).digest();
  const serverKey = createHmac("sha256", salted).update("Server Key").digest();
  return `SCRAM-SHA-256$${iterations}:${salt.toString("base64")}$${storedKey.toString("base64")}:${serverKey.toString("base64")}`;
}
