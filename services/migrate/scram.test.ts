/** SCRAM-SHA-256 verifiers: checked against the exchange published in RFC 7677 §3. */
import { createHash, createHmac } from "node:crypto";
import { describe, expect, it } from "vitest";
import { saslprep, scramSha256Verifier } from "./scram.js";

// RFC 7677 §3: user "user", password "pencil".
const SALT = Buffer.from("W22ZaJ0SNY7soEsUEjb6gQ==", "base64");
const CLIENT_FIRST_BARE = "n=user,r=rOprNGfwEbeRWgbNEkqO";
const SERVER_FIRST = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
const CLIENT_FINAL_NO_PROOF = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
const CLIENT_PROOF = "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
const SERVER_SIGNATURE = "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";
const AUTH_MESSAGE = `${CLIENT_FIRST_BARE},${SERVER_FIRST},${CLIENT_FINAL_NO_PROOF}`;

/** What a server holding the verifier checks: the client's proof against StoredKey, and its own signature from ServerKey. */
function check(verifier: string): { proofAccepted: boolean; serverSignature: string } {
  const m = /^SCRAM-SHA-256\$(\d+):([^$]+)\$([^:]+):(.+)$/.exec(verifier)!;
  const storedKey = Buffer.from(m[3]!, "base64");
  const serverKey = Buffer.from(m[4]!, "base64");
  const clientSignature = createHmac("sha256", storedKey).update(AUTH_MESSAGE).digest();
  const proof = Buffer.from(CLIENT_PROOF, "base64");
  const clientKey = Buffer.from(proof.map((b, i) => b ^ clientSignature[i]!));
  return {
    proofAccepted: createHash("sha256").update(clientKey).digest().equals(storedKey),
    serverSignature: createHmac("sha256", serverKey).update(AUTH_MESSAGE).digest("base64"),
  };
}

describe("scramSha256Verifier", () => {
  it("derives the keys of RFC 7677's example: its client proof verifies and its server signature matches", () => {
    const v = scramSha256Verifier("pencil", SALT, 4096);
    expect(v).toMatch(/^SCRAM-SHA-256\$4096:W22ZaJ0SNY7soEsUEjb6gQ==\$[A-Za-z0-9+/=]{44}:[A-Za-z0-9+/=]{44}$/);
    expect(check(v)).toEqual({ proofAccepted: true, serverSignature: SERVER_SIGNATURE });
  });

  it("another password gives keys that refuse the proof (negative control)", () => {
    expect(check(scramSha256Verifier("pencil2", SALT, 4096))).toMatchObject({ proofAccepted: false });
  });

  it("salts every verifier afresh", () => {
    expect(scramSha256Verifier("pencil")).not.toBe(scramSha256Verifier("pencil"));
  });

  it("applies SASLprep as the pg client does: non-ASCII spaces, soft hyphens, NFKC", () => {
    expect(saslprep("a\u00A0b\u00ADc\uFB01")).toBe("a bcfi");
    expect(scramSha256Verifier("a\u00A0b", SALT)).toBe(scramSha256Verifier("a b", SALT));
    expect(saslprep("plain-ASCII_password!")).toBe("plain-ASCII_password!");
  });
});
